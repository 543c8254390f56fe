"""Child processes: events over the private pipe, and crashes, exits and hangs as messages."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tfcheck.compiler.process.child import allow_children, run_child, stop_children, without_start_up_noise


@dataclass(frozen=True)
class Echo:
    """The request and result of the test children (each defines the same dataclass)."""

    x: int

IMPORTING = "events.stage('import', doing='importing m.py', before='tracing m.f')"

STEPS = {
    "ok": "print('user output on stdout')\n    events.stage('compile')\n    return Echo(request.x * 2)",
    "answers_badly": "return {'x': 1}",
    "refuses": "raise StepError('no can do', op='Bincount')",
    "raises": "raise KeyError('missing')",
    "segfaults": "import ctypes\n    ctypes.string_at(0)",
    "exits": "import os\n    os._exit(3)",
    "hangs": "import time\n    events.stage('trace')\n    time.sleep(60)",
    # as the tracing child does around the user's module
    "sys_exit_at_import": f"{IMPORTING}\n    import sys\n    sys.exit(3)",
    "os_exit_at_import": f"{IMPORTING}\n    import os\n    print('last words')\n    os._exit(4)",
    "hangs_at_import": f"{IMPORTING}\n    import time\n    time.sleep(60)",
    # TensorFlow's converter dying on a symbolic graph, after the module's import printed warnings
    "segfaults_converting": f"{IMPORTING}\n    import os, signal, warnings\n"
                            "    warnings.warn('a Keras warning from the import')\n"
                            "    from tfcheck.compiler.process.messages import SymbolicFailure\n"
                            "    from tfcheck.runtime.manifest import SymbolicDim, TensorSpec\n"
                            "    dims = {'x_2': SymbolicDim(1, None, (1, 32))}\n"
                            "    inputs = [TensorSpec('x', (1, 32, 'x_2', 3), 'float32')]\n"
                            "    events.stage('convert', doing='converting m.f to TFLite for inputs x: float32[1, 32, x_2, 3]',"
                            " advice='build at known sizes', symbolic=SymbolicFailure(dims, inputs, False))\n"
                            "    print('converter: last words')\n"
                            "    os.kill(os.getpid(), signal.SIGSEGV)",
}


@pytest.fixture(params=[False, True], ids=["fresh", "forked"])
def child_module(tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module per behaviour, each a real child entry point built on `child_main`, run in a fresh
    process or forked from a server that preloaded it (`compiler/process/forkserver.py`): every
    behaviour must read the same either way."""
    for name, body in STEPS.items():
        (tmp_path / f"step_{name}.py").write_text(
            "from dataclasses import dataclass\n"
            "from tfcheck.compiler.process.child import StepError, child_main\n\n"
            "@dataclass(frozen=True)\nclass Echo:\n    x: int\n\n"
            "def preload():\n    import xml.dom.minidom\n\n"
            f"def step(request, events):\n    {body}\n\n"
            "if __name__ == '__main__':\n    child_main(step, Echo)\n")
    monkeypatch.setattr(sys.modules[__name__], "FORKED", request.param)
    return tmp_path


FORKED = False  # set by `child_module`


def run(module_dir: Path, name: str, timeout: float = 60) -> tuple[object, list[str]]:
    stages: list[str] = []
    outcome = run_child(f"step_{name}", Echo(21), Echo, module_dir / "work", on_stage=stages.append,
                        timeout=timeout, env={"PYTHONPATH": str(module_dir)}, forked=FORKED)
    return outcome, stages


def test_result_and_stages_travel_apart_from_user_output(child_module: Path) -> None:
    outcome, stages = run(child_module, "ok")
    assert outcome.result == Echo(42) and outcome.error is None
    assert stages == ["compile"]


@pytest.mark.parametrize(("name", "message"), [
    ("refuses", "no can do"),
    ("raises", "KeyError: 'missing'"),
    ("segfaults", "the build process crashed with SIGSEGV"),
    ("exits", "the build process exited with status 3 without reporting a result"),
    ("answers_badly", "TypeError: asdict() should be called on dataclass instances"),
])
def test_failures_become_messages(child_module: Path, name: str, message: str) -> None:
    outcome, _ = run(child_module, name)
    assert outcome.result is None and outcome.error.startswith(message)
    assert outcome.op == ("Bincount" if name == "refuses" else None)


def test_a_crash_names_what_was_converted_the_signal_and_what_to_try(child_module: Path) -> None:
    """A converter that dies with SIGSEGV: the message says what it was converting, the signal and
    what to try, quotes only what the process printed since converting began (never the module's
    import warnings), and hands the driver the symbolic fallback."""
    outcome, stages = run(child_module, "segfaults_converting")
    assert stages == ["import", "convert"]
    assert outcome.error == ("converting m.f to TFLite for inputs x: float32[1, 32, x_2, 3] crashed with SIGSEGV "
                             "(a segmentation fault: native code (TensorFlow, TVM, an extension) read memory it "
                             "does not own); build at known sizes; its last output:\nconverter: last words")
    assert outcome.symbolic.dims["x_2"].min == 1 and outcome.symbolic.has_shape_entries is False


def test_a_hanging_child_is_killed_at_the_deadline(child_module: Path) -> None:
    outcome, stages = run(child_module, "hangs", timeout=3)
    assert stages == ["trace"]
    assert outcome.error.startswith("the trace step timed out after 3 s (--timeout 3 limits")


@pytest.mark.parametrize(("name", "message"), [
    ("sys_exit_at_import", "importing m.py exited (sys.exit(3)) before tracing m.f"),
    ("os_exit_at_import", "importing m.py exited with status 4 without reporting a result before tracing m.f "
                          "(os._exit, or a crash in native code); its last output:\nlast words"),
])
def test_an_exit_names_the_stage_it_happened_in(child_module: Path, name: str, message: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)  # the last words must reach the log anyway
    outcome, stages = run(child_module, name)
    assert stages == ["import"] and outcome.error == message


def test_a_hang_names_the_stage_the_timeout_and_how_to_raise_it(child_module: Path) -> None:
    outcome, _ = run(child_module, "hangs_at_import", timeout=2)
    assert outcome.error == ("importing m.py timed out after 2 s before tracing m.f (--timeout 2 limits each "
                             "tracing or compiling process; if this step needs longer, raise it, e.g. "
                             "--timeout 3600)")


def test_tensorflow_start_up_lines_are_left_out_of_the_log_tail() -> None:
    log = [
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
        "I0000 00:00:1795443121.516042   13883 port.cc:153] oneDNN custom operations are on. You may see",
        "I0000 00:00:1795443121.568471   13883 cpu_feature_guard.cc:227] This TensorFlow binary is optimized",
        "To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild TensorFlow",
        "2026-11-23 14:00:00.123456: I tensorflow/core/util/port.cc:113] oneDNN custom operations are on.",
        "WARNING:absl:Please consider providing the trackable_obj argument in the from_concrete_functions. Providing",
        "hello from m",
        "E0000 00:00:1795443121.6 13883 cuda_executor.cc:1] failed call to cuInit: UNKNOWN ERROR (303)",
    ]
    assert without_start_up_noise(log) == log[-2:]


def test_stop_children_kills_the_running_ones_and_starts_no_more(child_module: Path) -> None:
    """What a Ctrl-C during a parallel build does: the threads waiting on children see them
    killed, and a thread between two steps cannot start another until the next build."""
    stages: list[str] = []
    outcomes: list[object] = []
    waiting = threading.Thread(target=lambda: outcomes.append(run_child(
        "step_hangs", Echo(21), Echo, child_module / "work", on_stage=stages.append, timeout=60,
        env={"PYTHONPATH": str(child_module)}, forked=FORKED)))
    waiting.start()
    deadline = time.monotonic() + 30
    while not stages and time.monotonic() < deadline:  # the child is running its step
        time.sleep(0.05)
    stop_children()
    waiting.join()
    [outcome] = outcomes
    assert "crashed with SIGKILL" in outcome.error  # type: ignore[attr-defined]
    with pytest.raises(KeyboardInterrupt):
        run(child_module, "ok")
    allow_children()
    assert run(child_module, "ok")[0].result == Echo(42)  # type: ignore[attr-defined]
