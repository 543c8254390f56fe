"""Check a built zoo: every artifact, loaded in a fresh process without TensorFlow, returns
TensorFlow's result. `test_zoo_without_tensorflow.py` runs it on the whole zoo; by hand:

    .venv/bin/tfcheck build fixtures/aot/ --cache-dir /tmp/zoo/cache --out /tmp/zoo/out
    .venv/bin/python tests/runtime/zoo_check.py /tmp/zoo/out [--runtime-python /tmp/rt/bin/python]

Step 1 (a TensorFlow child process) seeds every RNG with 0 as `tfcheck build` does, so the zoo's
randomly initialised weights are the build's, imports each artifact's module from its manifest's
`source_file`, and saves inputs and TensorFlow's outputs. Step 2 (a child process that must not
import TensorFlow or the compiler, which it asserts) runs the artifacts with `tfcheck.load` on
those inputs. This process then compares them with the build's own tolerance
(`tfcheck.compiler.build.verify`: float32 atol 1e-4 scaled by the output's magnitude, rtol 1e-3).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

TENSORFLOW_STEP = """
import importlib.util, json, sys
import numpy as np, keras, tensorflow as tf
out, work = sys.argv[1], sys.argv[2]
from pathlib import Path
for folder in sorted(path.parent for path in Path(out).glob("*/manifest.json")):
    manifest = json.loads((folder / "manifest.json").read_text())
    keras.utils.set_random_seed(0)
    source = Path(manifest["source_file"])
    spec = importlib.util.spec_from_file_location(f"zoo_{folder.name}", source)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(source.parent))
    spec.loader.exec_module(module)
    wrapper = next(v for v in vars(module).values()
                   if getattr(v, "aot_options", {}).get("name") == manifest["function"])
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(i["shape"]).astype(i["dtype"]) if "float" in i["dtype"]
              else np.full(i["shape"], 3, i["dtype"]) for i in manifest["inputs"]]
    result = wrapper.tf_function(*inputs)
    flat = [np.asarray(t) for t in tf.nest.flatten(result)]
    np.savez(Path(work) / f"{folder.name}.npz", **{f"input_{i}": a for i, a in enumerate(inputs)},
             **{f"output_{i}": a for i, a in enumerate(flat)})
"""

RUNTIME_STEP = """
import json, sys
from pathlib import Path
import numpy as np, tfcheck
out, work = sys.argv[1], sys.argv[2]
lib = tfcheck.load(out)
for folder in sorted(path.parent for path in Path(out).glob("*/manifest.json")):
    manifest = json.loads((folder / "manifest.json").read_text())
    saved = np.load(Path(work) / f"{folder.name}.npz")
    inputs = [saved[f"input_{i}"] for i in range(len(manifest["inputs"]))]
    result = lib[manifest["qualname"]](*inputs)
    got = list(result.values()) if isinstance(result, dict) else list(result) if isinstance(result, tuple) else [result]
    np.savez(Path(work) / f"{folder.name}.aot.npz", *got)
assert "tensorflow" not in sys.modules and not any(m.startswith("tfcheck.compiler") for m in sys.modules)
"""


def compare(out: Path, work: Path) -> bool:
    """Compare as `tfcheck build` verifies (tfcheck.compiler.build.verify), in this parent process."""
    import numpy as np

    from tfcheck.compiler.build.verify import compare as verify

    passed = True
    for folder in sorted(path.parent for path in out.glob("*/manifest.json")):
        reference = np.load(work / f"{folder.name}.npz")
        got = np.load(work / f"{folder.name}.aot.npz")
        expected = [reference[f"output_{i}"] for i in range(len(got.files))]
        result = verify([got[f"arr_{i}"] for i in range(len(got.files))], expected)
        print(f"{folder.name}: max |artifact - TensorFlow| = {result.max_abs_error:.2e} "
              f"({'ok' if result.passed else 'DIFFERS'})")
        passed = passed and bool(result.passed)
    return passed


def check_zoo(out: Path, work: Path, runtime_python: str = sys.executable) -> bool:
    """Run both steps in child processes, then compare; True when every artifact matches.
    `runtime_python` runs step 2 (for example a venv with only `tfcheck[runtime]`)."""
    work.mkdir(parents=True, exist_ok=True)
    for python, step in ((sys.executable, TENSORFLOW_STEP), (runtime_python, RUNTIME_STEP)):
        completed = subprocess.run([python, "-c", textwrap.dedent(step), str(out), str(work)],
                                   cwd=REPO, capture_output=True, text=True)
        if completed.returncode != 0:
            raise RuntimeError(completed.stderr[-4000:])
    return compare(out, work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="a `tfcheck build --out` folder")
    parser.add_argument("--work", type=Path, default=Path("/tmp/tfcheck_zoo_check"))
    parser.add_argument("--runtime-python", default=sys.executable,
                        help="the Python that runs the artifacts (default: this one)")
    args = parser.parse_args()
    if not check_zoo(args.out, args.work, args.runtime_python):
        raise SystemExit("some artifacts differ from TensorFlow")


if __name__ == "__main__":
    main()
