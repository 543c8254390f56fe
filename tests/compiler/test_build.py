"""`tfcheck build` end to end on small functions: cache behaviour, failures and their messages,
shape entries, export, concurrency. Each build traces in a TensorFlow child process, so these
are slow tests; the functions are tiny so that compiling is quick."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from tfcheck.compiler.cache.artifacts import entry_problem

pytestmark = pytest.mark.slow

AFFINE = '''
import tensorflow as tf
import tfcheck

weights = tf.Variable(tf.random.normal([4, 3]))


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32)])
def affine(x):
    y = tf.nn.relu(tf.matmul(x, weights) + 1.0)
    for _ in tf.range(3):  # control flow: its frozen graph must hash the same in every process
        y = y * 0.5 + 0.25
    return y
'''

FAILURES = '''
import tensorflow as tf
import tfcheck


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([3, 3], tf.float32)])
def determinant(x):
    return tf.linalg.det(x)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32)])
def mismatched(x):
    return tf.matmul(x, tf.ones([5, 5]))


@tfcheck.aot(shapes=[(1, 8), (4, 8)])
@tf.function
def unsigned(images, scale=2.0):
    return images * scale


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="rows")])
def unknown_batch(rows):
    return rows[:, :tf.shape(rows)[0]]  # min(batch, 4) columns: the clipping decides the result's size


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
def asserting(x):
    assert x > 0
    return x


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([2, 2], tf.float32)])
def fine(x):
    return {"double": x * 2.0, "sum": tf.reduce_sum(x, axis=1)}
'''


def build(run_cli: Callable[..., Result], folder: Path, *args: str) -> tuple[int, dict[str, Any]]:
    result = run_cli(folder, "build", *args, "--cache-dir", str(folder / "cache"), "--format", "json")
    return result.exit_code, json.loads(result.stdout)


def by_function(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {record["function"].rsplit(".", 1)[-1]: record for record in report["functions"]}


def entries(cache: Path) -> list[Path]:
    return sorted(p for p in cache.iterdir() if p.is_dir() and not p.name.startswith("."))


def test_cache_hit_miss_on_change_and_corrupt_entry(project: Callable[..., Path],
                                                   run_cli: Callable[..., Result]) -> None:
    folder = project({"affine.py": AFFINE})
    code, report = build(run_cli, folder)
    assert code == 0, report
    [first] = report["functions"]
    assert first["status"] == "built" and first["verified"] is True
    assert first["max_abs_error"] < 1e-5
    library = Path(first["artifact"]) / "lib.so"
    built_at = library.stat().st_mtime_ns

    code, report = build(run_cli, folder)
    [again] = report["functions"]
    assert (code, again["status"], again["artifact"]) == (0, "cached", first["artifact"])
    assert library.stat().st_mtime_ns == built_at  # nothing was recompiled or rewritten

    (folder / "affine.py").write_text(AFFINE.replace("+ 1.0", "+ 2.0"))
    code, report = build(run_cli, folder)
    [changed] = report["functions"]
    assert (code, changed["status"]) == (0, "built")
    assert changed["artifact"] != first["artifact"]
    assert len(entries(folder / "cache")) == 2

    Path(changed["artifact"], "lib.so").write_bytes(b"not a library")
    code, report = build(run_cli, folder)
    [repaired] = report["functions"]
    assert (code, repaired["status"], repaired["artifact"]) == (0, "built", changed["artifact"])
    assert "corrupt" in repaired["message"]
    assert entry_problem(Path(repaired["artifact"])) is None


def test_failures_are_per_function_with_clear_messages(project: Callable[..., Path],
                                                      run_cli: Callable[..., Result]) -> None:
    folder = project({"models.py": FAILURES})
    code, report = build(run_cli, folder)
    assert code == 1
    records = by_function(report)
    assert records["fine"]["status"] == "built" and records["fine"]["verified"] is True
    failed = {name: record["message"] for name, record in records.items() if record["status"] == "failed"}
    assert set(failed) == {"determinant", "mismatched", "unsigned", "unknown_batch", "asserting"}
    assert "models.determinant" in failed["determinant"] and "MatrixDeterminant" in failed["determinant"]
    assert records["determinant"]["op"] == "MatrixDeterminant"
    assert "models.mismatched" in failed["mismatched"]
    assert "no input_signature" in failed["unsigned"] and "224" not in failed["unsigned"]
    assert "input_signature=[tf.TensorSpec([None, 8], tf.float32, name='images')]" in failed["unsigned"]
    assert "TFLite operator STRIDED_SLICE from TensorFlow node" in failed["unknown_batch"]
    assert "list the concrete shapes: @tfcheck.aot(shapes=[(1, 4), (8, 4)])" in failed["unknown_batch"]
    assert "TFC008" in failed["asserting"] and "--no-lint" in failed["asserting"]
    manifest = json.loads(Path(records["fine"]["artifact"], "manifest.json").read_text())
    assert manifest["output_structure"] == {"kind": "dict", "keys": ["double", "sum"]}
    assert [o["shape"] for o in manifest["outputs"]] == [[2, 2], [2]]


def test_shape_entries_give_one_artifact_each_and_export(project: Callable[..., Path],
                                                         run_cli: Callable[..., Result]) -> None:
    folder = project({"batched.py": '''
        import tensorflow as tf
        import tfcheck

        @tfcheck.aot(name="scale", shapes=[(1, 4), (3, 4)])
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
        def batched(x):
            return x * 3.0, tf.reduce_max(x)
    '''})
    tensorflow_loaded_before = "tensorflow" in sys.modules  # by another test in this worker
    code, report = build(run_cli, folder, "--out", str(folder / "deploy"))
    assert code == 0, report
    assert sorted(p.name for p in (folder / "deploy").iterdir()) == ["scale__1x4", "scale__3x4", "tvm-runtime"]
    manifest = json.loads((folder / "deploy" / "scale__3x4" / "manifest.json").read_text())
    assert manifest["function"] == "scale" and manifest["qualname"] == "batched.batched"
    assert manifest["inputs"] == [{"name": "x", "shape": [3, 4], "dtype": "float32"}]
    assert manifest["output_structure"] == {"kind": "tuple", "length": 2}
    assert manifest["verify"]["passed"] is True
    assert set(manifest) >= {"key", "source_fingerprint", "captures_fingerprint", "graph_fingerprint",
                             "target", "device", "cpu_features", "versions", "library_sha256", "created"}
    # TensorFlow ran in the build's child processes only
    assert tensorflow_loaded_before or "tensorflow" not in sys.modules


def test_config_shape_entries_reach_the_trace(project: Callable[..., Path], run_cli: Callable[..., Result]) -> None:
    folder = project({"pair.py": '''
        import tensorflow as tf
        import tfcheck

        @tfcheck.aot
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32), tf.TensorSpec([None], tf.float32)])
        def pair(x, y):
            return x * 2.0, y + 1.0
    '''}, config='[tool.tfcheck.build]\nshapes = { "pair.pair" = [[[1, 4], [1]], [[8, 4], [8]]] }\n')
    code, report = build(run_cli, folder, "--dry-run")
    assert code == 0, report
    assert [[spec["shape"] for spec in r["inputs"]] for r in report["functions"]] == [[[1, 4], [1]], [[8, 4], [8]]]


def test_a_module_that_crashes_or_exits_at_import_is_named(project: Callable[..., Path],
                                                           run_cli: Callable[..., Result]) -> None:
    function = "@tfcheck.aot\n@tf.function(input_signature=[tf.TensorSpec([1], tf.float32)])\ndef f(x):\n    return x\n"
    header = "import ctypes, os, sys\nimport tensorflow as tf\nimport tfcheck\nprint('loading weights')\n"
    folder = project({"crash.py": header + "ctypes.string_at(0)\n" + function,
                      "quits.py": header + "sys.exit(3)\n" + function,
                      "leaves.py": header + "os._exit(0)\n" + function})
    code, report = build(run_cli, folder)
    messages = {record["function"]: record["message"] for record in report["functions"]}
    assert code == 1
    assert messages["crash.f"].startswith("crash.f: importing crash.py crashed with SIGSEGV before tracing crash.f")
    assert messages["quits.f"] == "quits.f: importing quits.py exited (sys.exit(3)) before tracing quits.f"
    assert messages["leaves.f"] == (
        "leaves.f: importing leaves.py exited with status 0 without reporting a result before tracing "
        "leaves.f (os._exit, or a crash in native code); its last output:\nloading weights")  # no TF start-up lines


CONVERTER_CRASHES = '''
import os
import signal
import warnings

import tensorflow as tf
import tfcheck

warnings.warn("a Keras warning printed at import, unrelated to the crash")
# TensorFlow's converter dying in native code, as it did on a CRNN for any width (issue 42)
tf.lite.TFLiteConverter.convert = lambda self: os.kill(os.getpid(), signal.SIGSEGV)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([1, 32, None, 3], tf.float32, name="image")])
def read(image):
    return tf.reduce_mean(image, axis=1)


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32, name="x")])
def fixed(x):
    return x * 2.0
'''


def test_a_converter_crash_names_the_conversion_the_signal_and_what_to_try(
        project: Callable[..., Path], run_cli: Callable[..., Result]) -> None:
    folder = project({"crashy.py": CONVERTER_CRASHES})
    code, report = build(run_cli, folder)
    assert code == 1
    messages = {record["function"]: record["message"] for record in report["functions"]}
    segfault = "crashed with SIGSEGV (a segmentation fault: native code (TensorFlow, TVM, an extension) read memory"
    assert messages["crashy.read"].startswith(
        "crashy.read: converting crashy.read to TFLite for inputs image: float32[1, 32, image_2, 3] (image_2 of "
        f"unknown size) {segfault}")
    assert ("TensorFlow's TFLite converter crashes on some graphs with dimensions of unknown size: to build one "
            "artifact per size instead, list the concrete shapes: @tfcheck.aot(shapes=[(1, 32, 1, 3), (1, 32, 8, 3)])"
            in messages["crashy.read"])
    assert messages["crashy.fixed"].startswith(
        f"crashy.fixed: converting crashy.fixed to TFLite for inputs x: float32[2, 4] {segfault}")
    assert "not in your code" in messages["crashy.fixed"]
    assert not any("Keras warning" in message or "its last output" in message for message in messages.values())


def test_concurrent_builds_share_one_cache(project: Callable[..., Path]) -> None:
    folder = project({"affine.py": AFFINE})
    command = [sys.executable, "-m", "tfcheck", "build", "affine.py", "--cache-dir", "cache", "--format", "json"]
    processes = [subprocess.Popen(command, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  env={**os.environ, "PYTHONPATH": ""}) for _ in range(2)]
    reports = [json.loads(process.communicate(timeout=600)[0]) for process in processes]
    assert [process.returncode for process in processes] == [0, 0]
    statuses = sorted(report["functions"][0]["status"] for report in reports)
    assert statuses in (["built", "built"], ["built", "cached"])
    [entry] = entries(folder / "cache")
    assert entry_problem(entry) is None
    assert not list((folder / "cache" / ".tmp").iterdir())


def test_inspect_and_dry_run_report_operators(project: Callable[..., Path],
                                             run_cli: Callable[..., Result]) -> None:
    folder = project({"affine.py": AFFINE})
    result = run_cli(folder, "inspect", "affine.py")
    assert result.exit_code == 0, result.output
    assert "affine.affine" in result.stdout
    assert "FULLY_CONNECTED" in result.stdout or "BATCH_MATMUL" in result.stdout
    assert "ok" in result.stdout
    code, report = build(run_cli, folder, "--dry-run")
    [record] = report["functions"]
    assert (code, record["status"], record["unsupported"]) == (0, "checked", [])
    assert not (folder / "cache").exists()


def test_bad_target_and_missing_paths_are_usage_errors(project: Callable[..., Path],
                                                       run_cli: Callable[..., Result]) -> None:
    folder = project({"affine.py": AFFINE})
    result = run_cli(folder, "build", "--target", "cuda")
    assert result.exit_code == 2 and "--arch" in result.stderr
    result = run_cli(folder, "build", "no_such_module", "--dry-run")
    assert result.exit_code == 2 and "no_such_module: no such file, folder or module" in result.stderr


def test_each_function_builds_for_its_own_targets(project: Callable[..., Path],
                                                  run_cli: Callable[..., Result]) -> None:
    """`targets=` gives one artifact per target (export names say which); a "cuda" without --arch
    fails that function only; --target replaces every function's list."""
    folder = project({"portable.py": '''
        import tensorflow as tf
        import tfcheck

        @tfcheck.aot(name="scale", targets=["cpu", '{"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "x86-64"}'])
        @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32)])
        def scale(x):
            return x * 3.0

        @tfcheck.aot(targets=["cuda"])
        @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32)])
        def gpu_only(x):
            return x + 1.0
    '''})
    code, report = build(run_cli, folder, "--out", str(folder / "deploy"))
    scale_records = [r for r in report["functions"] if r["name"] == "scale"]
    assert [r["status"] for r in scale_records] == ["built", "built"]
    assert scale_records[1]["target"] == "llvm:x86-64"
    exports = sorted(p.name for p in (folder / "deploy").iterdir() if p.name != "tvm-runtime")
    assert exports == sorted(f"scale__{r['target'].replace(':', '-')}" for r in scale_records)
    [gpu] = [r for r in report["functions"] if r["name"] == "gpu_only"]
    assert code == 1 and gpu["status"] == "failed"
    assert "targets=['cuda']" in gpu["message"] and "--arch" in gpu["message"]

    code, report = build(run_cli, folder, "--target", "cpu", "--out", str(folder / "host"))
    assert code == 0 and len(report["functions"]) == 2
    assert sorted(p.name for p in (folder / "host").iterdir()) == ["gpu_only", "scale", "tvm-runtime"]


def test_the_readme_example_builds_and_dispatches_to_its_artifact(project: Callable[..., Path],
                                                                   run_cli: Callable[..., Result]) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Compiling tf.functions ahead of time"):]
    example = re.search(r"```python\n(# models/classify.py\n.*?)```", section, re.DOTALL).group(1)
    folder = project({"models/__init__.py": "", "models/classify.py": example})
    result = run_cli(folder, "build", "models/")
    assert result.exit_code == 0, result.output
    # A fresh process, as a server would be: a fallback warning (weights that differ from the
    # build's, say) is an error here.
    script = ("import warnings, numpy as np\nfrom tfcheck.runtime.dispatch import AotFallbackWarning\n"
              "warnings.simplefilter('error', AotFallbackWarning)\nfrom models.classify import classify\n"
              "classify(np.ones((1, 64), np.float32))\nprint(classify.backend)\n")
    completed = subprocess.run([sys.executable, "-c", script], cwd=folder, capture_output=True, text=True,
                               timeout=300, env={**os.environ, "PYTHONPATH": str(folder)})
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert completed.stdout.split() == ["tvm:cpu"]
