"""Which environment variables a process depends on: those its Python code read, and those native
code reads where no Python hook sees it.

Two parts of the build compare environments this way: the fast key (`compiler/cache/fastkey.py`),
which reuses a trace while every variable the trace depended on is unchanged, and the fork server
(`compiler/process/forkserver.py`), which forks a child only into an environment that agrees with
its own on every variable its imports depended on.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping

# The variable naming the child's end of its event pipe (`compiler/process/child.py`).
EVENTS_FD_VARIABLE = "TFCHECK_EVENTS_FD"
# Set in every child's environment besides the parent's own variables.
CHILD_ENVIRONMENT = {"PYTHONUNBUFFERED": "1"}
# Variables that TensorFlow, XLA, CUDA, oneDNN, OpenMP, Keras, TVM or Python read from native code
# (or at start-up), where no Python hook sees the read: they always count.
NATIVE_PREFIXES = ("TF_", "XLA_", "CUDA_", "NVIDIA_", "ONEDNN_", "DNNL_", "MKL_", "OMP_", "KMP_",
                   "KERAS_", "TVM_", "PYTHON", "LD_", "TFCHECK_")
# Set by `child.run_child` for its own use: never part of what the user's code depends on.
OWN_VARIABLES = frozenset({EVENTS_FD_VARIABLE, *CHILD_ENVIRONMENT})
# A read of every variable (the code iterated them).
ALL = "*"
# What a fork server's preload read before this process was forked from it (`forkserver.main`):
# reads that belong to this process's start as much as a fresh process's own import would.
PRELOAD_READS: set[str] = set()


class RecordingEnviron(type(os.environ)):  # type: ignore[misc]
    """`os.environ` that notes every variable read (`[]`, `get`, `in`, `getenv`), and `*` when the
    code iterates all of them."""

    __slots__ = ()
    reads: set[str] = set()

    def __getitem__(self, key: str) -> str:
        if isinstance(key, str):  # `b"X" in os.environ` asks, and fails, for a bytes key
            RecordingEnviron.reads.add(key)
        return super().__getitem__(key)

    def __iter__(self) -> Iterator[str]:
        RecordingEnviron.reads.add(ALL)
        return super().__iter__()


def record_reads(reads: set[str]) -> None:
    """From now on, add every variable this process reads through `os.environ` to `reads`."""
    RecordingEnviron.reads = reads
    os.environ.__class__ = RecordingEnviron


def stop_recording() -> None:
    """`os.environ` as it was before `record_reads`."""
    os.environ.__class__ = RecordingEnviron.__bases__[0]


def environment_record(environment: Mapping[str, str], reads: set[str]) -> dict[str, str | None]:
    """The variables a process depended on, with their values (None: unset): those read, those of
    `NATIVE_PREFIXES`, and under `*` a hash of all of them when the code iterated them."""
    names = {name for name in reads if name != ALL} | {name for name in environment if name.startswith(NATIVE_PREFIXES)}
    record = {name: environment.get(name) for name in sorted(names - OWN_VARIABLES)}
    if ALL in reads:
        everything = sorted((name, value) for name, value in environment.items() if name not in OWN_VARIABLES)
        record[ALL] = hashlib.sha256(json.dumps(everything).encode()).hexdigest()
    return record


def agrees(environment: Mapping[str, str], record: dict[str, str | None]) -> bool:
    """Whether `environment` has every value `record` holds, and no other native variable."""
    return environment_record(environment, set(record)) == record
