"""Recall hunt: candidate pitfall sites in graph code of a corpus, and which of them tfcheck reported.

    .venv/bin/tfcheck check --config CFG --no-cache --exit-zero --format json -o FINDINGS -j 2 CORPUS
    .venv/bin/python benchmarks/recall_hunt.py CORPUS --config CFG --findings FINDINGS --sample 100 --seed 14

Graph code is what tfcheck's engine says it is (`FileFacts.graph_nodes`), with the same configuration
and the same project pass as `tfcheck check` (roots that other files of the run give a file). In it,
the script lists every site of these categories, each a shape that can be a tf.function pitfall:

    print       a Python `print(...)` call                 (runs once per trace)
    numpy       a `.numpy()` call                          (fails on a symbolic tensor)
    assert      an `assert` statement                      (on a tensor: not checked at run time)
    append      `.append/.extend/.insert(...)` on a name bound outside the function or on `self.`
    attr-write  an assignment to `self.X` or to an attribute of a name bound outside the function
    variable    a `tf.Variable(...)` call                  (created on every trace)
    for         a Python `for` over something not surely a tensor or dataset (unrolled)
    global      a `global` statement
    clock-rng   `time.*()`, `random.*()`, `np.random.*()`  (frozen at trace time)

It prints how many sites each category has in the corpus and how many of them carry a finding (any
finding of tfcheck whose line lies on the site's lines), then a fixed-seed random sample spread over
the categories, each site with its file:line, the codes reported there, and its source line. Reading
each sampled site and deciding whether it is a real pitfall is the human part: recall on the hunt is
reported real pitfalls / real pitfalls in the sample (docs/precision.md).
"""

from __future__ import annotations

import argparse
import ast
import json
import random
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tfcheck.config import Config, load_config
from tfcheck.engine import FileFacts, ParseFailure
from tfcheck.engine.kinds import GRAPH_KINDS
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.engine.source import decode_source, parse_source
from tfcheck.files import discover
from tfcheck.findings import FileResult
from tfcheck.jobs import FileJob, make_jobs
from tfcheck.project import analyze_project

CATEGORIES = ("print", "numpy", "assert", "append", "attr-write", "variable", "for", "global", "clock-rng")
_APPENDS = frozenset({"append", "extend", "insert"})
_CLOCK_RNG = ("time.", "random.", "numpy.random.")


@dataclass(frozen=True)
class Site:
    """One candidate site: where it is, what shape it has, and which graph function it is in."""

    category: str
    path: str
    line: int
    end_line: int
    function: str
    why: str  # why the function is graph code (the engine's reason)
    source: str


class Hunter:
    """Collects the sites of every file's last analysis (the one with all its project-pass roots)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.sites: dict[str, list[Site]] = {}
        self.errors: list[str] = []

    def analyze_many(self, jobs: Sequence[FileJob]) -> list[FileResult]:
        return [self.analyze(job) for job in jobs]

    def analyze(self, job: FileJob) -> FileResult:
        """A file's facts, its sites recorded, and the summary the project pass reads."""
        result = FileResult(job.display)
        try:
            source = parse_source(job.display, decode_source(job.display, job.path.read_bytes()))
            facts = FileFacts(source, job.module, self.config.engine, dict(job.extra_roots), job.is_package)
            self.sites[job.display] = sorted(candidate_sites(facts, job.display), key=lambda s: s.line)
        except (ParseFailure, OSError, RecursionError) as exc:
            self.errors.append(f"{job.display}: {exc}")
            return result
        result.external_calls = [(c.target, c.caller, c.line) for c in facts.graph.external_calls]
        return result


def candidate_sites(facts: FileFacts, path: str) -> Iterator[Site]:
    """Every candidate site in the graph code of one file."""
    lines = facts.source.text.splitlines()

    def site(category: str, node: ast.AST, info: FunctionInfo) -> Site:
        line = node.lineno  # type: ignore[attr-defined]
        return Site(category, path, line, getattr(node, "end_lineno", None) or line, info.qualname,
                    facts.graph_functions.get(info, ""), lines[line - 1].strip() if line <= len(lines) else "")

    for node, info in facts.graph_nodes(ast.Call):
        assert isinstance(node, ast.Call)
        category = _call_category(facts, node, info)
        if category is not None:
            yield site(category, node, info)
    for node, info in facts.graph_nodes(ast.Assert):
        yield site("assert", node, info)
    for node, info in facts.graph_nodes(ast.Global):
        yield site("global", node, info)
    for node, info in facts.graph_nodes(ast.For):
        assert isinstance(node, ast.For)
        if not facts.kinds(node.iter) & GRAPH_KINDS:
            yield site("for", node, info)
    for node, info in facts.graph_nodes(ast.Assign, ast.AugAssign, ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[attr-defined]
        if any(_outer_attribute(facts, target, info) for target in targets):
            yield site("attr-write", node, info)


def _call_category(facts: FileFacts, call: ast.Call, info: FunctionInfo) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        if func.attr == "numpy" and not call.args and not call.keywords:
            return "numpy"
        if func.attr in _APPENDS and _outer_receiver(facts, func.value, info):
            return "append"
    qualified = facts.resolve(func) or ""
    if qualified == "builtins.print":
        return "print"
    if qualified == "tensorflow.Variable":
        return "variable"
    if qualified.startswith(_CLOCK_RNG):
        return "clock-rng"
    return None


def _outer_receiver(facts: FileFacts, receiver: ast.expr, info: FunctionInfo) -> bool:
    """`self.x`, `self`, or a name whose binding is not local to `info` (a global, a closure's variable)."""
    if facts.is_self_attribute(receiver) or (isinstance(receiver, ast.Name) and receiver.id == "self"):
        return True
    if not isinstance(receiver, ast.Name):
        return False
    scope = facts.binding_scope(receiver)
    return scope is None or scope.function_scope() is not info.scope


def _outer_attribute(facts: FileFacts, target: ast.expr, info: FunctionInfo) -> bool:
    """An assignment target that writes an attribute of `self` or of an object bound outside `info`."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return any(_outer_attribute(facts, element, info) for element in target.elts)
    return isinstance(target, ast.Attribute) and _outer_receiver(facts, target.value, info)


def reported_lines(findings: Path) -> dict[str, dict[int, set[str]]]:
    """path -> line -> the codes tfcheck reported there (from `--format json`)."""
    reported: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for finding in json.loads(findings.read_text(encoding="utf-8")):
        reported[finding["path"]][finding["line"]].add(finding["code"])
    return reported


def codes_at(site: Site, reported: dict[str, dict[int, set[str]]]) -> list[str]:
    by_line = reported.get(site.path, {})
    return sorted({code for line in range(site.line, site.end_line + 1) for code in by_line.get(line, ())})


def spread_sample(by_category: dict[str, list[Site]], size: int, seed: int) -> list[Site]:
    """`size` sites, as evenly over the categories as their counts allow, drawn with `seed`."""
    rng = random.Random(seed)
    quotas = dict.fromkeys(by_category, 0)
    left = size
    while left and any(quotas[c] < len(by_category[c]) for c in quotas):
        for category in sorted(quotas):
            if left and quotas[category] < len(by_category[category]):
                quotas[category] += 1
                left -= 1
    return [site for category in sorted(quotas) for site in rng.sample(by_category[category], quotas[category])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, nargs="+")
    parser.add_argument("--config", type=Path, help="the tfcheck.toml `tfcheck check` ran with")
    parser.add_argument("--findings", type=Path, required=True, help="`tfcheck check --format json` output")
    parser.add_argument("--sample", type=int, default=100)
    parser.add_argument("--seed", type=int, default=14)
    args = parser.parse_args()
    config = load_config(explicit=args.config)
    hunter = Hunter(config)
    analyze_project(make_jobs(discover(args.corpus, config).files, config), hunter.analyze_many)
    reported = reported_lines(args.findings)
    by_category: dict[str, list[Site]] = {category: [] for category in CATEGORIES}
    for path in sorted(hunter.sites):
        for site in hunter.sites[path]:
            by_category[site.category].append(site)
    print("| category | sites in graph code | with a finding |\n|---|---:|---:|")
    for category, sites in by_category.items():
        print(f"| {category} | {len(sites):,} | {sum(1 for s in sites if codes_at(s, reported)):,} |")
    print(f"\nsample of {args.sample}, seed {args.seed}:")
    for number, site in enumerate(spread_sample(by_category, args.sample, args.seed), 1):
        print(f"{number:3d} {site.category:10s} {site.path}:{site.line} [{','.join(codes_at(site, reported)) or '-'}]"
              f" in {site.function} ({site.why}): {site.source}")
    for error in hunter.errors:
        print(f"not analysed: {error}")


if __name__ == "__main__":
    main()
