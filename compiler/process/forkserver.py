"""A process that imports a child module's heavy dependencies once and forks each child from there.

Every function a build traces, and every variant it compiles, runs in a child process of its own
(`compiler/process/child.py`), and every such child imported TensorFlow (5-8 s of CPU) or TVM (3 s)
before doing anything: most of a small function's build time (docs/build.md, "Where a small
function's build time goes"). A fork server imports them once, in `preload()`, a function the child
module defines for it; a child forked from it starts with them imported and is otherwise the process
`python -m module request.json` would have been: its own session, the requested environment and
working directory (as the current directory and `sys.path[0]`), its output in the step's log,
`sys.argv`, and the module run as `__main__` by `runpy`, ending as that process would (exit
status, `atexit`, an uncaught exception's traceback).

What the preload did must also be what the child's own imports would have done:
- its environment: the server answers `ready` with every variable its imports read from Python,
  and the native ones (`environment.environment_record`); a child whose environment disagrees on
  any gets a server of its own (`server_for`), and the child's fast key counts those reads as its
  own (`environment.PRELOAD_READS`);
- its working directory: the server starts in an empty folder, and refuses a child whose folder
  holds a module named as one it imported from elsewhere (a fresh process would import that one;
  `_refusal`): `run_child` starts a fresh process then.
Linux only (`os.pidfd_open` tells the server when a child exits); `TFCHECK_FORK_SERVER=0` turns it off.

Protocol: the parent sends each request over the server's control socket with three descriptors
(a status socket, the step's log, the event pipe's write end); the server answers on the status
socket with the child's pid once the child leads its own session, or a refusal, and later with its
exit code (negative: the signal that ended it).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import runpy
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import warnings
from dataclasses import dataclass
from typing import Any

from tfcheck.compiler.process.environment import (EVENTS_FD_VARIABLE, PRELOAD_READS, agrees, environment_record,
                                                  record_reads, stop_recording)

_MAX_MESSAGE = 1 << 20  # a request holds the child's environment
# Off with `TFCHECK_FORK_SERVER=0`: every child a fresh process.
SWITCH_VARIABLE = "TFCHECK_FORK_SERVER"


@dataclass(frozen=True)
class Fork:
    """What the server's child runs once the server's own state is behind it."""

    module: str
    argv: list[str]
    cwd: str
    environment: dict[str, str]  # agrees with the server's on every variable its preload depended on
    log_fd: int
    events_fd: int


class _BecomeChild(Exception):  # noqa: N818 - a control transfer, not an error
    """Raised in a freshly forked child to unwind the server's loop (closing its sockets) before
    the module runs at the top of the stack, where a fresh process would run it."""

    def __init__(self, fork: Fork) -> None:
        super().__init__(fork.module)
        self.fork = fork


def main() -> None:
    """`python -m tfcheck.compiler.process.forkserver MODULE CONTROL_FD`: preload MODULE, say
    `ready` with the variables its imports depended on (or why not) on the control socket, serve
    until the parent hangs up."""
    module, control_fd = sys.argv[1], int(sys.argv[2])
    control = socket.socket(fileno=control_fd)
    environment = dict(os.environ)  # before preload() sets anything
    try:
        record_reads(PRELOAD_READS)
        _preload(module)
    except BaseException as error:  # noqa: BLE001 - the parent falls back to fresh processes
        control.send(json.dumps({"refused": f"preloading {module}: {type(error).__name__}: {error}"}).encode())
        return
    finally:
        stop_recording()
    control.send(json.dumps({"ready": environment_record(environment, PRELOAD_READS)}).encode())
    try:
        _serve(control, module)
    except _BecomeChild as become:
        control.close()
        _run_as_main(become.fork)


def _preload(module: str) -> None:
    """Import the module and run its `preload()`, which imports what every child imports first."""
    importlib.import_module(module).preload()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()


def _serve(control: socket.socket, module: str) -> None:
    """Fork a child per request, report each child's exit; once the parent hangs up, report the
    exits of the children still running, then return."""
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    waiting: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, status socket)
    listening = True
    try:
        while listening or waiting:
            for key, _events in selector.select():
                if key.fileobj is not control:
                    _report_exit(key.fd, selector, waiting)
                elif not _take_request(control, module, selector, waiting):
                    selector.unregister(control)
                    listening = False
    finally:  # in the server once the parent is gone, and in a new child: neither needs them
        selector.close()
        for pidfd, (_pid, status) in waiting.items():
            os.close(pidfd)
            status.close()


def _take_request(control: socket.socket, module: str, selector: selectors.BaseSelector,
                  waiting: dict[int, tuple[int, socket.socket]]) -> bool:
    """Read one request and fork its child; False when the parent has hung up."""
    data, fds, _flags, _address = socket.recv_fds(control, _MAX_MESSAGE, 3)
    if not data:
        return False
    status_fd, log_fd, events_fd = fds
    status = socket.socket(fileno=status_fd)
    request = json.loads(data)
    fork = Fork(module, request["argv"], request["cwd"], request["environment"], log_fd, events_fd)
    try:
        pid = _fork(fork, status)  # in the child, raises _BecomeChild, which keeps both descriptors
    except (_Refused, OSError) as refusal:  # OSError: no process to be had (memory, a limit)
        status.send(json.dumps({"refused": str(refusal)}).encode())
        status.close()
        pid = None
    os.close(log_fd)
    os.close(events_fd)
    if pid is None:
        return True
    pidfd = os.pidfd_open(pid)
    waiting[pidfd] = (pid, status)
    selector.register(pidfd, selectors.EVENT_READ)
    status.send(json.dumps({"pid": pid}).encode())
    return True


class _Refused(Exception):
    """The child would not be the process a fresh start gives (`_refusal`)."""


def _refusal(cwd: str) -> str | None:
    """Why a child in `cwd` would not be the process `python -m` starts there: the folder holds a
    module named as one the server imported from elsewhere, which a fresh process would import
    from the folder instead (the server itself ran in an empty one)."""
    try:
        names = {_module_name(entry) for entry in os.scandir(cwd)}
    except OSError as error:
        return f"cannot list {cwd}: {error}"
    imported = _path_imported()
    shadowed = sorted(name for name in names & imported.keys() if not _imported_from(imported[name], name, cwd))
    return f"{cwd} holds {shadowed[0]}, a module the server imported from elsewhere" if shadowed else None


def _imported_from(origin: str, name: str, folder: str) -> bool:
    """Whether the module `name`, whose file is `origin`, is the folder's own `name`."""
    relative = os.path.relpath(os.path.realpath(origin), os.path.realpath(folder))
    return not relative.startswith(os.pardir) and relative.split(os.sep)[0].partition(".")[0] == name


def _module_name(entry: os.DirEntry[str]) -> str | None:
    """The top-level module a folder entry is, for the path finder: a package with its
    `__init__.py`, a source, bytecode or extension file (a bare folder is only a namespace
    portion, which any module found later on the path outranks)."""
    if entry.is_dir():
        return entry.name if os.path.exists(os.path.join(entry.path, "__init__.py")) else None
    stem, dot, suffix = entry.name.partition(".")
    return stem if dot and suffix.rsplit(".", 1)[-1] in ("py", "pyc", "so", "pyd") else None


def _path_imported() -> dict[str, str]:
    """Top-level modules imported here from the path, and their files (built-in and frozen ones
    come before the path; a namespace package has no file of its own to shadow)."""
    imported = {}
    for name, module in list(sys.modules.items()):
        origin = getattr(getattr(module, "__spec__", None), "origin", None)
        if "." not in name and name != "__main__" and origin not in (None, "built-in", "frozen"):
            imported[name] = origin
    return imported


def _fork(fork: Fork, status: socket.socket) -> int:
    """Fork; the child unwinds the server (`_BecomeChild`) once it leads its own session, which
    the parent waits for, so that killing its process group by the pid never misses it.

    The server's only other thread is OpenBLAS's pool (NumPy starts it at import), whose own
    `pthread_atfork` handlers make forking safe: Python's warning about forking a process with
    threads (3.12 on) is silenced for that one call."""
    refusal = _refusal(fork.cwd)
    if refusal:
        raise _Refused(refusal)
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        os.close(read_end)
        os.setsid()
        os.close(write_end)
        status.close()
        raise _BecomeChild(fork)
    os.close(write_end)
    os.read(read_end, 1)  # end of file once the child's setsid() is done
    os.close(read_end)
    return pid


def _report_exit(pidfd: int, selector: selectors.BaseSelector, waiting: dict[int, tuple[int, socket.socket]]) -> None:
    """A child has exited: send its exit code on its status socket."""
    selector.unregister(pidfd)
    pid, status = waiting.pop(pidfd)
    os.close(pidfd)
    _pid, wait_status = os.waitpid(pid, 0)
    with contextlib.suppress(OSError), status:  # a parent that has gone no longer asks
        status.send(json.dumps({"exit": os.waitstatus_to_exitcode(wait_status)}).encode())


def _run_as_main(fork: Fork) -> None:
    """Become `python -m MODULE ARGV...` started in `fork.cwd` with `fork.environment`."""
    os.chdir(fork.cwd)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(fork.log_fd, 1)
    os.dup2(fork.log_fd, 2)
    for fd in (devnull, fork.log_fd):
        os.close(fd)
    os.set_inheritable(fork.events_fd, True)
    os.environ.clear()
    os.environ.update({**fork.environment, EVENTS_FD_VARIABLE: str(fork.events_fd)})
    if not getattr(sys.flags, "safe_path", False):  # as `python -m` puts it first (unless -P)
        sys.path[0] = os.getcwd()
    sys.argv = [fork.module, *fork.argv]
    runpy.run_module(fork.module, run_name="__main__", alter_sys=True)


# --- parent side ---------------------------------------------------------------------------------


class ForkedProcess:
    """A child the server forked, as `run_child` uses a `subprocess.Popen`: its pid (which is
    its process group's), `wait()` and `returncode`."""

    def __init__(self, pid: int, status: socket.socket) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._status = status
        self._lock = threading.Lock()  # `stop_children` and the thread reading events both wait

    def wait(self) -> int:
        """Block until the server reports the child's exit code."""
        with self._lock:
            if self.returncode is None:
                with self._status:
                    data = self._status.recv(_MAX_MESSAGE)
                # No answer: the server itself was killed; the child's result, if it sent one, stands.
                self.returncode = json.loads(data)["exit"] if data else 1
        return self.returncode


class ForkServer:
    """One server process, preloaded with a child module's imports, for children whose
    environment agrees with the one it started in on every variable those imports depended on
    (`environment.agrees`: those its Python code read, and the native ones)."""

    def __init__(self, module: str, environment: dict[str, str], timeout: float) -> None:
        self._control, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # Started in an empty folder, so that nothing it imports comes from a working directory
        # (`sys.path[0]`): each child's own is checked against what it imported (`_refusal`).
        with tempfile.TemporaryDirectory(prefix="tfcheck-forkserver-") as empty:
            with server_end:
                self._process = subprocess.Popen(
                    [sys.executable, "-m", __name__, module, str(server_end.fileno())],
                    pass_fds=(server_end.fileno(),), env=environment, cwd=empty, stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            answer = self._answer(timeout)
        if "ready" not in answer:
            self.close()
            self._process.kill()  # one whose imports hung
            self._process.wait()
            raise OSError(answer.get("refused", f"the fork server for {module} did not start"))
        self.depends_on: dict[str, str | None] = answer["ready"]

    def _answer(self, timeout: float) -> dict[str, Any]:
        """The server's first message, once its imports are done; {} when it died or hung."""
        self._control.settimeout(timeout)
        try:
            return json.loads(self._control.recv(_MAX_MESSAGE) or b"{}")
        except (OSError, ValueError):
            return {}
        finally:
            self._control.settimeout(None)

    def fork(self, argv: list[str], cwd: str, environment: dict[str, str], log_fd: int,
             events_fd: int) -> ForkedProcess | None:
        """The child `python -m module ARGV` in `cwd` with `environment` would be, or None where
        the server refuses (the caller starts a fresh process then)."""
        request = {"argv": argv, "cwd": cwd, "environment": environment}
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with child_end:
                socket.send_fds(self._control, [json.dumps(request).encode()], [child_end.fileno(), log_fd, events_fd])
            answer = json.loads(parent_end.recv(_MAX_MESSAGE) or b"{}")
        except (OSError, ValueError):
            answer = {}
        if "pid" not in answer:
            parent_end.close()
            return None
        return ForkedProcess(answer["pid"], parent_end)

    def alive(self) -> bool:
        """Whether the server still runs (the system may have killed it for memory)."""
        return self._process.poll() is None

    def close(self) -> None:
        """Hang up: the server forks no more, and exits once it has reported the exit of every
        child it forked."""
        self._control.close()


class _Servers:
    """This process's servers, one per child module at most. A module whose server could not start
    keeps the environment it failed in instead: its children are fresh processes until a build
    asks in another environment (another `PYTHONPATH` may find a module that starts)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_module: dict[str, ForkServer] = {}
        self.failed_in: dict[str, dict[str, str]] = {}
        self.starting: dict[str, threading.Lock] = {}
        self.retired: list[ForkServer] = []  # replaced, still reporting their children's exits


_SERVERS = _Servers()


def server_for(module: str, environment: dict[str, str], timeout: float) -> ForkServer | None:
    """The server for `module`'s children in `environment`, started on first use (and again for
    an environment that disagrees with its own, or when the system killed it); None where there
    is none to use: turned off, not Linux, or it failed to start in this environment."""
    if environment.get(SWITCH_VARIABLE) == "0" or not hasattr(os, "pidfd_open"):
        return None
    with _SERVERS.lock:
        starting = _SERVERS.starting.setdefault(module, threading.Lock())
    with starting:  # a second thread waits for the server the first one is starting
        if _SERVERS.failed_in.get(module) == environment:
            return None
        server = _SERVERS.by_module.get(module)
        if server is not None and server.alive() and agrees(environment, server.depends_on):
            return server
        if server is not None:
            server.close()  # the children it forked still get their exit reported
            with _SERVERS.lock:
                _SERVERS.retired = [*(old for old in _SERVERS.retired if old.alive()), server]
                del _SERVERS.by_module[module]
        try:
            server = _SERVERS.by_module[module] = ForkServer(module, environment, timeout)
        except OSError:
            _SERVERS.failed_in[module] = environment
            return None
        _SERVERS.failed_in.pop(module, None)
    return server


@atexit.register
def close_servers() -> None:
    """Let every server exit with this process."""
    with _SERVERS.lock:
        servers = list(_SERVERS.by_module.values())
        _SERVERS.by_module.clear()
    for server in servers:
        server.close()


if __name__ == "__main__":
    main()
