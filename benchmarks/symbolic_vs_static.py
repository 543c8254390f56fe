"""One artifact with a symbolic batch against static artifacts built for each batch size.

    .venv/bin/python benchmarks/symbolic_vs_static.py [--work /tmp/tfcheck_symbolic] [--models mlp,tokens]
        [--batches 1,8] [--rounds 5] [--seconds 1]

Preparation (once per model, skipped when WORK already holds it): `tfcheck build` of two small
modules that wrap the same fixture function (fixtures/aot/symbolic.py's `any_batch_mlp` and
`classify_tokens`, fixtures/aot/mobilenet_v2.py's `mobilenet_v2` with `--models mobilenet`):
one with the signature's batch left `None` (one symbolic artifact, the default), one with
`shapes=` listing each batch size (one static artifact per size). Same weights, same default
schedules, same TVM.

Then, in this one process and without TensorFlow, both artifacts are loaded with `tfcheck.load`
and timed on the same inputs, alternating symbolic and static `--rounds` times so that the shared
machine's load hits both alike (compiler/bench/latency.py's `time_calls`, as `tfcheck bench` times a TVM
artifact). Reported per model and batch: the median of the rounds' medians and symbolic/static.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "aot"

# model -> (fixture module, function, its signature with the batch as {batch}, inputs after the batch)
MODELS = {
    "mlp": ("symbolic", "any_batch_mlp", '[tf.TensorSpec([{batch}, 128], tf.float32, name="x")]', [[128]]),
    "tokens": ("symbolic", "classify_tokens", '[tf.TensorSpec([{batch}, 32], tf.int32, name="tokens")]', [[32]]),
    "mobilenet": ("mobilenet_v2", "mobilenet_v2", '[tf.TensorSpec([{batch}, 224, 224, 3], tf.float32)]',
                  [[224, 224, 3]]),
}

WRAPPER = '''
import tensorflow as tf
import tfcheck
from {module} import model_function


@tfcheck.aot(name="{name}"{shapes})
@tf.function(input_signature={signature})
def {name}(*inputs):
    return model_function(*inputs)
'''


def _wrapper(model: str, batches: list[int] | None) -> str:
    """A module whose function calls the fixture's: `batches` None for a symbolic batch."""
    module, function, signature, rest = MODELS[model]
    shapes = "" if batches is None else ", shapes=" + repr(
        [tuple(tuple([batch, *dims]) for dims in rest) for batch in batches])
    source = WRAPPER.format(module=f"{module}_{model}", name=model, shapes=shapes,
                            signature=signature.format(batch="None"))
    return textwrap.dedent(source)


def prepare(work: Path, model: str, batches: list[int]) -> dict[str, Path]:
    """Build the symbolic and the static artifacts of `model` (unless built already)."""
    module, function, _, _ = MODELS[model]
    folders = {}
    for kind, sizes in (("symbolic", None), ("static", batches)):
        project = work / model / kind
        out = project / "out"
        folders[kind] = out
        if out.is_dir():
            continue
        project.mkdir(parents=True, exist_ok=True)
        fixture = (FIXTURES / f"{module}.py").read_text()
        # the fixture's function without its decorators, under a name the wrapper imports
        (project / f"{module}_{model}.py").write_text(
            fixture.replace("@tfcheck.aot", "# @tfcheck.aot") + f"\n\nmodel_function = {function}.python_function\n")
        for helper in ("calibration.py",):
            if (FIXTURES / helper).exists():
                shutil.copy(FIXTURES / helper, project / helper)
        (project / f"bench_{model}.py").write_text(_wrapper(model, sizes))
        subprocess.run([str(Path(sys.executable).with_name("tfcheck")), "build", f"bench_{model}.py",
                        "--out", str(out), "--cache-dir", str(project / "cache")], cwd=project, check=True)
    return folders


def _artifact(out: Path, model: str, batch: int) -> Path:
    """The exported artifact folder that takes `batch` (the symbolic one takes any)."""
    candidates = sorted(p for p in out.iterdir() if p.name.startswith(model))
    exact = [p for p in candidates if p.name.startswith(f"{model}__{batch}x")]
    return exact[0] if exact else candidates[0]


def measure(folders: dict[str, Path], model: str, batch: int, rounds: int, seconds: float) -> dict[str, float]:
    """Median over `rounds` alternating rounds of each artifact's median call time, in us."""
    from tfcheck.compiler.bench.latency import prepare_tvm, time_calls
    from tfcheck.compiler.process.messages import Budget
    from tfcheck.compiler.trace.bridge import generate_inputs
    from tfcheck.runtime.manifest import TensorSpec

    _, _, signature, rest = MODELS[model]
    dtype = "int32" if "int32" in signature else "float32"
    arrays = generate_inputs([TensorSpec(f"input_{i}", (batch, *dims), dtype) for i, dims in enumerate(rest)])
    if dtype == "int32":
        arrays = [array % 1000 for array in arrays]
    calls = {kind: prepare_tvm(_artifact(out, model, batch), arrays) for kind, out in folders.items()}
    outputs = {kind: call() for kind, call in calls.items()}
    difference = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
                     for a, b in zip(np.atleast_1d(outputs["symbolic"]), np.atleast_1d(outputs["static"])))
    budget = Budget(warmup=20, min_runs=50, min_seconds=seconds, max_runs=100_000, max_seconds=seconds)
    medians: dict[str, list[float]] = {kind: [] for kind in calls}
    for _ in range(rounds):
        for kind, call in calls.items():
            medians[kind].append(statistics.median(time_calls(call, budget)) * 1e6)
    result = {kind: statistics.median(values) for kind, values in medians.items()}
    return {**result, "ratio": result["symbolic"] / result["static"], "max_abs_diff": difference}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=Path("/tmp/tfcheck_symbolic"))
    parser.add_argument("--models", default="mlp,tokens")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    print("| model | batch | symbolic (us) | static (us) | symbolic / static | max abs diff |")
    print("|---|---:|---:|---:|---:|---:|")
    for model in args.models.split(","):
        folders = prepare(args.work, model, batches)
        for batch in batches:
            r = measure(folders, model, batch, args.rounds, args.seconds)
            print(f"| {model} | {batch} | {r['symbolic']:.1f} | {r['static']:.1f} | {r['ratio']:.2f} | "
                  f"{r['max_abs_diff']:.1e} |", flush=True)


if __name__ == "__main__":
    main()
