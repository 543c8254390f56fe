"""Judged findings: which findings of `tfcheck check` on a corpus a reader who did not write the rules
has judged (../shared/JUDGING.md), and the per-rule precision they give.

    tfcheck check --no-cache --exit-zero --format json -o FINDINGS.json -j 2 CORPUS
    python benchmarks/verdicts.py pending FINDINGS.json --corpus CORPUS --verdicts benchmarks/verdicts/people.jsonl \\
        [--ran-in DIR] [--sample 30 --seed 36] [--out pending.jsonl]
    python benchmarks/verdicts.py add JUDGED.jsonl --verdicts benchmarks/verdicts/people.jsonl
    python benchmarks/verdicts.py table FINDINGS.json --corpus CORPUS --verdicts benchmarks/verdicts/people.jsonl
    python benchmarks/verdicts.py recall benchmarks/verdicts/people-hunt.jsonl FINDINGS.json --corpus CORPUS

A finding is known by its file (relative to the corpus), its rule and the text of its line, not by its
line number, so a verdict stays attached when the linter or the corpus moves lines around; the number
is kept to show where it was. Each verdict records the tfcheck commit it was judged at and who judged
it. `pending` lists the findings nobody has judged (for a rule with more than `--sample` findings,
only those of a seeded random sample of that size: the sample is drawn over all of the rule's
findings, judged or not, so the same seed keeps asking for the same ones). `add` appends judges'
verdicts (one JSON object a line: key, verdict, reason, judge, judged_at). `table` prints, per rule,
the findings, how many of them are judged, TRUE / FALSE / UNSURE, precision = TRUE / (TRUE + FALSE)
over the judged ones, and findings per 1,000 lines when `--lines` is given. TFC000 (a file that
does not parse) is left out: it judges no code. `recall` reads a hunt: candidate sites found and
judged without the linter, each with the rule that claims its pitfall (`none` when no rule does), and
counts per rule the real pitfalls the report has a finding of that rule on.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import random
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

VERDICTS = ("TRUE", "FALSE", "UNSURE")
# TFC000 says a file could not be read or parsed: it judges no code, so it has no precision to measure.
UNJUDGED_RULES = frozenset({"TFC000"})


@dataclass(frozen=True)
class Judgeable:
    """One finding as a judge sees it: where it is, what it says, and its stable key."""

    key: str
    path: str  # relative to the corpus
    line: int  # in the file, or in the notebook cell `cell`
    code: str
    message: str
    source: str
    cell: int | None = None


def finding_key(path: str, code: str, source_line: str, occurrence: int) -> str:
    """Stable across line moves: the file, the rule, the stripped line and which of its equal lines it is."""
    digest = hashlib.sha256(f"{path}\0{code}\0{source_line.strip()}\0{occurrence}".encode()).hexdigest()
    return digest[:16]


def judgeables(findings_file: Path, corpus: Path, ran_in: Path = Path(".")) -> list[Judgeable]:
    """The findings of a `--format json` report, keyed, with their line's text read from the corpus.
    `ran_in` is the folder `tfcheck check` ran in: the report's relative paths start there."""
    corpus = corpus.resolve()
    seen: Counter[tuple[str, str, str]] = Counter()
    found = []
    report = [f for f in json.loads(findings_file.read_text()) if f["code"] not in UNJUDGED_RULES]
    for finding in sorted(report, key=lambda f: (f["path"], f["line"], f["code"])):
        absolute = (ran_in / finding["path"]).resolve()
        relative = absolute.relative_to(corpus).as_posix() if absolute.is_relative_to(corpus) else finding["path"]
        source = _line_of(absolute, finding["line"], finding.get("cell"))
        occurrence = seen[(relative, finding["code"], source.strip())]
        seen[(relative, finding["code"], source.strip())] += 1
        found.append(Judgeable(finding_key(relative, finding["code"], source, occurrence), relative, finding["line"],
                               finding["code"], finding["message"], source.strip(), finding.get("cell")))
    return found


def _line_of(path: Path, line: int, cell: int | None) -> str:
    """The finding's line: of the file, or of the notebook cell it names (cells count from 1)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
        if cell is not None:
            source = json.loads(text)["cells"][cell - 1]["source"]
            text = source if isinstance(source, str) else "".join(source)
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return ""
    lines = text.splitlines()
    return lines[line - 1] if 1 <= line <= len(lines) else ""


def read_verdicts(path: Path) -> dict[str, dict]:
    """The verdicts file, the last verdict of each key winning (a later judgement replaces one)."""
    if not path.exists():
        return {}
    verdicts = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.strip():
            record = json.loads(line)
            if record.get("verdict") not in VERDICTS:
                raise SystemExit(f"{path}:{number}: verdict must be one of {', '.join(VERDICTS)}")
            verdicts[record["key"]] = record
    return verdicts


def sampled(found: list[Judgeable], size: int, seed: int) -> list[Judgeable]:
    """Per rule, every finding, or a seeded random sample of `size` when the rule has more."""
    by_rule: dict[str, list[Judgeable]] = defaultdict(list)
    for item in found:
        by_rule[item.code].append(item)
    chosen = []
    for code in sorted(by_rule):
        items = sorted(by_rule[code], key=lambda j: j.key)
        chosen.extend(items if len(items) <= size else random.Random(f"{seed}-{code}").sample(items, size))
    return sorted(chosen, key=lambda j: (j.path, j.line))


def pending(found: list[Judgeable], verdicts: dict[str, dict], size: int, seed: int) -> Iterator[Judgeable]:
    return (item for item in sampled(found, size, seed) if item.key not in verdicts)


def table(found: list[Judgeable], verdicts: dict[str, dict], lines: int | None) -> str:
    """The markdown precision table, per rule and overall."""
    rows = ["| rule | findings | per 1k lines | judged | TRUE | FALSE | UNSURE | precision |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    by_rule: dict[str, list[Judgeable]] = defaultdict(list)
    for item in found:
        by_rule[item.code].append(item)
    for code in sorted(by_rule):
        rows.append(_row(code, by_rule[code], verdicts, lines))
    rows.append(_row("**all**", found, verdicts, lines))
    return "\n".join(rows)


def _row(label: str, items: list[Judgeable], verdicts: dict[str, dict], lines: int | None) -> str:
    counts = Counter(verdicts[item.key]["verdict"] for item in items if item.key in verdicts)
    decided = counts["TRUE"] + counts["FALSE"]
    precision = f"{counts['TRUE'] / decided:.2f}" if decided else "-"
    rate = f"{1000 * len(items) / lines:.3f}" if lines else "-"
    return (f"| {label} | {len(items)} | {rate} | {sum(counts.values())} | {counts['TRUE']} | {counts['FALSE']} | "
            f"{counts['UNSURE']} | {precision} |")


def recall(hunt_file: Path, findings_file: Path, corpus: Path, ran_in: Path) -> str:
    """Found/missed per rule over the real pitfalls of a hunt: sites found without the linter (one JSON
    object a line: path, line, cell, rule, real, reason, hunter), a site being found when a finding of
    its rule is within the statement that holds its line (a call over several lines is one site). The
    missed sites are named."""
    reported = {(j.path, j.cell, j.line, j.code) for j in _all_findings(findings_file, corpus, ran_in)}
    sites = [json.loads(line) for line in hunt_file.read_text().splitlines() if line.strip()]
    real = [dict(site, lines=_statement_lines(corpus, site)) for site in sites if site["real"]]
    found = Counter(site["rule"] for site in real if _reported(site, reported))
    total = Counter(site["rule"] for site in real)
    rows = [f"{len(sites)} candidate sites read, {len(real)} real pitfalls", "",
            "| rule | real pitfalls | found | missed | recall |", "|---|---:|---:|---:|---:|"]
    for rule in sorted(total):
        rows.append(f"| {rule} | {total[rule]} | {found[rule]} | {total[rule] - found[rule]} | "
                    f"{found[rule] / total[rule]:.2f} |")
    covered = [site for site in real if site["rule"] != "none"]
    hits = sum(found[rule] for rule in total if rule != "none")
    rows.append(f"| **all rules** | {len(covered)} | {hits} | {len(covered) - hits} | "
                f"{hits / len(covered):.2f} |" if covered else "| **all rules** | 0 | 0 | 0 | - |")
    rows += ["", "Missed:"] + [f"- {site['path']}{_cell(site)}:{site['line']} {site['rule']}: {site['reason']}"
                                for site in real if not _reported(site, reported)]
    return "\n".join(rows)


def _all_findings(findings_file: Path, corpus: Path, ran_in: Path) -> list[Judgeable]:
    """Every finding of the report, TFC000 aside, unsampled."""
    return judgeables(findings_file, corpus, ran_in)


def _reported(site: dict, reported: set[tuple[str, int | None, int, str]]) -> bool:
    return any((site["path"], site.get("cell"), line, site["rule"]) in reported for line in site["lines"])


def _statement_lines(corpus: Path, site: dict) -> range:
    """The lines of the innermost statement holding the site's line (the line alone when the file or
    cell does not parse)."""
    line = site["line"]
    path = corpus / site["path"]
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
        if site.get("cell"):
            source = json.loads(text)["cells"][site["cell"] - 1]["source"]
            text = source if isinstance(source, str) else "".join(source)
        tree = ast.parse(text)
    except (OSError, ValueError, KeyError, IndexError, TypeError, SyntaxError):
        return range(line, line + 1)
    holders = [node for node in ast.walk(tree) if isinstance(node, ast.stmt) and not isinstance(
        node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.While, ast.With, ast.Try))
        and node.lineno <= line <= (node.end_lineno or node.lineno)]
    innermost = min(holders, key=lambda n: (n.end_lineno or n.lineno) - n.lineno, default=None)
    return range(innermost.lineno, (innermost.end_lineno or innermost.lineno) + 1) if innermost else range(line, line + 1)


def _cell(site: dict) -> str:
    return f":cell {site['cell']}" if site.get("cell") else ""


def add(judged: Iterable[str], verdicts_file: Path) -> int:
    """Append well-formed verdicts; returns how many."""
    records = []
    for number, line in enumerate(judged, start=1):
        if not line.strip():
            continue
        record = json.loads(line)
        missing = {"key", "verdict", "reason", "judge", "judged_at"} - record.keys()
        if missing or record["verdict"] not in VERDICTS:
            raise SystemExit(f"line {number}: needs key, verdict ({'/'.join(VERDICTS)}), reason, judge, judged_at")
        records.append(json.dumps(record, sort_keys=True))
    verdicts_file.parent.mkdir(parents=True, exist_ok=True)
    with verdicts_file.open("a", encoding="utf-8") as stream:
        stream.writelines(record + "\n" for record in records)
    return len(records)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("pending", "table"):
        sub = commands.add_parser(name)
        sub.add_argument("findings", type=Path)
        sub.add_argument("--corpus", type=Path, required=True)
        sub.add_argument("--verdicts", type=Path, required=True)
        sub.add_argument("--ran-in", type=Path, default=Path("."), help="where tfcheck check ran (default: here)")
    commands.choices["pending"].add_argument("--sample", type=int, default=30)
    commands.choices["pending"].add_argument("--seed", type=int, default=36)
    commands.choices["pending"].add_argument("--out", type=Path)
    commands.choices["table"].add_argument("--lines", type=int, help="lines in the corpus, for the rate")
    sub = commands.add_parser("recall")
    sub.add_argument("hunt", type=Path)
    sub.add_argument("findings", type=Path)
    sub.add_argument("--corpus", type=Path, required=True)
    sub.add_argument("--ran-in", type=Path, default=Path("."))
    sub = commands.add_parser("add")
    sub.add_argument("judged", type=Path)
    sub.add_argument("--verdicts", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "recall":
        print(recall(args.hunt, args.findings, args.corpus, args.ran_in))
        return 0
    if args.command == "add":
        print(f"{add(args.judged.read_text().splitlines(), args.verdicts)} verdicts added to {args.verdicts}")
        return 0
    found = judgeables(args.findings, args.corpus, args.ran_in)
    verdicts = read_verdicts(args.verdicts)
    if args.command == "table":
        print(table(found, verdicts, args.lines))
        return 0
    listed = [json.dumps(item.__dict__) for item in pending(found, verdicts, args.sample, args.seed)]
    if args.out:
        args.out.write_text("".join(line + "\n" for line in listed))
    else:
        sys.stdout.writelines(line + "\n" for line in listed)
    print(f"{len(listed)} findings to judge", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
