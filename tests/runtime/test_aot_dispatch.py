"""`@tfcheck.aot`: the decorator's forms, and dispatch between the artifact and TensorFlow."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from runtime_artifacts import read_manifest, write_manifest

import tfcheck
from tfcheck.fingerprint import captures_fingerprint, source_fingerprint
from tfcheck.runtime import NotCompiledError
from tfcheck.runtime.dispatch import AotFallbackWarning

tf = pytest.importorskip("tensorflow")

pytestmark = pytest.mark.xdist_group("tensorflow")  # one worker pays for importing TensorFlow

factor = tf.Variable(2.0)


@tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
def scale(x):
    """x * factor + 1; the `scale` test artifacts compute x * 2 + 1."""
    return x * factor + 1.0


def _fresh_wrapper():
    """A new wrapper per test: a wrapper looks its artifacts up once per process."""
    return tfcheck.aot(scale, shapes=[(1, 4), (3, 4)])


@pytest.fixture
def cache(artifacts, monkeypatch):
    """The `scale` artifacts (batch 1 and 3), with manifests that match `scale` as built."""
    out = artifacts(("scale", (1, 4)), ("scale", (3, 4)))
    python_function = scale.python_function
    for folder in out.iterdir():
        manifest = read_manifest(folder)
        specs = [tf.TensorSpec(spec["shape"], tf.float32) for spec in manifest["inputs"]]
        manifest.update(
            qualname=f"{python_function.__module__}.{python_function.__qualname__}",
            source_fingerprint=source_fingerprint(scale),
            captures_fingerprint=captures_fingerprint(scale.get_concrete_function(*specs)))
        write_manifest(folder, manifest)
    monkeypatch.setenv("TFCHECK_ARTIFACTS", str(out))
    monkeypatch.delenv("TFCHECK_AOT", raising=False)
    return out


def _x(batch: int) -> np.ndarray:
    return np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)


def _calls(fn, x, times=2):
    """Call `times` times; return the last result and every warning raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(times):
            result = fn(x)
    return result, [w for w in caught if issubclass(w.category, AotFallbackWarning)]


def test_fresh_artifact_runs_and_returns_tensorflow_types(cache):
    fn = _fresh_wrapper()
    for batch in (1, 3):
        result, fallbacks = _calls(fn, _x(batch))
        assert fn.backend == "tvm:cpu" and fallbacks == []
        assert isinstance(result, tf.Tensor)
        np.testing.assert_allclose(result.numpy(), scale(_x(batch)).numpy(), rtol=1e-6)
    fn(tf.constant(_x(1)))  # TensorFlow tensors go in through __array__/DLPack
    assert fn.backend == "tvm:cpu"


def test_tensorflow_tensors_reach_tvm_without_a_copy():
    from tfcheck.runtime.inputs import as_array, check_array
    from tfcheck.runtime.manifest import TensorSpec

    tensor = tf.constant(_x(3))
    prepared = check_array("scale", TensorSpec("x", (3, 4), "float32"), tensor, as_array(tensor))
    if as_array(tensor).ctypes.data % 64:
        pytest.skip("TensorFlow allocated this tensor unaligned; it is copied")
    assert prepared is tensor


def test_unbuilt_shape_falls_back_and_warns_once(cache):
    fn = _fresh_wrapper()
    result, fallbacks = _calls(fn, _x(2), times=3)
    assert fn.backend == "tensorflow" and len(fallbacks) == 1
    assert "no artifact for input shapes (x: (2, 4))" in str(fallbacks[0].message)
    np.testing.assert_allclose(result.numpy(), _x(2) * 2 + 1, rtol=1e-6)


def test_off_and_strict_modes(cache, monkeypatch):
    fn = _fresh_wrapper()
    monkeypatch.setenv("TFCHECK_AOT", "off")
    _, fallbacks = _calls(fn, _x(1))
    assert fn.backend == "tensorflow" and fallbacks == []
    monkeypatch.setenv("TFCHECK_AOT", "strict")
    fn(_x(1))
    assert fn.backend == "tvm:cpu"
    with pytest.raises(NotCompiledError, match="TFCHECK_AOT=strict: .*no artifact for input shapes"):
        fn(_x(2))
    monkeypatch.setenv("TFCHECK_AOT", "sometimes")
    with pytest.raises(ValueError, match="TFCHECK_AOT='sometimes': use one of on, off, strict"):
        fn(_x(1))


def test_changed_captured_variable_is_never_served_stale(cache, monkeypatch):
    fn = _fresh_wrapper()
    fn(_x(1))
    assert fn.backend == "tvm:cpu"
    factor.assign(3.0)
    try:
        result, fallbacks = _calls(fn, _x(1))
        assert fn.backend == "tensorflow" and len(fallbacks) == 1
        assert "variables it captures changed since the first call" in str(fallbacks[0].message)
        np.testing.assert_allclose(result.numpy(), _x(1) * 3 + 1, rtol=1e-6)
        monkeypatch.setenv("TFCHECK_AOT", "strict")
        with pytest.raises(NotCompiledError, match="variables it captures changed"):
            fn(_x(1))
    finally:
        factor.assign(2.0)
    fn(_x(1))
    assert fn.backend == "tvm:cpu"


def test_values_that_differ_from_the_first_call_say_how_to_make_build_and_process_agree(cache):
    # As with an unseeded Keras model: the process's initial values are not the build's.
    factor.assign(3.0)
    try:
        _, fallbacks = _calls(_fresh_wrapper(), _x(1))
    finally:
        factor.assign(2.0)
    message = str(fallbacks[0].message)
    assert "do not hold the values the artifact" in message and "changed since" not in message
    assert "model.load_weights(...)" in message and "keras.utils.set_random_seed(0)" in message
    assert f"tfcheck build {__file__}" in message and "TFCHECK_AOT=off" in message


def test_changed_source_makes_the_artifact_stale(cache):
    for folder in cache.iterdir():
        manifest = read_manifest(folder)
        manifest["source_fingerprint"] = "1" * 64
        write_manifest(folder, manifest)
    fn = _fresh_wrapper()
    _, fallbacks = _calls(fn, _x(1))
    assert fn.backend == "tensorflow" and len(fallbacks) == 1
    assert "source changed since the last build" in str(fallbacks[0].message)


def test_not_compiled_warns_with_the_build_command(tmp_path, monkeypatch):
    monkeypatch.setenv("TFCHECK_ARTIFACTS", str(tmp_path))
    fn = _fresh_wrapper()
    _, fallbacks = _calls(fn, _x(1))
    assert fn.backend == "tensorflow" and len(fallbacks) == 1
    message = str(fallbacks[0].message)
    assert "scale is not compiled" in message and f"tfcheck build {__file__}" in message


def test_dispatch_from_many_threads(cache):
    fn = _fresh_wrapper()
    inputs = [_x(1 + 2 * (i % 2)) for i in range(200)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda x: fn(x).numpy(), inputs))
    for x, result in zip(inputs, results):
        np.testing.assert_allclose(result, x * 2 + 1, rtol=1e-6)
    assert fn.backend == "tvm:cpu"


def test_dispatch_from_8_threads_at_once_logs_no_retracing_warning(cache, caplog):
    # Each new wrapper makes new guards; the threads' first calls start together, as in a server.
    for _ in range(3):
        fn = _fresh_wrapper()
        start = threading.Barrier(8)

        def work(thread: int, fn=fn, start=start) -> None:
            start.wait()
            for call in range(10):
                fn(_x(1 + 2 * ((thread + call) % 2))).numpy()

        with caplog.at_level(logging.WARNING, logger="tensorflow"):
            with ThreadPoolExecutor(max_workers=8) as pool:
                list(pool.map(work, range(8)))
        assert fn.backend == "tvm:cpu"
    assert [r.getMessage() for r in caplog.records if "retracing" in r.getMessage()] == []


def test_decorator_forms_and_metadata():
    plain = tfcheck.aot(scale)
    assert plain.aot_options == {"name": "scale", "targets": None, "shapes": None, "dims": None,
                                 "weights": "auto", "values": None}
    assert plain.tf_function is scale and plain.__wrapped__ is scale
    assert plain.__name__ == "scale" and plain.__doc__ == scale.__doc__
    configured = tfcheck.aot(name="scaler", targets="cpu", shapes=[(1, 4), ((3, 4),)])(scale)
    assert configured.aot_options == {"name": "scaler", "targets": ["cpu"],
                                      "shapes": [((1, 4),), ((3, 4),)], "dims": None, "weights": "auto",
                                      "values": None}
    assert configured.backend is None


@pytest.mark.parametrize("target, message", [
    (lambda x: x, "needs a tf.function, got '<lambda>'"),
    (None, "already decorated"),
])
def test_decorating_something_else_is_a_type_error(target, message):
    with pytest.raises(TypeError, match=message):
        tfcheck.aot(target if target is not None else tfcheck.aot(scale))


def test_bad_shapes_are_a_type_error():
    with pytest.raises(TypeError, match="neither a shape"):
        tfcheck.aot(shapes=[(1, "a")])


def test_decorating_imports_nothing_heavy():
    # A stand-in whose type lives in a "tensorflow." module passes the decorator's check without
    # importing TensorFlow, which would itself import NumPy and hide what the decorator imports.
    script = textwrap.dedent("""
        import sys
        import tfcheck

        class Function:
            __module__ = "tensorflow.python.eager.polymorphic_function.polymorphic_function"
            python_function = staticmethod(lambda x: x)
            get_concrete_function = None
            __name__ = "f"

        wrapped = tfcheck.aot(shapes=[(1,)])(Function())
        assert wrapped.aot_options == {"name": "f", "targets": None, "shapes": [((1,),)], "dims": None,
                                       "weights": "auto", "values": None}
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("tvm", "tvm_ffi", "numpy",
                     "tensorflow") or m.startswith(("tfcheck.runtime", "tfcheck.compiler"))))
    """)
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                               check=True, timeout=120)
    assert completed.stdout.strip().splitlines()[-1] == "[]"


def test_first_call_verification_skips_later_checks(cache, monkeypatch):
    monkeypatch.setenv("TFCHECK_AOT_VERIFY", "first-call")
    fn = _fresh_wrapper()
    fn(_x(1))
    factor.assign(3.0)
    try:
        fn(_x(1))
        assert fn.backend == "tvm:cpu"  # documented trade-off: later changes go unnoticed
    finally:
        factor.assign(2.0)
    monkeypatch.setenv("TFCHECK_AOT_VERIFY", "never")
    with pytest.raises(ValueError, match="TFCHECK_AOT_VERIFY='never'"):
        fn(_x(1))


def test_modified_library_falls_back_and_the_warning_points_at_the_caller(cache, monkeypatch):
    library = cache / "scale__1x4" / "lib.so"
    library.write_bytes(library.read_bytes() + b"\0")
    fn = _fresh_wrapper()
    result, fallbacks = _calls(fn, _x(1))
    assert fn.backend == "tensorflow" and len(fallbacks) == 1
    assert "does not match the manifest" in str(fallbacks[0].message)
    assert fallbacks[0].filename == __file__
    np.testing.assert_allclose(result.numpy(), _x(1) * 2 + 1, rtol=1e-6)
    fn(_x(3))
    assert fn.backend == "tvm:cpu"  # the other shape's artifact is intact
    monkeypatch.setenv("TFCHECK_AOT", "strict")
    with pytest.raises(NotCompiledError, match="does not match the manifest"):
        fn(_x(1))


class _Doubler(tf.Module):
    @tfcheck.aot
    @tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
    def run(self, x):
        return x * 2.0


def test_the_decorator_binds_per_instance_like_tf_function(monkeypatch, tmp_path):
    monkeypatch.setenv("TFCHECK_ARTIFACTS", str(tmp_path))  # nothing built: TensorFlow runs
    first, second = _Doubler(), _Doubler()
    assert _Doubler.__dict__["run"] is _Doubler.run  # on the class: the class's own wrapper
    assert first.run is first.run and first.run is not second.run
    assert first.run.tf_function is first.run.tf_function and not first.run.name_given
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AotFallbackWarning)
        np.testing.assert_allclose(first.run(np.ones(2, np.float32)).numpy(), [2.0, 2.0])
    assert first.run.backend == "tensorflow" and second.run.backend is None  # each its own wrapper
    assert tfcheck.aot(name="given")(_Doubler.__dict__["run"].tf_function).name_given
