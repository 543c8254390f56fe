"""Cold start: a fresh process to its first MobileNetV2 result, artifact against SavedModel.

    .venv/bin/python benchmarks/cold_start.py [--work /tmp/tfcheck_cold_start] [--runs 7] [--steady]

Preparation (once, skipped when WORK already holds it): `tfcheck build` of
fixtures/aot/mobilenet_v2.py into WORK/artifacts, and the same model (same seed, so the same
weights) saved as a TensorFlow SavedModel in WORK/savedmodel by a TensorFlow child process.

Then, alternating the two so that load on a shared machine hits both alike, each run starts a
fresh Python process that loads and calls the model once on the same input:
  - artifact:   `import tfcheck; tfcheck.load(...).mobilenet_v2(x)` (no TensorFlow, no `tvm`);
  - savedmodel: `import tensorflow; tf.saved_model.load(...).f(x)`.
A run's time is from just before the process is spawned to the moment the child has its first
result (the child prints time.time() then; the exit teardown is not counted). Also reported:
`python -c "import tfcheck"`, and the largest difference between the two outputs.

`--steady` also times warm calls in one TensorFlow process (median of 30 after a first call):
the tf.function, the `@tfcheck.aot` wrapper with `TFCHECK_AOT_VERIFY=every-call` and
`first-call` (the cost of checking the captured variables on every call), and `tfcheck.load`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "fixtures" / "aot" / "mobilenet_v2.py"
PYTHON = sys.executable

SAVE_MODEL = """
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, keras, tensorflow as tf
keras.utils.set_random_seed(0)  # the build seeds every RNG with 0 before importing the module
sys.path.insert(0, {zoo!r})
import mobilenet_v2 as zoo
module = tf.Module()
module.model = zoo.model
module.f = zoo.mobilenet_v2.tf_function
tf.saved_model.save(module, {path!r})
np.save({input!r}, np.random.default_rng(0).standard_normal((1, 224, 224, 3)).astype("float32"))
"""

ARTIFACT_RUN = """
import time, numpy as np, tfcheck
y = tfcheck.load({artifacts!r}).mobilenet_v2(np.load({input!r}))
done = time.time()
np.save({output!r}, y)
print(done)
"""

SAVEDMODEL_RUN = """
import os, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, tensorflow as tf
model = tf.saved_model.load({path!r})  # keep a reference: its variables die with it
y = model.f(np.load({input!r})).numpy()
done = time.time()
np.save({output!r}, y)
print(done)
"""


STEADY_RUN = """
import json, os, statistics, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
os.environ["TFCHECK_ARTIFACTS"] = {cache!r}
import numpy as np, keras
keras.utils.set_random_seed(0)
sys.path.insert(0, {zoo!r})
import mobilenet_v2 as zoo
import tfcheck
x = np.load({input!r})
lib = tfcheck.load({artifacts!r})

def median_ms(call):
    call()
    times = []
    for _ in range(30):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000

def dispatch(mode):
    os.environ["TFCHECK_AOT_VERIFY"] = mode
    wrapper = tfcheck.aot(zoo.mobilenet_v2.tf_function)
    result = median_ms(lambda: wrapper(x))
    assert wrapper.backend == "tvm:cpu", wrapper.backend
    return result

print(json.dumps({{"tf.function": median_ms(lambda: zoo.mobilenet_v2.tf_function(x)),
                  "aot wrapper, verify every call": dispatch("every-call"),
                  "aot wrapper, verify first call": dispatch("first-call"),
                  "tfcheck.load": median_ms(lambda: lib.mobilenet_v2(x))}}))
"""


def steady(work: Path) -> dict[str, float]:
    """Warm per-call milliseconds (see the module docstring)."""
    script = STEADY_RUN.format(cache=str(work / "cache"), zoo=str(FIXTURE.parent),
                               input=str(work / "x.npy"), artifacts=str(work / "artifacts"))
    completed = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise SystemExit(f"child failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def prepare(work: Path) -> None:
    """Build the artifact and save the SavedModel, unless already there."""
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "artifacts" / "mobilenet_v2" / "manifest.json").is_file():
        subprocess.run([PYTHON, "-m", "tfcheck", "build", str(FIXTURE), "--cache-dir",
                        str(work / "cache"), "--out", str(work / "artifacts")],
                       cwd=REPO, check=True)
    if not (work / "savedmodel" / "saved_model.pb").is_file():
        script = SAVE_MODEL.format(zoo=str(FIXTURE.parent), path=str(work / "savedmodel"),
                                   input=str(work / "x.npy"))
        subprocess.run([PYTHON, "-c", script], check=True)


def first_result_seconds(script: str) -> float:
    """Seconds from spawning a fresh interpreter to the child's first result."""
    start = time.time()
    completed = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True,
                               check=False, env={**os.environ, "TFCHECK_AOT": "on"})
    if completed.returncode != 0:
        raise SystemExit(f"child failed:\n{completed.stderr[-3000:]}")
    return float(completed.stdout.strip().splitlines()[-1]) - start


def import_seconds() -> float:
    start = time.perf_counter()
    subprocess.run([PYTHON, "-c", "import tfcheck"], check=True)
    return time.perf_counter() - start


def measure(work: Path, runs: int) -> dict[str, object]:
    scripts = {
        "artifact": ARTIFACT_RUN.format(artifacts=str(work / "artifacts"), input=str(work / "x.npy"),
                                        output=str(work / "y_artifact.npy")),
        "savedmodel": SAVEDMODEL_RUN.format(path=str(work / "savedmodel"), input=str(work / "x.npy"),
                                            output=str(work / "y_savedmodel.npy")),
    }
    times: dict[str, list[float]] = {name: [] for name in scripts}
    for _ in range(runs):
        for name, script in scripts.items():
            times[name].append(first_result_seconds(script))
    import numpy as np

    difference = float(np.max(np.abs(np.load(work / "y_artifact.npy")
                                      - np.load(work / "y_savedmodel.npy"))))
    medians = {name: statistics.median(values) for name, values in times.items()}
    return {
        "runs": runs,
        "seconds": times,
        "median_seconds": medians,
        "speedup": medians["savedmodel"] / medians["artifact"],
        "import_tfcheck_seconds": statistics.median(import_seconds() for _ in range(runs)),
        "max_abs_difference": difference,
        "tuned": json.loads((work / "artifacts" / "mobilenet_v2" / "manifest.json")
                            .read_text())["tuned"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/tfcheck_cold_start"))
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--steady", action="store_true", help="also time warm calls")
    args = parser.parse_args()
    prepare(args.work)
    result = measure(args.work, args.runs)
    if args.steady:
        result["steady_ms"] = steady(args.work)
    (args.work / "cold_start.json").write_text(json.dumps(result, indent=2))
    medians = result["median_seconds"]
    print("| path (fresh process -> first MobileNetV2 result) | median | min |")
    print("|---|---|---|")
    for name, label in (("artifact", "tfcheck.load artifact (no TensorFlow)"),
                        ("savedmodel", "TensorFlow SavedModel load + call")):
        print(f"| {label} | {medians[name]:.2f} s | {min(result['seconds'][name]):.2f} s |")
    print(f"\nspeedup {result['speedup']:.1f}x; `python -c 'import tfcheck'` "
          f"{result['import_tfcheck_seconds']:.3f} s; max |artifact - savedmodel| "
          f"{result['max_abs_difference']:.2e}; tuned artifact: {result['tuned']}")
    for name, milliseconds in result.get("steady_ms", {}).items():
        print(f"warm call, {name}: {milliseconds:.1f} ms")


if __name__ == "__main__":
    main()
