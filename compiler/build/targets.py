"""Build targets: what `--target cpu|cuda|JSON` (with `--arch`), the config's `target` and a
function's `targets=` mean, resolved once per run (`choose_targets`) into `BuildTarget`s.

A target's JSON (not a `tvm.target.Target`) is what the cache key and the manifest record, so it is
made definite here: the host CPU is spelled out (triple, LLVM CPU name, cores) instead of being
left to whatever TVM would detect on the machine that later loads the artifact.

Asking TVM's LLVM for the host's triple and CPU name means `import tvm` (1-2 s), which an
unchanged rebuild otherwise never needs (compiler/cache/fastkey.py answers it without TensorFlow or
TVM). So the answer is kept in the artifact cache (`ArtifactCache.keep_host_record`) under a
fingerprint of what LLVM's answer depends on: the CPU as the kernel describes it (vendor,
family, model, stepping, name, feature flags) and the TVM installation (versions, location, the
library's size and time). Another machine, CPU, or TVM build has another fingerprint and asks TVM
again; a record that is unreadable or malformed is ignored.

LLVM names the host CPU from its family and model, and the name implies an instruction set. A
virtual machine may hide part of it (cloud CPU models without AVX-512; this project's Xeon hides
AMX): code compiled for the name alone would then use instructions the guest cannot run, and the
runtime would refuse the artifact built on the very machine that loads it. So the vector
extensions the name implies but the kernel's /proc/cpuinfo does not list are turned off in
`mattr` (`_hidden_vector_features`), and the schedules see the CPU as it is (8-float vectors
where AVX-512 is hidden).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfcheck.compiler.process.target import DEVICES, BuildTarget
from tfcheck.runtime import target as runtime_target

if TYPE_CHECKING:
    from tfcheck.compiler.cache.artifacts import ArtifactCache

# The fields of /proc/cpuinfo that LLVM's host detection (cpuid: vendor, family, model, features) sees.
_CPU_FIELDS = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags", "CPU implementer",
               "CPU architecture", "CPU variant", "CPU part", "Features")
# What a recorded triple or CPU name may look like (`x86_64-linux-gnu`, `znver5`, `skylake-avx512`).
_LLVM_NAME = re.compile(r"[A-Za-z0-9_.+-]{1,64}")
# A recorded feature turned off (`-avx512f`).
_OFF_FEATURE = re.compile(r"-[a-z0-9.-]{1,32}")
# x86 vector extensions LLVM's code generation may use on its own, by their LLVM names: where the
# CPU name implies one that the machine does not list, it is turned off.
VECTOR_FEATURES = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl",
                   "avx512ifma", "avx512vbmi", "avx512vbmi2", "avx512vnni", "avx512bitalg",
                   "avx512vpopcntdq", "avx512bf16", "avx512fp16")


class TargetError(ValueError):
    """A `--target`/`--arch` combination that cannot be built."""


def host_cpu_target(cache: ArtifactCache | None = None) -> dict[str, Any]:
    """This machine's CPU as an llvm target; with a `cache`, LLVM's answer is read from, or kept in,
    the cache's record for this machine and TVM (see the module's docstring).

    The wheel reports a conda triple (`x86_64-conda-linux-gnu`) that the system linker does not
    know; the vendor part is dropped. String targets (`llvm -mcpu=...`) no longer parse in TVM 0.27.
    """
    fingerprint = host_fingerprint() if cache is not None else None
    llvm = _read_host_record(cache.host_record(fingerprint)) if cache is not None and fingerprint else None
    if llvm is None:
        llvm = _llvm_host()
        if cache is not None and fingerprint:
            cache.keep_host_record(fingerprint, json.dumps(llvm))
    return {"kind": "llvm", **llvm, "num-cores": os.cpu_count() or 1}


@functools.cache
def _llvm_host() -> dict[str, Any]:
    """The host's triple and CPU name as TVM's LLVM detects them, with `mattr` turning off the
    vector extensions the name implies and this machine hides (imports TVM)."""
    from tvm.target import Target
    from tvm.target.codegen import llvm_get_cpu_features, llvm_get_system_cpu, llvm_get_system_triple

    llvm: dict[str, Any] = {"mtriple": llvm_get_system_triple().replace("-conda-", "-"), "mcpu": llvm_get_system_cpu()}
    implied = {str(name) for name in llvm_get_cpu_features(Target({"kind": "llvm", **llvm}))}
    hidden = _hidden_vector_features(llvm["mtriple"], implied, runtime_target.host_cpu_features())
    return {**llvm, "mattr": [f"-{name}" for name in hidden]} if hidden else llvm


def _hidden_vector_features(triple: str, implied: set[str], listed: frozenset[str]) -> list[str]:
    """The x86 vector extensions (LLVM names) that the CPU name implies and /proc/cpuinfo's
    `listed` flags (normalized by `feature_key`) lack; none where the flags cannot be read."""
    if not triple.startswith(("x86_64", "i686", "i386")) or not listed:
        return []
    return [name for name in VECTOR_FEATURES if name in implied and runtime_target.feature_key(name) not in listed]


def host_fingerprint() -> str | None:
    """A hash of what LLVM's host detection depends on: this CPU (Linux's /proc/cpuinfo) and the TVM
    installation; None where either cannot be read (then TVM is always asked)."""
    cpu = _cpu_description()
    spec = importlib.util.find_spec("tvm")
    if cpu is None or spec is None or spec.origin is None:
        return None
    package = Path(spec.origin).parent
    # Where TVM's libinfo looks for its libraries: the wheel's lib/, a source tree's build/ and lib/.
    folders = (package, package / "lib", package.parent.parent / "build", package.parent.parent / "lib")
    libraries = [(str(path), path.stat().st_size, path.stat().st_mtime_ns)
                 for folder in folders for path in sorted(folder.glob("libtvm*"))]
    parts = {
        "cpu": cpu,
        "machine": platform.machine(),
        "tvm": [_version(name) for name in ("apache-tvm", "apache-tvm-ffi")],
        "tvm_location": spec.origin,
        "tvm_library_path": os.environ.get("TVM_LIBRARY_PATH"),
        "libraries": libraries,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:  # a source build of TVM
        return None


def _cpu_description() -> dict[str, str] | None:
    """The first processor's `_CPU_FIELDS` in /proc/cpuinfo; None without one (not Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            text = info.read().split("\n\n", 1)[0]
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    described = {name.strip(): value.strip() for name, value in fields.items() if name.strip() in _CPU_FIELDS}
    return described or None


def _read_host_record(text: str | None) -> dict[str, Any] | None:
    """The recorded triple, CPU name and features turned off; None when there is no record or it is
    malformed."""
    try:
        record = json.loads(text) if text is not None else None
    except ValueError:
        return None
    if not isinstance(record, dict) or set(record) - {"mattr"} != {"mtriple", "mcpu"}:
        return None
    if not all(isinstance(record[key], str) and _LLVM_NAME.fullmatch(record[key]) for key in ("mtriple", "mcpu")):
        return None
    mattr = record.get("mattr", [])
    if not isinstance(mattr, list) or not all(isinstance(item, str) and _OFF_FEATURE.fullmatch(item) for item in mattr):
        return None
    return record if mattr else {"mtriple": record["mtriple"], "mcpu": record["mcpu"]}  # as `_llvm_host` has it


@dataclass(frozen=True)
class TargetChoice:
    """What one run builds for, resolved once (`choose_targets`): the target `--target` or the
    config named, for every function; else each function's own `targets=`; else this machine's CPU."""

    default: BuildTarget  # the named target, else this machine's CPU
    named: bool = False  # --target or the config's `target` named `default`: it replaces every `targets=`
    arch: str | None = None  # --arch, for the functions whose `targets=` lists "cuda"
    cache: ArtifactCache | None = None  # keeps the host CPU's record (none in a dry run)

    def for_function(self, requested: list[str] | None) -> list[BuildTarget]:
        """A function's targets: its `targets=` entries unless a target was named, else `default`.
        TargetError for an entry that cannot be built (a "cuda" without --arch, say)."""
        if self.named or not requested:
            return [self.default]
        return [resolve_target(spec, self.arch if spec == "cuda" else None, self.cache) for spec in requested]


def choose_targets(flag: str | None, configured: str | None, arch: str | None,
                   cache: ArtifactCache | None) -> TargetChoice:
    """The run's targets from `--target` (else the config's `target`) and `--arch`; without either
    target, this machine's CPU, with `--arch` kept for the functions that list "cuda" themselves.
    TargetError for a named target that cannot be built."""
    named = flag or configured
    return TargetChoice(resolve_target(named or "cpu", arch if named else None, cache), bool(named), arch, cache)


def resolve_target(spec: str, arch: str | None, cache: ArtifactCache | None = None) -> BuildTarget:
    """`cpu` (the host), `cuda` (needs `arch`, e.g. sm_90) or a TVM target JSON object; `cache` as
    for `host_cpu_target`."""
    if spec in ("cpu", "llvm"):
        if arch:
            raise TargetError("--arch applies to --target cuda only")
        return BuildTarget.of(host_cpu_target(cache))
    if spec == "cuda":
        if not arch or not arch.startswith("sm_") or not arch[3:].isdigit():
            raise TargetError("--target cuda needs --arch with a compute capability such as sm_90")
        return BuildTarget.of({"kind": "cuda", "arch": arch, "host": host_cpu_target(cache)})
    if spec.lstrip().startswith("{"):
        return BuildTarget.of(_json_target(spec))
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
