"""Cold start of the runtimes that setup.sh installed into WORK: from spawning a fresh process to
its first result (the child prints the wall clock then, so its exit is not counted). The rounds
are interleaved (each runs every row once), so that a change in the machine's load hits every row.

    benchmarks/runtime_install/setup.sh /tmp/rtm && python3 benchmarks/runtime_install/cold_start.py /tmp/rtm

`--before OTHER` adds the tfcheck rows of another folder laid out like WORK (`rt`, `out`), for
example one that setup.sh made from an older checkout, to compare two runtimes in one run.
"""

import argparse
import statistics
import subprocess
import time
from pathlib import Path

X = "np.random.default_rng(0).standard_normal({shape}).astype(np.float32)"
TFCHECK = "import numpy as np, tfcheck\ny = tfcheck.load('out').{name}(" + X + ")\n"
TFLITE = ("import numpy as np\nfrom {module} import Interpreter\ni = Interpreter(model_path='{name}.tflite')\n"
          "i.allocate_tensors()\ni.set_tensor(i.get_input_details()[0]['index'], " + X + ")\n"
          "i.invoke()\ny = i.get_tensor(i.get_output_details()[0]['index'])\n")
ONNX = ("import numpy as np, onnxruntime as ort\n"
        "s = ort.InferenceSession('{name}.onnx', providers=['CPUExecutionProvider'])\n"
        "y = s.run(None, {{'x': " + X + "}})[0]\n")
MLP, MOBILENET = {"name": "mlp", "shape": (64, 64)}, {"name": "mobilenet_v2", "shape": (1, 224, 224, 3)}
CASES = {
    "python -c pass": ("rt", "y = 0\n"),
    "tfcheck[runtime] MLP": ("rt", TFCHECK.format(**MLP)),
    "tfcheck[runtime] MobileNetV2": ("rt", TFCHECK.format(**MOBILENET)),
    "ai-edge-litert MLP": ("litert", TFLITE.format(module="ai_edge_litert.interpreter", **MLP)),
    "ai-edge-litert MobileNetV2": ("litert", TFLITE.format(module="ai_edge_litert.interpreter", **MOBILENET)),
    "tflite-runtime MLP": ("tflrt", TFLITE.format(module="tflite_runtime.interpreter", **MLP)),
    "tflite-runtime MobileNetV2": ("tflrt", TFLITE.format(module="tflite_runtime.interpreter", **MOBILENET)),
    "onnxruntime MLP": ("ort", ONNX.format(**MLP)),
}


def cases_with(before: Path | None) -> dict[str, tuple[Path | None, str, str]]:
    """CASES (run in WORK: the None) and, with `before`, the tfcheck rows again there."""
    cases: dict[str, tuple[Path | None, str, str]] = {name: (None, *case) for name, case in CASES.items()}
    for name, (venv, code) in CASES.items():
        if before is not None and name.startswith("tfcheck"):
            cases[f"{name} ({before.name})"] = (before, venv, code)
    return cases


def first_result_seconds(work: Path, venv: str, code: str) -> float:
    start = time.time()
    done = subprocess.run([str(work / venv / "bin" / "python"), "-c", code + "import time\nprint(time.time())"],
                          cwd=work, capture_output=True, text=True, check=True)
    return float(done.stdout.split()[-1]) - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work", type=Path, help="the folder setup.sh filled")
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--before", type=Path, help="another folder with `rt` and `out` to compare")
    args = parser.parse_args()
    cases = cases_with(args.before)
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.runs):
        for name, (folder, venv, code) in cases.items():
            times[name].append(first_result_seconds(folder or args.work, venv, code))
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.3f} s | {min(values):.3f} s |", flush=True)


if __name__ == "__main__":
    main()
