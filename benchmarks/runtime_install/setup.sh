#!/bin/sh
# Fresh venvs (no pip of their own) for docs/runtime.md's "Installed size and cold start", in $1:
# rt = the tfcheck wheel with [runtime]; litert, tflrt, ort = the TFLite runtimes and ONNX Runtime.
# Then the same MLP and MobileNetV2 for each runtime. Needs the development .venv (TensorFlow).
set -e
work=$1; repo=$(cd "$(dirname "$0")/../.." && pwd); pip="$repo/.venv/bin/python -m pip"
mkdir -p "$work" && cd "$work"
for v in rt ort litert tflrt tools; do ${PYTHON:-python3.11} -m venv --without-pip $v; done
$pip wheel --no-deps -q -w wheel "$repo"
$pip --python rt/bin/python install -q "$(ls wheel/tfcheck-*.whl)[runtime]"
$pip --python ort/bin/python install -q onnxruntime
$pip --python litert/bin/python install -q ai-edge-litert
$pip --python tflrt/bin/python install -q tflite-runtime "numpy<2"  # 2.14 fails with NumPy 2
$pip --python tools/bin/python install -q onnx numpy
(cd "$repo" && .venv/bin/tfcheck build fixtures/aot/mlp.py fixtures/aot/mobilenet_v2.py \
    --cache-dir "$work/cache" --out "$work/out")
"$repo/.venv/bin/python" "$repo/benchmarks/runtime_install/models.py" tflite
tools/bin/python "$repo/benchmarks/runtime_install/models.py" onnx
for v in rt ort litert tflrt; do
    sp=$(echo $v/lib/python3*/site-packages)
    echo "$v: $(du -sm "$sp" | cut -f1) MB, without NumPy $(du -skc $(ls -d "$sp"/* | grep -iv /numpy) | tail -1 | cut -f1) kB"
done
