"""Build targets: what `--target cpu|cuda|JSON` (with `--arch`) means, as a canonical TVM JSON dict.

The dict (not a `tvm.target.Target`) is what the cache key and the manifest record, so it is made
canonical here: the host CPU is spelled out (triple, LLVM CPU name, cores) instead of being left
to whatever TVM would detect on the machine that later loads the artifact.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

DEVICES = {"llvm": "cpu", "cuda": "cuda"}


class TargetError(ValueError):
    """A `--target`/`--arch` combination that cannot be built."""


@functools.cache
def host_cpu_target() -> dict[str, Any]:
    """This machine's CPU as an llvm target.

    The wheel reports a conda triple (`x86_64-conda-linux-gnu`) that the system linker does not
    know; the vendor part is dropped. String targets (`llvm -mcpu=...`) no longer parse in TVM 0.27.
    """
    from tvm.target.codegen import llvm_get_system_cpu, llvm_get_system_triple

    triple = llvm_get_system_triple().replace("-conda-", "-")
    return {"kind": "llvm", "mtriple": triple, "mcpu": llvm_get_system_cpu(), "num-cores": os.cpu_count() or 1}


def resolve_target(spec: str, arch: str | None) -> dict[str, Any]:
    """`cpu` (the host), `cuda` (needs `arch`, e.g. sm_90) or a TVM target JSON object."""
    if spec in ("cpu", "llvm"):
        if arch:
            raise TargetError("--arch applies to --target cuda only")
        return host_cpu_target()
    if spec == "cuda":
        if not arch or not arch.startswith("sm_") or not arch[3:].isdigit():
            raise TargetError("--target cuda needs --arch with a compute capability such as sm_90")
        return {"kind": "cuda", "arch": arch, "host": host_cpu_target()}
    if spec.lstrip().startswith("{"):
        return _json_target(spec)
    raise TargetError(f"unknown target {spec!r}: use cpu, cuda (with --arch) or a TVM target JSON object")


def _json_target(text: str) -> dict[str, Any]:
    """Parse and check a target JSON object; TVM validates the attributes."""
    try:
        target = json.loads(text)
    except json.JSONDecodeError as error:
        raise TargetError(f"--target is not valid JSON: {error}") from None
    if not isinstance(target, dict) or target.get("kind") not in DEVICES:
        raise TargetError(f"a JSON target needs \"kind\": one of {', '.join(DEVICES)}")
    from tvm.target import Target

    try:
        Target(target)
    except Exception as error:  # noqa: BLE001 - TVM raises its own error types for bad attributes
        raise TargetError(f"TVM rejects the target {text}: {error}") from None
    if target["kind"] == "cuda" and "host" not in target:
        target = {**target, "host": host_cpu_target()}
    return target


def device_of(target: dict[str, Any]) -> str:
    """`cpu` or `cuda`: where the artifact runs."""
    return DEVICES[target["kind"]]


def describe(target: dict[str, Any]) -> str:
    """Short form for tables: `llvm:rocketlake`, `cuda:sm_90`."""
    if target["kind"] == "cuda":
        return f"cuda:{target.get('arch', '?')}"
    return f"llvm:{target.get('mcpu', 'generic')}"


def canonical_json(target: dict[str, Any]) -> str:
    """Sorted-key JSON, the form hashed into the cache key."""
    return json.dumps(target, sort_keys=True, separators=(",", ":"))
