"""Running one build step in a child process, with progress events over a private pipe.

TensorFlow, TVM and the user's own module run in children so that a segfault, an `os._exit`, a
hang or a polluted global state in one function's build never reaches the `tfcheck` process or the
next function. The child's stdout and stderr belong to the user's code (prints, TensorFlow logs)
and go to a log file; tfcheck's own messages travel as JSON lines on a separate pipe whose file
descriptor is passed in `TFCHECK_EVENTS_FD`, so nothing the user prints can be mistaken for one.
The tracing and compiling children are forked from a server that imported TensorFlow or TVM once
(`compiler/process/forkserver.py`), wherever that child is the process a fresh start would be.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from tfcheck.compiler.process.environment import CHILD_ENVIRONMENT, EVENTS_FD_VARIABLE
from tfcheck.compiler.process.forkserver import ForkedProcess, server_for
from tfcheck.compiler.process.messages import (ChildError, ContractError, Stage, SymbolicFailure, from_message,
                                               to_message)

Request = TypeVar("Request")
Process = subprocess.Popen | ForkedProcess
Result = TypeVar("Result")
_LOG_TAIL_LINES = 15


class _Children:
    """The children running now (parallel builds run several), for `stop_children`; once it was
    called, no new child starts until `allow_children`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: set[Process] = set()
        self.stopped = False


_CHILDREN = _Children()


class StepError(Exception):
    """A build step failed for a reason the user can act on; `op` names a TensorFlow op if any;
    `symbolic`, when the symbolic route failed to convert (an operator TensorFlow's converter
    takes only at known sizes), is what the parent needs to fall back to the shape entries or to
    say how to write some."""

    def __init__(self, message: str, op: str | None = None, symbolic: SymbolicFailure | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.op = op
        self.symbolic = symbolic


@dataclass
class ChildOutcome(Generic[Result]):
    """What a child reported: its result, or an error message (never both)."""

    result: Result | None
    error: str | None
    op: str | None = None
    symbolic: SymbolicFailure | None = None  # `StepError.symbolic`


# --- child side ----------------------------------------------------------------------------------


class EventWriter:
    """The child's end of the event pipe."""

    def __init__(self) -> None:
        self._stream = os.fdopen(int(os.environ[EVENTS_FD_VARIABLE]), "w", buffering=1)
        self.doing: str | None = None
        self.before: str | None = None

    def emit(self, event: str, message: object) -> None:
        """One event line: its kind (stage, error, result) and its message (a dataclass of
        `compiler/process/messages.py`), which the parent reads back as that dataclass."""
        self.send(event, to_message(message))

    def send(self, event: str, encoded: dict[str, Any]) -> None:
        """An event whose message `to_message` has encoded already."""
        self._stream.write(json.dumps({"event": event, "message": encoded}) + "\n")

    def stage(self, name: str, doing: str | None = None, before: str | None = None, advice: str | None = None,
              symbolic: SymbolicFailure | None = None) -> None:
        """Tell the parent which stage (import, trace, convert, compile, verify) has started.

        `doing` says what the process is doing ("importing m.py") and `before` what is still to
        come ("tracing m.f"): when the process exits, crashes or hangs in this stage, they are
        what the message names, since its log shows only TensorFlow's start-up. `advice` is what
        to try when native code crashes the process in this stage, and `symbolic` what falls back
        then (`Stage`).
        """
        self.doing, self.before = doing or f"the {name} step", before
        self.emit("stage", Stage(name, self.doing, before, advice, symbolic, _log_offset()))


def _log_offset() -> int | None:
    """How much the process has written to its log so far (stdout and stderr share it, and one
    file offset); None when stdout is not a file."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        return os.lseek(sys.stdout.fileno(), 0, os.SEEK_CUR)
    except (OSError, ValueError):
        return None


def child_main(step: Callable[[Request, EventWriter], object], request_type: type[Request]) -> None:
    """Entry point of a child: read the request (a `request_type` as JSON) named in argv, run
    `step`, report the result dataclass it returns (`compiler/process/messages.py`).

    A `StepError` becomes an `error` event with its message; any other exception too, with its
    type, since the parent shows it as the function's failure rather than as a tfcheck crash; so
    does a `sys.exit()` in the user's module, with the stage it happened in.
    """
    events = EventWriter()
    try:
        request = from_message(request_type, json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")))
        result = to_message(step(request, events))  # a step that returns no message fails here, as itself
    except StepError as error:
        events.emit("error", ChildError(error.message, error.op, error.symbolic))
        sys.exit(1)
    except SystemExit as exit_request:
        call = "sys.exit()" if exit_request.code is None else f"sys.exit({exit_request.code!r})"
        events.emit("error", ChildError(stage_failure(events.doing, events.before, f"exited ({call})")))
        sys.exit(1)
    except Exception as error:  # noqa: BLE001 - any failure of user code or TF/TVM is reported
        events.emit("error", ChildError(f"{type(error).__name__}: {error}"))
        sys.exit(1)
    events.send("result", result)


def stage_failure(doing: str | None, before: str | None, what: str) -> str:
    """`importing m.py exited (sys.exit(3)) before tracing m.f`: what failed, in which stage."""
    return f"{doing or 'the build process'} {what}" + (f" before {before}" if before else "")


# --- parent side ---------------------------------------------------------------------------------


def run_child(
    module: str,
    request: object,
    result_type: type[Result],
    work_dir: Path,
    *,
    on_stage: Callable[[str], None],
    timeout: float,
    env: dict[str, str] | None = None,
    pass_fds: tuple[int, ...] = (),
    forked: bool = False,
) -> ChildOutcome[Result]:
    """Run `python -m module request.json` (the request dataclass as JSON) and collect its events
    until it exits; the result comes back as a `result_type`.

    `pass_fds` are handed to the child under the same numbers (the request names them) and closed
    here in any case, so that the parent's other ends of those pipes see an end of file when the
    child exits, or at once when it never starts.

    `forked`: the module has a `preload()`, and the child is forked from a server that ran it once
    for all of this process's children (`compiler/process/forkserver.py`) wherever it would be the
    same process as a fresh one (never with `pass_fds`).

    Crashes (signals), non-zero exits without an error event and timeouts are turned into error
    messages that name the stage and quote the end of what the child printed in it; a crash adds
    what its signal means and the stage's advice, and hands on the stage's symbolic fallback.
    """
    try:
        return _run_child(module, request, result_type, work_dir, on_stage, timeout, env, pass_fds, forked)
    finally:
        for fd in pass_fds:
            os.close(fd)


def warm_up(module: str, timeout: float, env: dict[str, str] | None = None) -> None:
    """Start the fork server of `module` (a `run_child(..., forked=True)` module) in the
    background, so that its imports overlap other work: the compiling server's TVM, the trace."""
    threading.Thread(target=server_for, args=(module, _environment(env), timeout), daemon=True).start()


def _environment(env: dict[str, str] | None) -> dict[str, str]:
    """A child's environment: the parent's own, `CHILD_ENVIRONMENT`, and the step's `env`."""
    return {**os.environ, **CHILD_ENVIRONMENT, **(env or {})}


def _run_child(module: str, request: object, result_type: type[Result], work_dir: Path,
               on_stage: Callable[[str], None], timeout: float, env: dict[str, str] | None,
               pass_fds: tuple[int, ...], forked: bool) -> ChildOutcome[Result]:
    work_dir.mkdir(parents=True, exist_ok=True)
    request_path = work_dir / f"{module.rsplit('.', 1)[-1]}-request.json"
    request_path.write_text(json.dumps(to_message(request)), encoding="utf-8")
    log_path = work_dir / f"{module.rsplit('.', 1)[-1]}.log"
    # Unbuffered, so that what the user's code printed just before an os._exit or a crash is in
    # the log that the failure message quotes.
    environment = _environment(env)
    server = server_for(module, environment, timeout) if forked and not pass_fds else None
    read_fd, write_fd = os.pipe()
    with _CHILDREN.lock, log_path.open("wb") as log:
        if _CHILDREN.stopped:  # the build was interrupted while this thread was between two children
            os.close(read_fd)
            os.close(write_fd)
            raise KeyboardInterrupt
        process: Process | None = None
        if server is not None:
            process = server.fork([str(request_path)], os.getcwd(), environment, log.fileno(), write_fd)
        if process is None:
            process = subprocess.Popen(
                [sys.executable, "-m", module, str(request_path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, pass_fds=(write_fd, *pass_fds),
                env={**environment, EVENTS_FD_VARIABLE: str(write_fd)}, start_new_session=True,
            )
        _CHILDREN.running.add(process)
    os.close(write_fd)
    try:
        events, timed_out = _read_events(read_fd, process, on_stage, timeout)
    except BaseException:
        # Ctrl-C or an error here: the child is in its own session and would outlive us.
        _kill(process)
        raise
    finally:
        with _CHILDREN.lock:
            _CHILDREN.running.discard(process)
    return _outcome(events, process, timed_out, timeout, log_path, result_type)


def stop_children() -> None:
    """Kill every running child's process group, and start no more: a Ctrl-C reaches only the
    main thread, not the threads of a parallel build waiting on their children."""
    with _CHILDREN.lock:
        _CHILDREN.stopped = True
        running = list(_CHILDREN.running)
    for process in running:
        _kill(process)


def allow_children() -> None:
    """Let children start again (a new build in this process, after an interrupted one)."""
    with _CHILDREN.lock:
        _CHILDREN.stopped = False


def _kill(process: Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _read_events(read_fd: int, process: Process, on_stage: Callable[[str], None],
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
                _kill(process)
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
                    on_stage(_stage(event).name)
                events.append(event)
    finally:
        selector.close()
        os.close(read_fd)
    process.wait()
    return events, False


def _outcome(events: list[dict[str, Any]], process: Process, timed_out: bool,
             timeout: float, log_path: Path, result_type: type[Result]) -> ChildOutcome[Result]:
    for event in events:
        if event["event"] not in ("result", "error"):
            continue
        try:
            if event["event"] == "result":
                return ChildOutcome(result=from_message(result_type, event["message"]), error=None)
            failure = from_message(ChildError, event["message"])
        except ContractError as error:
            return ChildOutcome(result=None, error=f"the build process answered badly: {error}")
        return ChildOutcome(result=None, error=failure.message, op=failure.op, symbolic=failure.symbolic)
    stages = [_stage(event) for event in events if event["event"] == "stage"]
    last = stages[-1] if stages else Stage("", None)
    advice = ""
    symbolic = None
    if timed_out:
        why = f"timed out after {timeout:g} s"
        advice = (f" (--timeout {timeout:g} limits each tracing or compiling process; if this step "
                  f"needs longer, raise it, e.g. --timeout {max(3600, 2 * timeout):g})")
    elif process.returncode < 0:
        why = f"crashed with {signal.Signals(-process.returncode).name}"
        advice = _crash_advice(-process.returncode, last)
        symbolic = last.symbolic  # a symbolic conversion that crashed: the driver falls back or says how
    else:
        why = f"exited with status {process.returncode} without reporting a result"
        advice = " (os._exit, or a crash in native code)"
    error = stage_failure(last.doing, last.before, why) + advice
    return ChildOutcome(result=None, error=error + _log_tail(log_path, last.log_offset), symbolic=symbolic)


# What a signal that ends a build process says about its cause.
_SIGNAL_MEANINGS = {
    signal.SIGSEGV: "a segmentation fault: native code (TensorFlow, TVM, an extension) read memory it does not own",
    signal.SIGBUS: "a bus error: native code read memory it does not own",
    signal.SIGABRT: "native code aborted, usually on a failed internal check",
    signal.SIGILL: "an instruction this CPU does not have",
    signal.SIGFPE: "an arithmetic fault in native code",
    signal.SIGKILL: "killed, most often by the system when memory ran out",
}


def _crash_advice(number: int, stage: Stage) -> str:
    """` (what the signal means); what to try`, the latter from the stage the crash happened in."""
    meaning = _SIGNAL_MEANINGS.get(number)
    return (f" ({meaning})" if meaning else "") + (f"; {stage.advice}" if stage.advice else "")


def _stage(event: dict[str, Any]) -> Stage:
    """A stage event's message."""
    return from_message(Stage, event["message"])


# TensorFlow's start-up lines (absl INFO/WARNING records, CPU-feature notes), and the deprecation
# note its converter prints for the call tfcheck makes: in every child's log, they would crowd out
# the lines that explain a failure.
_START_UP_NOISE = re.compile(
    r"[IW]\d{4} [\d:.]+ +\d+ \S+:\d+\] "
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IW] "
    r"|WARNING: All log messages before absl::InitializeLog\(\) is called"
    r"|To enable the following instructions: "
    r"|WARNING:absl:Please consider providing the trackable_obj argument in the from_concrete_functions")


def without_start_up_noise(lines: list[str]) -> list[str]:
    """A child's output without TensorFlow's informational start-up lines (errors are kept)."""
    return [line for line in lines if not _START_UP_NOISE.match(line)]


def _log_tail(log_path: Path, offset: int | None = None) -> str:
    """The last lines of a child's own output, to show next to a crash: from `offset` on (the
    stage it died in) when known, so that warnings its import printed are not taken for the cause."""
    with log_path.open("rb") as log:
        log.seek(offset or 0)
        lines = log.read().decode("utf-8", errors="replace").splitlines()
    tail = without_start_up_noise(lines)[-_LOG_TAIL_LINES:]
    return ("; its last output:\n" + "\n".join(tail)) if tail else ""
