"""Fuzzing the linter: generated and mutated programs through the whole pipeline, deterministically.

Every program goes through what `tfcheck check --fix --unsafe-fixes` does to a file, in process:
decode -> parse -> engine facts -> every rule -> suppressions (`analysis.analyze`), then each fix a
rule proposes, alone and all together (`fixes.apply_fixes`, `fixes.fix_text`). A program passes when

- nothing escapes `analyze` (it promises never to raise) and it reports no `InternalError`
  (the runner catches a crashing rule or engine and reports it; both are bugs);
- a program Python cannot parse gets TFC000, and a program Python parses gets no TFC000 other than
  "too deeply nested";
- every fix, applied alone, leaves a file that still parses (libcst and `ast`), and `--fix`'s loop
  ends on a file that parses.

Programs come from two sources:
- hypothesmith (`from_grammar`, `from_node`), each checked as generated and wrapped as graph code
  (`import tensorflow as tf`, `@tf.function` on every def, the whole program as a tf.function body);
- mutants of real TensorFlow code (fixtures/, examples/, the rules' must_flag/must_not_flag examples,
  the snippets embedded in tests/lint): lines deleted, duplicated, swapped, re-indented, spliced in
  from another program, `@tf.function`/`global`/`nonlocal`/control statements inserted, names renamed.

Nothing depends on luck or the clock: hypothesis runs derandomized without a database, and mutant
number `i` of seed `s` comes from `random.Random(f"{s}:{i}")`, so any reported program can be
rebuilt alone (`--only i`). `python -m tests.fuzz.harness --count 10000` is the large run
(docs/fuzzing.md); tests/fuzz/test_fuzz.py runs small budgets of the same in CI.
"""

from __future__ import annotations

import argparse
import ast
import random
import re
import sys
import textwrap
import time
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from tfcheck.analysis import analyze, selected_rules
from tfcheck.config import Config
from tfcheck.engine import EngineSettings, ParseFailure
from tfcheck.engine.source import decode_source
from tfcheck.findings import FileResult, Finding
from tfcheck.edits import parses
from tfcheck.fixes import apply_fixes, fix_text
from tfcheck.rule import Rule, all_rules
from tfcheck.jobs import FileJob

REPO = Path(__file__).resolve().parents[2]
SEED = 18  # issue 18; any fixed value works, the point is that it is fixed
CONFIGS = (Config(root=REPO, select=("ALL",)),
           Config(root=REPO, select=("ALL",), engine=EngineSettings(function_aliases=("helpers.graph",), keras_call_is_graph=True)))
_IDENTIFIER = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")
_DEF = re.compile(r"^([ \t]*)(?:async[ \t]+)?def[ \t]")


# -- checking one program --------------------------------------------------------------------------
@dataclass
class Problem:
    """One way a program broke tfcheck: where the program came from, what went wrong, the program."""

    origin: str
    message: str
    program: str

    def __str__(self) -> str:
        return f"{self.origin}: {self.message}\n--- program ---\n{self.program}\n---------------"


@dataclass
class Stats:
    """What a run covered, for docs/fuzzing.md."""

    programs: Counter[str] = field(default_factory=Counter)  # per source
    parsed: int = 0
    flagged: int = 0  # programs with a finding other than TFC000
    findings: Counter[str] = field(default_factory=Counter)
    fixes: int = 0
    verbose: bool = False  # name each program on stderr before checking it

    @property
    def total(self) -> int:
        return sum(self.programs.values())


def _job(roots: Sequence[tuple[str, str]]) -> FileJob:
    path = Path("fuzz.py")
    return FileJob(path, "fuzz.py", "fuzz.py", "fuzz", False, tuple(roots))


@lru_cache(maxsize=1)
def _rules() -> tuple[Rule, ...]:
    """Every rule (both configurations select them all)."""
    return tuple(selected_rules(CONFIGS[0]))


def _python_parses(data: bytes) -> bool:
    """Whether CPython's parser accepts the file (bytes: it honours a BOM or a coding line)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def check_program(text: str, origin: str, config: Config = CONFIGS[0],
                  roots: Sequence[tuple[str, str]] = (), stats: Stats | None = None) -> list[Problem]:
    """Run one program through the whole pipeline and the fixes; return what went wrong (empty: fine)."""
    stats = stats if stats is not None else Stats()
    stats.programs[origin.split("#")[0]] += 1
    if stats.verbose:  # before checking: a crash of the process is then attributable
        print(f"checking {origin}", file=sys.stderr, flush=True)
    data = text.encode("utf-8", "surrogatepass")
    job = _job(roots)
    rules = _rules()
    try:
        result = analyze(job, config, rules, data)
    except Exception:  # noqa: BLE001 - exactly what the fuzzer looks for
        return [Problem(origin, f"exception escaped analyze:\n{traceback.format_exc()}", text)]
    problems = [Problem(origin, f"internal error: {error}", text) for error in result.errors]
    problems += _check_parse_verdict(result, data, origin, text, stats)
    stats.findings.update(f.code for f in result.findings + result.suppressed)
    if any(f.fix is not None for f in result.findings):
        problems += _check_fixes(result.findings, data, origin, lambda new: analyze(job, config, rules, new), stats)
    return problems


def _check_parse_verdict(result: FileResult, data: bytes, origin: str, text: str, stats: Stats) -> list[Problem]:
    """TFC000 exactly when Python cannot parse the file (or it is too deep for the engine)."""
    parse_errors = [f for f in result.findings + result.suppressed if f.code == "TFC000"]
    if not _python_parses(data):
        return [] if parse_errors else [Problem(origin, "Python cannot parse it, but no TFC000", text)]
    stats.parsed += 1
    stats.flagged += any(f.code != "TFC000" for f in result.findings + result.suppressed)
    return [Problem(origin, f"Python parses it, but TFC000: {f.message}", text)
            for f in parse_errors if "too deeply nested" not in f.message]


def _check_fixes(findings: Sequence[Finding], data: bytes, origin: str,
                 relint: Callable[[bytes], FileResult], stats: Stats) -> list[Problem]:
    """Every fix alone keeps the file parsing; `--fix --unsafe-fixes` ends on a file that parses."""
    try:
        text = decode_source("fuzz.py", data)
    except ParseFailure:
        return []
    if not parses(text):
        return []  # libcst cannot read the original: fixes are refused by design, nothing to check
    problems: list[Problem] = []
    errors: list[str] = []

    def relint_text(new: str) -> list[Finding]:
        result = relint(new.encode("utf-8", "surrogatepass"))
        errors.extend(str(error) for error in result.errors)
        return result.findings

    try:
        for finding in findings:
            if finding.fix is None:
                continue
            stats.fixes += 1
            fixed, applied = apply_fixes(text, [finding.fix])
            if not applied or not _python_parses(fixed.encode("utf-8", "surrogatepass")):
                problems.append(Problem(origin, f"the fix of {finding.code} at line {finding.line} breaks the file:"
                                                f" {finding.fix.edits}", text))
        fixed, _ = fix_text(text, findings, relint_text, unsafe=True)
    except Exception:  # noqa: BLE001
        return problems + [Problem(origin, f"exception while fixing:\n{traceback.format_exc()}", text)]
    if not _python_parses(fixed.encode("utf-8", "surrogatepass")):
        problems.append(Problem(origin, f"--fix --unsafe-fixes produced a file that does not parse:\n{fixed}", text))
    return problems + [Problem(origin, f"internal error while re-linting a fixed file: {e}", text) for e in errors]


# -- hypothesmith programs -------------------------------------------------------------------------
def hypothesmith_programs(kind: str, count: int) -> list[str]:
    """`count` programs from hypothesmith's `from_grammar` or `from_node`, the same ones every run."""
    import hypothesmith
    from hypothesis import HealthCheck, given, settings

    strategy = {"grammar": hypothesmith.from_grammar, "node": hypothesmith.from_node}[kind]()
    programs: list[str] = []

    @settings(derandomize=True, max_examples=count, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(program: str) -> None:
        programs.append(program)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # hypothesmith compiles what it generates: SyntaxWarnings galore
        collect()
    return programs


def as_graph_code(program: str) -> str:
    """A generated program made into tf.function code: every def decorated, the whole body traced."""
    lines = program.splitlines(keepends=True)
    decorated = "".join(f"{m.group(1)}@tf.function\n{line}" if (m := _DEF.match(line)) else line for line in lines)
    body = textwrap.indent(decorated, "    ") or "    pass\n"
    return f"import tensorflow as tf\n{decorated}\n\n@tf.function\ndef fuzz_graph(x):\n{body}\n"


# -- mutants of real code --------------------------------------------------------------------------
def seed_programs() -> list[list[tuple[str, str]]]:
    """(name, source) of the TensorFlow code mutants start from, in three groups drawn from equally:
    whole files (fixtures/, examples/), the rules' examples, the snippets of tests/lint."""
    files = sorted([*REPO.glob("fixtures/**/*.py"), *REPO.glob("examples/*.py")])
    whole = [(path.relative_to(REPO).as_posix(), path.read_text(encoding="utf-8")) for path in files]
    examples = [(f"{rule.code}.{kind}[{i}]", textwrap.dedent(snippet)) for rule in all_rules()
                for kind in ("must_flag", "must_not_flag") for i, snippet in enumerate(getattr(rule, kind))]
    embedded = [(f"{path.name}:{line}", snippet) for path in sorted(REPO.glob("tests/lint/test_*.py"))
                for line, snippet in _embedded_snippets(path)]
    return [whole, examples, embedded]


def _embedded_snippets(path: Path) -> Iterator[tuple[int, str]]:
    """String constants of a test file that are TensorFlow programs."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "tf." in node.value:
            snippet = textwrap.dedent(node.value)
            if "\n" in snippet.strip() and _python_parses(snippet.encode()):
                yield node.lineno, snippet


_STATEMENTS = (
    "return", "return x", "yield x", "break", "continue", "pass", "del x", "raise", "x = tf.Variable(1.0)",
    "x += 1", "x.append(y)", "self.x = x", "print(x)", "tf.print(x)", "assert x > 0", "for x in y: pass",
    "while x: x -= 1", "with tf.init_scope(): x = 1", "lambda: x", "x = [i for i in range(3)]",
    "tf.config.run_functions_eagerly(True)", "x = tf.function(lambda y: y)", "await x", "x = y.numpy()",
    "import tensorflow as tf", "from tensorflow import function", "global x", "nonlocal x", "x: int = 0",
    "async def g(): pass", "class K(tf.keras.Model): pass", "def train_step(self, data): return data",
)
_DECORATORS = ("@tf.function", "@tf.function()", "@tf.function(jit_compile=True)", "@function", "@tf.function\n",
               "@staticmethod", "@property", "@tf.autograph.experimental.do_not_convert")
_NAMES = ("tf", "self", "x", "range", "print", "function", "call", "train_step", "np", "__init__", "_")
# Long and deep code: libcst's parser once segfaulted on 6,000-12,000 `and` operands (docs/fuzzing.md).
_OPERATORS = (" and ", " or ", " < ", " + ", ", ", " if x else ", "[0]", ".a", "(")
_LENGTHS = (2, 3, 40, 400, 3000, 12_000)
_LONG_FORMS = ("assert tf.reduce_all({0}), ({1})", "print({1})", "{0} = ({1})", "assert ({1}) > {0}", "yield {1}")


class Mutator:
    """Line-level mutations of a program; each call applies one, chosen by the seeded generator."""

    def __init__(self, rng: random.Random, donors: Sequence[str]) -> None:
        self.rng = rng
        self.donors = donors
        self.operations = (self.delete, self.duplicate, self.swap, self.decorate, self.reindent, self.declare,
                           self.rename, self.splice, self.insert_statement, self.wrap_in_loop, self.concatenate,
                           self.lengthen, self.nest)

    def __call__(self, lines: list[str]) -> list[str]:
        if not lines:
            return ["pass\n"]
        return self.rng.choice(self.operations)(list(lines))

    def _index(self, lines: list[str]) -> int:
        return self.rng.randrange(len(lines))

    def _defs(self, lines: list[str]) -> list[int]:
        return [i for i, line in enumerate(lines) if _DEF.match(line)] or [self._index(lines)]

    def delete(self, lines: list[str]) -> list[str]:
        del lines[self._index(lines)]
        return lines

    def duplicate(self, lines: list[str]) -> list[str]:
        i = self._index(lines)
        lines.insert(i, lines[i])
        return lines

    def swap(self, lines: list[str]) -> list[str]:
        i = self._index(lines)
        j = min(i + 1, len(lines) - 1) if self.rng.random() < 0.5 else self._index(lines)
        lines[i], lines[j] = lines[j], lines[i]
        return lines

    def decorate(self, lines: list[str]) -> list[str]:
        i = self.rng.choice(self._defs(lines))
        lines.insert(i, _indentation(lines[i]) + self.rng.choice(_DECORATORS).rstrip("\n") + "\n")
        return lines

    def reindent(self, lines: list[str]) -> list[str]:
        i = self._index(lines)
        stripped = lines[i].lstrip(" \t")
        indent = _indentation(lines[i])
        lines[i] = self.rng.choice((indent + "    ", indent[:-4], indent + " ", "\t" + indent, "")) + stripped
        return lines

    def declare(self, lines: list[str]) -> list[str]:
        i = self.rng.choice(self._defs(lines))
        body = _indentation(lines[i + 1]) if i + 1 < len(lines) else "    "
        keyword = self.rng.choice(("global", "nonlocal"))
        lines.insert(i + 1, f"{body}{keyword} {self.rng.choice(self._names(lines))}\n")
        return lines

    def rename(self, lines: list[str]) -> list[str]:
        names = self._names(lines)
        old, new = self.rng.choice(names), self.rng.choice(names + list(_NAMES))
        return [re.sub(rf"\b{re.escape(old)}\b", new, line) for line in lines]

    def splice(self, lines: list[str]) -> list[str]:
        donor = self.rng.choice(self.donors).splitlines(keepends=True) or ["pass\n"]
        start = self.rng.randrange(len(donor))
        piece = donor[start:start + self.rng.choice((1, 1, 2, 3))]
        i = self._index(lines)
        lines[i:i] = textwrap.indent(textwrap.dedent("".join(piece)), _indentation(lines[i])).splitlines(keepends=True)
        return lines

    def lengthen(self, lines: list[str]) -> list[str]:
        """A statement with one very long expression: a chain of operands, or a deep nesting of calls."""
        i = self._index(lines)
        name, operator, count = self.rng.choice(self._names(lines)), self.rng.choice(_OPERATORS), self.rng.choice(_LENGTHS)
        if operator == "(":
            chain = "f(" * min(count, 200) + name + ")" * min(count, 200)
        elif operator in ("[0]", ".a"):
            chain = name + operator * count
        else:
            chain = operator.join([name] * count)
        lines.insert(i, _indentation(lines[i]) + self.rng.choice(_LONG_FORMS).format(name, chain) + "\n")
        return lines

    def nest(self, lines: list[str]) -> list[str]:
        """A line moved under many nested blocks (CPython allows 100 levels of indentation)."""
        i = self._index(lines)
        indent = _indentation(lines[i])
        depth = self.rng.choice((5, 30, 99, 101))
        headers = [f"{indent}{'    ' * level}{self.rng.choice(('if x:', 'for x in y:', 'def g():', 'with x:'))}\n"
                   for level in range(depth)]
        return lines[:i] + headers + [indent + "    " * depth + lines[i].lstrip(" \t")] + lines[i + 1:]

    def concatenate(self, lines: list[str]) -> list[str]:
        """Another program after this one: names defined twice, calls between the two."""
        return lines + ["\n"] + self.rng.choice(self.donors).splitlines(keepends=True)

    def insert_statement(self, lines: list[str]) -> list[str]:
        i = self._index(lines)
        statement = self.rng.choice(_STATEMENTS).replace("x", self.rng.choice(self._names(lines)), 1)
        lines.insert(i, _indentation(lines[i]) + statement + "\n")
        return lines

    def wrap_in_loop(self, lines: list[str]) -> list[str]:
        """Put a line and the lines after it at the same indentation inside a for/while/with/if/def."""
        i = self._index(lines)
        indent = _indentation(lines[i])
        end = i + 1
        while end < len(lines) and (not lines[end].strip() or _indentation(lines[end]).startswith(indent)):
            end += 1
        header = self.rng.choice(("for _fz in range(3):", "while x:", "for v in tf.range(3):", "if x:",
                                  "with tf.GradientTape() as tape:", "def inner():", "try:"))
        block = textwrap.indent("".join(lines[i:end]), "    ").splitlines(keepends=True)
        tail = [f"{indent}finally:\n", f"{indent}    pass\n"] if header == "try:" else []
        return lines[:i] + [indent + header + "\n"] + block + tail + lines[end:]

    def _names(self, lines: list[str]) -> list[str]:
        return sorted(set(_IDENTIFIER.findall("".join(lines)))) or ["x"]


def _indentation(line: str) -> str:
    return line[:len(line) - len(line.lstrip(" \t"))]


def mutant(seed: int, number: int, seeds: Sequence[Sequence[tuple[str, str]]]) -> tuple[str, str]:
    """Mutant `number` of `seed`: (origin, program). Up to five tries for one that Python parses."""
    rng = random.Random(f"{seed}:{number}")
    name, program = rng.choice(rng.choice(seeds))
    mutate = Mutator(rng, [text for group in seeds for _, text in group])
    for _ in range(5):
        lines = program.splitlines(keepends=True)
        for _ in range(rng.choice((1, 1, 2, 3))):
            lines = mutate(lines)
        candidate = "".join(lines)
        if _python_parses(candidate.encode("utf-8")):
            break
    return f"mutant#{number} of {name}", candidate


def mutant_case(seed: int, number: int, seeds: Sequence[Sequence[tuple[str, str]]]
                ) -> tuple[str, str, Config, list[tuple[str, str]]]:
    """Mutant `number` with how it is checked: (origin, program, configuration, extra graph-code roots)."""
    origin, program = mutant(seed, number, seeds)
    return origin, program, CONFIGS[number % 2], _roots(random.Random(f"{seed}:{number}:roots"), program)


def _roots(rng: random.Random, program: str) -> list[tuple[str, str]]:
    """Sometimes, functions of the program marked as graph code by another file (the project pass)."""
    names = sorted({m.group(2) for m in re.finditer(r"^([ \t]*)(?:async[ \t]+)?def[ \t]+(\w+)", program, re.M)})
    if not names or rng.random() < 0.6:
        return []
    return [(name, "called from graph code in other.f (other.py:1)") for name in rng.sample(names, min(2, len(names)))]


# -- runs ------------------------------------------------------------------------------------------
@dataclass
class Budget:
    """How many programs of each source a run checks. Generated programs are checked twice (raw, wrapped)."""

    grammar: int
    node: int
    mutants: int
    first_mutant: int = 0  # mutant numbers start here (the slow test skips the CI test's ones)

    @classmethod
    def for_count(cls, count: int) -> Budget:
        """A run of about `count` programs: mutants are cheap, hypothesmith's from_node is not (~0.2 s)."""
        grammar, node = count // 16, count // 100
        return cls(grammar, node, count - 2 * (grammar + node))


def run(budget: Budget, seed: int = SEED, stats: Stats | None = None,
        progress: Callable[[Stats], None] | None = None) -> list[Problem]:
    """Check the programs of a budget; return every problem found."""
    stats = stats if stats is not None else Stats()
    problems: list[Problem] = []
    for kind, count in (("grammar", budget.grammar), ("node", budget.node)):
        for i, program in enumerate(hypothesmith_programs(kind, count) if count else []):
            config = CONFIGS[i % 2]
            problems += check_program(program, f"{kind}#{i}", config, stats=stats)
            problems += check_program(as_graph_code(program), f"{kind}-as-graph#{i}", config, stats=stats)
    seeds = seed_programs()
    for number in range(budget.first_mutant, budget.first_mutant + budget.mutants):
        origin, program, config, roots = mutant_case(seed, number, seeds)
        problems += check_program(program, origin, config, roots, stats)
        if progress is not None and number % 1000 == 999:
            progress(stats)
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fuzz tfcheck's linter and fixes (see docs/fuzzing.md).")
    parser.add_argument("--count", type=int, default=1000, help="programs to check (about)")
    parser.add_argument("--seed", type=int, default=SEED, help="seed of the mutants")
    parser.add_argument("--only", type=int, help="print mutant number ONLY of the seed and check it alone")
    parser.add_argument("--verbose", action="store_true",
                        help="name each program before checking it (to find the one that kills the process)")
    args = parser.parse_args(argv)
    if args.only is not None:
        origin, program, config, roots = mutant_case(args.seed, args.only, seed_programs())
        print(f"# {origin}\n{program}")
        problems = check_program(program, origin, config, roots)
    else:
        started = time.perf_counter()
        stats = Stats(verbose=args.verbose)
        problems = run(Budget.for_count(args.count), args.seed, stats,
                       lambda s: print(f"... {s.total} programs", file=sys.stderr, flush=True))
        _report(stats, problems, time.perf_counter() - started)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


def _report(stats: Stats, problems: Sequence[Problem], seconds: float) -> None:
    print(f"programs checked: {stats.total} ({', '.join(f'{k}: {v}' for k, v in sorted(stats.programs.items()))})")
    print(f"parsed by Python: {stats.parsed}; with a finding other than TFC000: {stats.flagged}")
    print(f"findings: {sum(stats.findings.values())} ({', '.join(f'{k}: {v}' for k, v in sorted(stats.findings.items()))})")
    print(f"fixes applied alone and with --fix --unsafe-fixes: {stats.fixes}")
    print(f"problems: {len(problems)}; time: {seconds:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
