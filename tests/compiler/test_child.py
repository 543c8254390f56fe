"""Child processes: events over the private pipe, and crashes, exits and hangs as messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfcheck.compiler.child import run_child

STEPS = {
    "ok": "print('user output on stdout')\n    events.stage('compile')\n    return {'value': request['x'] * 2}",
    "refuses": "raise StepError('no can do', op='Bincount')",
    "raises": "raise KeyError('missing')",
    "segfaults": "import ctypes\n    ctypes.string_at(0)",
    "exits": "import os\n    os._exit(3)",
    "hangs": "import time\n    events.stage('trace')\n    time.sleep(60)",
}


@pytest.fixture
def child_module(tmp_path: Path) -> Path:
    """A module per behaviour, each a real child entry point built on `child_main`."""
    for name, body in STEPS.items():
        (tmp_path / f"step_{name}.py").write_text(
            "from tfcheck.compiler.child import StepError, child_main\n\n"
            f"def step(request, events):\n    {body}\n\n"
            "if __name__ == '__main__':\n    child_main(step)\n")
    return tmp_path


def run(module_dir: Path, name: str, timeout: float = 60) -> tuple[object, list[str]]:
    stages: list[str] = []
    outcome = run_child(f"step_{name}", {"x": 21}, module_dir / "work", on_stage=stages.append,
                        timeout=timeout, env={"PYTHONPATH": str(module_dir)})
    return outcome, stages


def test_result_and_stages_travel_apart_from_user_output(child_module: Path) -> None:
    outcome, stages = run(child_module, "ok")
    assert outcome.result == {"event": "result", "value": 42} and outcome.error is None
    assert stages == ["compile"]


@pytest.mark.parametrize(("name", "message"), [
    ("refuses", "no can do"),
    ("raises", "KeyError: 'missing'"),
    ("segfaults", "the build process crashed with SIGSEGV"),
    ("exits", "the build process exited with status 3 without reporting a result"),
])
def test_failures_become_messages(child_module: Path, name: str, message: str) -> None:
    outcome, _ = run(child_module, name)
    assert outcome.result is None and outcome.error.startswith(message)
    assert outcome.op == ("Bincount" if name == "refuses" else None)


def test_a_hanging_child_is_killed_at_the_deadline(child_module: Path) -> None:
    outcome, stages = run(child_module, "hangs", timeout=3)
    assert stages == ["trace"]
    assert outcome.error == "the build process timed out after 3 s"
