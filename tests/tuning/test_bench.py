"""`tfcheck bench`: finding artifacts, grouping them, the CLI's checks, and one real comparison."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from tfcheck.compiler.bench.latency import _import_root, find_artifacts, time_calls, timed_inputs, group_by_function
from tfcheck.compiler.process.messages import Budget
from tfcheck.runtime.manifest import Manifest, SymbolicDim, TensorSpec


def _manifest(folder: Path, qualname: str, *, tuned: bool = False, device: str = "cpu",
              shape: tuple[int, ...] = (2, 4), created: str = "2026-11-22T10:00:00Z") -> Path:
    folder.mkdir(parents=True)
    Manifest(created=created, module="pkg.models", qualname=f"pkg.models.{qualname}", function=qualname,
             source_file="pkg/models.py", inputs=(TensorSpec("x", shape, "float32"),), outputs=(),
             output_structure={"kind": "tuple"}, tuned=tuned, device=device, library="lib.so",
             library_sha256="0" * 64).write(folder)
    return folder


def test_artifacts_of_one_function_and_shape_are_compared_together(tmp_path: Path) -> None:
    _manifest(tmp_path / "f", "f")
    _manifest(tmp_path / "f_older", "f", created="2026-11-21T10:00:00Z")
    _manifest(tmp_path / "f_tuned", "f", tuned=True)
    _manifest(tmp_path / "f_big", "f", shape=(8, 4))
    _manifest(tmp_path / "g", "g")
    _manifest(tmp_path / "g_cuda", "g", device="cuda")
    groups = group_by_function(find_artifacts(tmp_path))
    assert groups[0][0].folder == tmp_path / "f"
    assert [[(m.qualname[11:], m.inputs[0].shape, m.tuned) for m in g] for g in groups] == [
        [("f", (2, 4), False), ("f", (2, 4), True)],
        [("f", (8, 4), False)],
        [("g", (2, 4), False)],
    ]


def test_a_single_artifact_folder_is_found(tmp_path: Path) -> None:
    folder = _manifest(tmp_path / "only", "f")
    assert [m.folder for m in find_artifacts(folder)] == [folder]


def test_the_module_imports_from_the_folder_above_its_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for module in ("pkg.models", "models"):
        manifest = Manifest("f", (), (), {}, "cpu", "lib.so", "", module=module,
                            source_file=module.replace(".", "/") + ".py")
        assert _import_root(manifest) == tmp_path


@pytest.mark.parametrize(("module", "source"), [("../../evil", "evil.py"), ("os.path", "/tmp/x/evil.py"),
                                                ("pkg.models", "other/models.py"), ("models", "models.txt")])
def test_a_manifest_whose_module_is_not_its_source_file_is_refused(tmp_path: Path, module: str,
                                                                    source: str) -> None:
    """Bench imports what the manifest names: a module that is a path, or a source file that is not
    the file of that module, is refused instead of put on sys.path (names are identifiers)."""
    manifest = Manifest("f", (), (), {}, "cpu", "lib.so", "", module=module, source_file=source, folder=tmp_path)
    with pytest.raises(ValueError, match="'module'|'source_file'"):
        _import_root(manifest)


def test_a_package_init_imports_from_above_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    manifest = Manifest("f", (), (), {}, "cpu", "lib.so", "", module="pkg.models",
                        source_file="pkg/models/__init__.py")
    assert _import_root(manifest) == tmp_path


def test_timing_stops_at_the_run_limit_after_warm_up() -> None:
    calls = []
    times = time_calls(lambda: calls.append(1), Budget(warmup=2, min_runs=1, min_seconds=60, max_runs=7))
    assert (len(times), len(calls)) == (7, 9)


def test_unknown_backends_are_refused(run_cli: Callable[..., Result], tmp_path: Path) -> None:
    result = run_cli(tmp_path, "bench", "x.py", "--backends", "eager,torch")
    assert result.exit_code == 2
    assert "torch" in result.output + (result.stderr if result.stderr_bytes is not None else "")


def test_nothing_to_bench_is_an_error(run_cli: Callable[..., Result], tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    _manifest(tmp_path / "empty" / "gpu_only", "f", device="cuda")
    result = run_cli(tmp_path, "bench", "empty")
    assert result.exit_code == 2  # an error, not findings or a failed build
    assert "no CPU artifacts" in result.output + (result.stderr if result.stderr_bytes is not None else "")


def test_a_source_that_builds_nothing_is_an_error_not_a_crash(run_cli: Callable[..., Result], tmp_path: Path) -> None:
    result = run_cli(tmp_path, "bench", "no_such_folder")
    assert result.exit_code == 2
    output = result.output + (result.stderr if result.stderr_bytes is not None else "")
    assert "no CPU artifacts found or built from no_such_folder" in output and "internal error" not in output


def test_a_symbolic_artifact_is_timed_at_the_smallest_size_of_each_unknown_dimension(tmp_path: Path) -> None:
    """YOLOv3 built for any batch (benchmarks/users_models/yolov3.py): its inputs are made at batch 1."""
    folder = tmp_path / "detect"
    folder.mkdir()
    Manifest(created="2026-11-29T10:00:00Z", module="yolov3", qualname="yolov3.detect", function="detect",
             source_file="yolov3.py", inputs=(TensorSpec("images", ("batch", 416, 416, "images_3"), "float32"),),
             outputs=(), output_structure={"kind": "tuple"}, device="cpu", library="lib.so", library_sha256="0" * 64,
             dims={"batch": SymbolicDim(1, 8, (1, 5, 8)), "images_3": SymbolicDim(3, 4, (3, 4))}).write(folder)
    [manifest] = find_artifacts(folder)
    assert timed_inputs(manifest) == [TensorSpec("images", (1, 416, 416, 3), "float32")]


@pytest.mark.slow
def test_bench_builds_and_compares_a_function(project: Callable[..., Path], run_cli: Callable[..., Result],
                                              tmp_path: Path) -> None:
    folder = project({"dense.py": """
        import tensorflow as tf
        import tfcheck

        weights = tf.constant([[0.5, -1.0, 2.0]] * 4)

        @tfcheck.aot
        @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32)])
        def dense(x):
            return tf.nn.relu(tf.matmul(x, weights))
    """})
    plot = tmp_path / "chart.png"
    result = run_cli(folder, "bench", "dense.py", "--backends", "tf.function,tflite,tvm", "--seconds", "0.2",
                     "--min-runs", "3", "--format", "json", "--plot", str(plot))
    assert result.exit_code == 0, result.output
    [bench] = json.loads(result.stdout)
    assert bench["function"] == "dense.dense"
    by_name = {m["backend"]: m for m in bench["measurements"]}
    assert set(by_name) == {"tf.function", "tflite", "tvm"}
    for measurement in by_name.values():
        assert measurement["error"] is None
        assert measurement["median_ms"] > 0 and measurement["runs"] >= 3
        assert measurement["max_abs_diff"] < 1e-4
    assert by_name["tf.function"]["ratio"] == 1.0
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_markdown_table_shows_median_and_ratio_and_failures() -> None:
    from tfcheck.commands.bench import _markdown
    from tfcheck.compiler.bench.latency import FunctionBench, Measurement

    result = FunctionBench("m.f", [TensorSpec("x", (2, 4), "float32")], [
        Measurement("tf.function", median_ms=2.0, ratio=1.0),
        Measurement("tvm", median_ms=0.5, ratio=0.25),
        Measurement("xla", error="boom"),
    ])
    assert _markdown([result]).splitlines() == [
        "| function | inputs | tf.function | tvm | xla |",
        "|---|---|---:|---:|---:|",
        "| m.f | float32[2, 4] | 2 ms (1.00x) | 0.5 ms (0.25x) | failed |",
    ]


@pytest.mark.slow
def test_profile_times_every_kernel_with_its_rule(project: Callable[..., Path], run_cli: Callable[..., Result]) -> None:
    """`--profile` on a small model: the kernels' shares make up the inference's kernel time, each
    kernel names the rule that scheduled it, the convolution and the dense layer have GFLOP/s;
    the json form parses and the text form is a table."""
    folder = project({"small.py": """
        import numpy as np
        import tensorflow as tf
        import tfcheck

        rng = np.random.default_rng(0)
        kernel = tf.constant(rng.standard_normal((3, 3, 8, 16)).astype(np.float32))
        dense = tf.constant(rng.standard_normal((16, 10)).astype(np.float32))

        @tfcheck.aot
        @tf.function(input_signature=[tf.TensorSpec([1, 16, 16, 8], tf.float32)])
        def small(x):
            y = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(x, kernel, 1, "SAME")), 2, 2, "VALID")
            return tf.matmul(tf.reduce_mean(y, axis=[1, 2]), dense)
    """})
    assert run_cli(folder, "build", "small.py", "--out", "built").exit_code == 0
    result = run_cli(folder, "bench", "built", "--profile", "--seconds", "0.2", "--min-runs", "3", "--format", "json")
    assert result.exit_code == 0, result.output
    [profile] = json.loads(result.stdout)
    assert (profile["function"], profile["backend"], profile["error"]) == ("small.small", "tvm", None)
    kernels = profile["kernels"]
    assert kernels and profile["runs"] >= 3 and profile["median_ms"] > 0
    assert sum(kernel["share"] for kernel in kernels) == pytest.approx(1.0, abs=0.01)
    compiled = [kernel for kernel in kernels if not kernel["kernel"].startswith("vm.")]
    assert compiled and all(kernel["rule"].startswith("schedule_") for kernel in compiled)
    assert all(kernel["rule"] == "vm" for kernel in kernels if kernel["kernel"].startswith("vm."))
    with_flops = [kernel["kernel"] for kernel in compiled if kernel["gflops"]]
    assert any("conv2d" in name for name in with_flops) and any("matmul" in name for name in with_flops), compiled
    text = run_cli(folder, "bench", "built", "--profile", "--seconds", "0.2", "--min-runs", "3")
    assert text.exit_code == 0 and "schedule_contraction" in text.stdout and "GFLOP/s" in text.stdout


def test_profile_markdown_lists_the_slowest_kernels_with_their_share() -> None:
    from tfcheck.compiler.bench.profile import FunctionProfile, markdown
    from tfcheck.compiler.process.messages import KernelTime

    profile = FunctionProfile("m.f", [], "tvm", median_ms=4.0, runs=10, kernels=[
        KernelTime("fused_conv2d", 2, 3.0, "schedule_contraction", "1x8x8x16 2x1x1x16x8 1x8x8x16", 12.5),
        KernelTime("vm.builtin.alloc_tensor", 5, 1.0, "vm", "", None)])
    assert markdown(profile, top=1).splitlines() == [
        "m.f (tvm): 4.00 ms per inference (median of 10); kernels 4.00 ms in 7 calls; by rule: "
        "schedule_contraction 3.00 ms, vm 1.00 ms",
        "",
        "| kernel | calls | ms per inference | share | rule | GFLOP/s | buffers |",
        "|---|---:|---:|---:|---|---:|---|",
        "| fused_conv2d | 2 | 3.000 | 75.0% | schedule_contraction | 12.5 | 1x8x8x16 2x1x1x16x8 1x8x8x16 |",
    ]
