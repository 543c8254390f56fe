"""How `tfcheck check` scales with the number of functions in one file (issue 18); one re-runnable command.

    .venv/bin/python benchmarks/lint_scale.py                        # 1k, 5k, 10k, 20k functions
    .venv/bin/python benchmarks/lint_scale.py --functions 1000 2000 --write FOLDER   # keep the files

Generated code is where one file gets huge: a model exported to Python, a table of kernels, a test
matrix. The generator writes such a file from a cycle of blocks that exercise every rule's machinery:
`@tf.function` steps calling plain helpers that call each other, Keras models with train steps that
write `self.` state, module-level loops that create tf.functions (once before the loop and, in some
blocks, again inside it), globals rebound from functions, tf.functions made inside factories and
drivers, `tf.data` pipelines, `tf.py_function`, functional control flow, Python containers in graph
code. It has findings of most rules, a few per block, as generated code with a template bug would.

Each size is linted in a fresh process (`python -m tfcheck check --no-cache -j 1 --format json`), as a
pre-commit hook would (bytecode cached, as for an installed package), and also in-process through
`tfcheck.runner.lint_paths` (no interpreter start, no rule imports, no output). Lines per second must
not fall as the file grows. To measure other code (an older commit), put a copy of its `tfcheck`
package, with `rules/` inside it as `tfcheck/rules`, first on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PROLOGUE = '''"""Generated: do not edit."""
import numpy as np
import tensorflow as tf

REGISTRY = {}
COUNTER = 0
tf.config.run_functions_eagerly(True)
'''


def _step(i: int) -> str:
    previous = f"step_{i - 1}(x)" if i else "x"  # a model exported block by block: a chain of tf.functions
    return f'''
@tf.function
def step_{i}(x, training=False):
    y = helper_{i}(x) + tf.reduce_sum({previous})
    for row in tf.range(3):
        y += tf.cast(row, y.dtype)
    for factor in np.arange({i % 3 + 1}):
        y *= factor
    return y
'''


def _helper(i: int) -> str:
    previous = f"helper_{i - 8}(x)" if i >= 8 else "x"
    return f'''
def helper_{i}(x):
    scaled = {previous} * {i % 7 + 1}
    return tf.nn.relu(scaled)
'''


def _model(i: int) -> str:
    return f'''
class Model{i}(tf.keras.Model):
    def __init__(self):
        super().__init__()
        self.dense = tf.keras.layers.Dense({i % 32 + 1})
        self.history = []

    def train_step(self, data):
        x, y = data
        self.history.append(x)
        return {{"loss": tf.reduce_mean(self.dense(x) - y)}}

    def describe(self):
        return f"model {i}"


@tf.function
def run_model_{i}(model, x):
    return model(x)


model_{i} = Model{i}()
run_model_{i}(model_{i}, tf.ones([1, 4]))
'''


def _loops(i: int) -> str:
    inner = f"    probe_{i} = tf.function(helper_{i - 1 if i else 0})\n    probe_{i}(k_{i})\n" if i % 40 == 3 else ""
    return f'''
compiled_{i} = tf.function(helper_{i - 1 if i else 0})
for k_{i} in range(2):
    REGISTRY[k_{i}] = compiled_{i}(tf.constant(k_{i}))
{inner}'''


def _state(i: int) -> str:
    return f'''
TOTAL_{i} = 0.0


def accumulate_{i}(value):
    global TOTAL_{i}, COUNTER
    TOTAL_{i} += value
    COUNTER += 1
    return TOTAL_{i}


@tf.function
def traced_total_{i}(x):
    return x + TOTAL_{i}
'''


def _factory(i: int) -> str:
    return f'''
def make_server_{i}(model):
    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def serve(x):
        return model(x)
    serve(tf.zeros([1, 4]))
    return serve


def predict_{i}(model, x):
    return tf.function(model)(x)
'''


def _pipeline(i: int) -> str:
    return f'''
def parse_{i}(record):
    values = [record, record * 2]
    total = 0
    for v in values:
        total += v
    return total


def dataset_{i}(ds):
    ds = ds.map(parse_{i})
    return ds.filter(lambda r: r > 0)


def numpy_side_{i}(x):
    return np.asarray(x) * 2


@tf.function
def mixed_{i}(x):
    x = tf.py_function(numpy_side_{i}, [x], tf.float32)
    tf.print("step", x)
    print("tracing mixed_{i}")
    return tf.cond(x > 0, lambda: helper_{i}(x), lambda: x)
'''


def _driver(i: int) -> str:
    """Calls of tf.functions with Python values, iterators, recursion, variables, attribute state."""
    return f'''
class Counter{i}(tf.Module):
    def __init__(self):
        self.scale = 1.0
        self.offset = 0.0
        self._reset()

    def _reset(self):
        self.offset = 0.0


@tf.function
def evaluate_{i}(counter, x, steps):
    outputs = []
    for j in tf.range(steps):
        outputs.append(x * counter.scale + counter.offset)
    weight = tf.Variable(1.0)
    assert tf.reduce_all(x >= 0)
    noise = np.random.normal(size=[3])
    return tf.stack(outputs) + weight + noise + next(LINES_{i})


LINES_{i} = iter([1.0, 2.0])
counter_{i} = Counter{i}()
evaluate_{i}(counter_{i}, tf.ones([3]), steps=3)
counter_{i}.offset += 1.0
evaluate_{i}(counter_{i}, tf.ones([3]), steps=4)
LAST_{i} = None


@tf.function
def countdown_{i}(n):
    global LAST_{i}
    LAST_{i} = n
    if n > 0:
        return countdown_{i}(n - 1)
    return n.numpy()
'''


def _arguments(i: int) -> str:
    """tf.functions called with Python lists, iterators and new plain objects."""
    return f'''
class Options{i}:
    def __init__(self):
        self.depth = {i % 4}


@tf.function
def consume_{i}(batches, lines, options):
    total = 0.0
    for b in batches:
        total += b
    return total + next(lines) + options.depth


consume_{i}([1.0, 2.0], iter([3.0]), Options{i}())
consume_{i}([4.0, 5.0], iter([6.0]), Options{i}())
'''


BLOCKS: tuple[tuple[Callable[[int], str], int], ...] = (
    # (template, functions it defines: defs, methods, nested defs and lambdas)
    (_helper, 1), (_step, 1), (_model, 4), (_loops, 0), (_state, 2), (_factory, 3), (_pipeline, 7),
    (_driver, 4), (_arguments, 2),
)
FUNCTIONS_PER_CYCLE = sum(count for _, count in BLOCKS)


def generate(functions: int) -> str:
    """A module with at least `functions` functions (defs, methods, nested defs, lambdas)."""
    parts = [PROLOGUE]
    cycles = -(-functions // FUNCTIONS_PER_CYCLE)
    for i in range(cycles):
        parts.extend(template(i) for template, _ in BLOCKS)
    return "".join(parts)


@dataclass
class Row:
    functions: int
    lines: int
    findings: int
    cli_seconds: float
    cli_cpu_seconds: float  # user + system time of the process: what the run costs on an idle core
    in_process_seconds: float

    def rate(self, seconds: float) -> str:
        return f"{self.lines / seconds:,.0f}"


def cli_environment(pycache: Path) -> dict[str, str]:
    """Bytecode cached in `pycache`, as for an installed package (a checkout may set PYTHONDONTWRITEBYTECODE)."""
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    environment["PYTHONPYCACHEPREFIX"] = str(pycache)
    return environment


def time_cli(path: Path, environment: dict[str, str]) -> tuple[float, float, int]:
    """Wall and CPU seconds of one `tfcheck check` process, and its number of findings."""
    command = [sys.executable, "-m", "tfcheck", "check", "--no-cache", "-j", "1", "--format", "json",
               "--exit-zero", str(path)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=path.parent, env=environment)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return seconds, cpu, len(json.loads(done.stdout))


def time_in_process(path: Path) -> float:
    """Wall seconds of `lint_paths` on the file in this process (rules already imported by a warm-up)."""
    from tfcheck.config import Config
    from tfcheck.runner import lint_paths

    config = Config(root=path.parent)
    started = time.perf_counter()
    lint_paths([path], config, jobs=1)
    return time.perf_counter() - started


def measure(functions: int, folder: Path, environment: dict[str, str]) -> Row:
    path = folder / f"generated_{functions}.py"
    text = generate(functions)
    path.write_text(text)
    seconds, cpu, findings = time_cli(path, environment)
    return Row(functions, text.count("\n"), findings, seconds, cpu, time_in_process(path))


def table(rows: list[Row]) -> str:
    lines = ["| functions | lines | findings | CLI s | CLI CPU s | CLI lines/s | in-process s | in-process lines/s |",
             "|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for row in rows:
        lines.append(f"| {row.functions:,} | {row.lines:,} | {row.findings:,} | {row.cli_seconds:.2f} | "
                     f"{row.cli_cpu_seconds:.2f} | {row.rate(row.cli_seconds)} | {row.in_process_seconds:.2f} | "
                     f"{row.rate(row.in_process_seconds)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--functions", type=int, nargs="+", default=[1000, 5000, 10000, 20000])
    parser.add_argument("--write", type=Path, help="Keep the generated files in this folder.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        folder = args.write or Path(temporary)
        folder.mkdir(parents=True, exist_ok=True)
        environment = cli_environment(Path(temporary) / "pycache")
        warm_up = _warm_up(folder)
        time_cli(warm_up, environment)  # writes the bytecode the timed processes load
        time_in_process(warm_up)
        rows = []
        for functions in args.functions:
            rows.append(measure(functions, folder, environment))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    print(table(rows))


def _warm_up(folder: Path) -> Path:
    """A small file linted once first: bytecode written, rules imported, before anything is timed."""
    path = folder / "warm_up.py"
    path.write_text(generate(FUNCTIONS_PER_CYCLE))
    return path


if __name__ == "__main__":
    main()
