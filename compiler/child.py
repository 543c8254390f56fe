"""Running one build step in a child process, with progress events over a private pipe.

TensorFlow, TVM and the user's own module run in children so that a segfault, an `os._exit`, a
hang or a polluted global state in one function's build never reaches the `tfcheck` process or the
next function. The child's stdout and stderr belong to the user's code (prints, TensorFlow logs)
and go to a log file; tfcheck's own messages travel as JSON lines on a separate pipe whose file
descriptor is passed in `TFCHECK_EVENTS_FD`, so nothing the user prints can be mistaken for one.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EVENTS_FD_VARIABLE = "TFCHECK_EVENTS_FD"
_LOG_TAIL_LINES = 15


class StepError(Exception):
    """A build step failed for a reason the user can act on; `op` names a TensorFlow op if any."""

    def __init__(self, message: str, op: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.op = op


@dataclass
class ChildOutcome:
    """What a child reported: its final `result` payload, or an error message (never both)."""

    result: dict[str, Any] | None
    error: str | None
    op: str | None = None


# --- child side ----------------------------------------------------------------------------------


class EventWriter:
    """The child's end of the event pipe."""

    def __init__(self) -> None:
        self._stream = os.fdopen(int(os.environ[EVENTS_FD_VARIABLE]), "w", buffering=1)

    def emit(self, event: str, **data: Any) -> None:
        self._stream.write(json.dumps({"event": event, **data}) + "\n")

    def stage(self, name: str) -> None:
        """Tell the parent which stage (trace, convert, compile, verify) has started."""
        self.emit("stage", stage=name)


def child_main(step: Callable[[dict[str, Any], EventWriter], dict[str, Any]]) -> None:
    """Entry point of a child: read the request JSON named in argv, run `step`, report the result.

    A `StepError` becomes an `error` event with its message; any other exception too, with its
    type, since the parent shows it as the function's failure rather than as a tfcheck crash.
    """
    events = EventWriter()
    request = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    try:
        result = step(request, events)
    except StepError as error:
        events.emit("error", message=error.message, op=error.op)
        sys.exit(1)
    except Exception as error:  # noqa: BLE001 - any failure of user code or TF/TVM is reported
        events.emit("error", message=f"{type(error).__name__}: {error}", op=None)
        sys.exit(1)
    events.emit("result", **result)


# --- parent side ---------------------------------------------------------------------------------


def run_child(
    module: str,
    request: dict[str, Any],
    work_dir: Path,
    *,
    on_stage: Callable[[str], None],
    timeout: float,
    env: dict[str, str] | None = None,
) -> ChildOutcome:
    """Run `python -m module request.json` and collect its events until it exits.

    Crashes (signals), non-zero exits without an error event and timeouts are turned into error
    messages that quote the end of the child's log.
    """
    work_dir.mkdir(parents=True, exist_ok=True)
    request_path = work_dir / f"{module.rsplit('.', 1)[-1]}-request.json"
    request_path.write_text(json.dumps(request), encoding="utf-8")
    log_path = work_dir / f"{module.rsplit('.', 1)[-1]}.log"
    read_fd, write_fd = os.pipe()
    child_env = {**os.environ, **(env or {}), EVENTS_FD_VARIABLE: str(write_fd)}
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", module, str(request_path)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            pass_fds=(write_fd,), env=child_env, start_new_session=True,
        )
    os.close(write_fd)
    try:
        events, timed_out = _read_events(read_fd, process, on_stage, timeout)
    except BaseException:
        # Ctrl-C or an error here: the child is in its own session and would outlive us.
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise
    return _outcome(events, process, timed_out, timeout, log_path)


def _read_events(read_fd: int, process: subprocess.Popen, on_stage: Callable[[str], None],
                 timeout: float) -> tuple[list[dict[str, Any]], bool]:
    """Read JSON-line events until the pipe closes; kill the child's group at the deadline."""
    deadline = time.monotonic() + timeout
    events: list[dict[str, Any]] = []
    buffer = b""
    selector = selectors.DefaultSelector()
    selector.register(read_fd, selectors.EVENT_READ)
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                return events, True
            if not selector.select(timeout=min(remaining, 1.0)):
                continue
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                event = json.loads(line)
                if event["event"] == "stage":
                    on_stage(event["stage"])
                events.append(event)
    finally:
        selector.close()
        os.close(read_fd)
    process.wait()
    return events, False


def _outcome(events: list[dict[str, Any]], process: subprocess.Popen, timed_out: bool,
             timeout: float, log_path: Path) -> ChildOutcome:
    for event in events:
        if event["event"] == "result":
            return ChildOutcome(result=event, error=None)
        if event["event"] == "error":
            return ChildOutcome(result=None, error=event["message"], op=event.get("op"))
    if timed_out:
        why = f"timed out after {timeout:.0f} s"
    elif process.returncode < 0:
        why = f"crashed with {signal.Signals(-process.returncode).name}"
    else:
        why = f"exited with status {process.returncode} without reporting a result"
    return ChildOutcome(result=None, error=f"the build process {why}{_log_tail(log_path)}")


def _log_tail(log_path: Path) -> str:
    """The last lines of a child's output, to show next to a crash."""
    lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-_LOG_TAIL_LINES:]
    return ("; its last output:\n" + "\n".join(lines)) if lines else ""
