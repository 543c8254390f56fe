"""Can this machine run an artifact? CPU architecture and features, GPU, versions.

Every check returns the reasons an artifact cannot run (empty when it can), so that callers can
either refuse with all of them at once (`tfcheck.load`) or skip to another artifact (dispatch).
"""

from __future__ import annotations

import ctypes
import functools
import platform
import re
from pathlib import Path

from tfcheck.runtime import bundled
from tfcheck.runtime.manifest import READABLE_FORMATS, Manifest

# LLVM feature names that /proc/cpuinfo spells differently (after removing "_", "." and "-").
_LLVM_TO_CPUINFO = {"bmi": "bmi1", "lzcnt": "abm", "sahf": "lahflm", "prfchw": "3dnowprefetch",
                    "sse3": "pni"}
_ARCH_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}


def rebuild_hint(manifest: Manifest) -> str:
    """The command that rebuilds this artifact for the current machine."""
    source = manifest.source_file or "<your files>"
    return f"rebuild it on this machine with `tfcheck build {source}`"


def incompatibilities(manifest: Manifest) -> list[str]:
    """Why this machine cannot run the artifact; empty when it can."""
    reasons = _format_and_versions(manifest) + _host_reasons(manifest)
    if manifest.device == "cuda" and not cuda_available():
        reasons.append("it was built for CUDA and this machine has no usable NVIDIA GPU")
    elif manifest.device not in ("cpu", "cuda"):
        reasons.append(f"unknown device {manifest.device!r}")
    return reasons


def _format_and_versions(manifest: Manifest) -> list[str]:
    """Format version must be ours; the TVM runtime must be exactly the one it was built with."""
    reasons = []
    if manifest.format_version not in READABLE_FORMATS:
        reasons.append(f"artifact format {manifest.format_version!r}, this tfcheck reads "
                       f"{' and '.join(map(str, READABLE_FORMATS))}")
    return reasons + bundled.problems(manifest)


def _host_reasons(manifest: Manifest) -> list[str]:
    """The host code (all of a CPU artifact, the driver code of a CUDA one) must fit this CPU."""
    reasons = []
    target = manifest.target
    host = target["host"] if isinstance(target.get("host"), dict) else target
    triple = str(host.get("mtriple", ""))
    arch = triple.split("-", 1)[0]
    machine = _ARCH_ALIASES.get(platform.machine().lower(), platform.machine().lower())
    if arch and arch != machine:
        reasons.append(f"it was compiled for {triple}, this machine is {machine}")
    features = host_cpu_features()
    if features:
        missing = [name for name in manifest.cpu_features or ()
                   if feature_key(name) not in features]
        if missing:
            reasons.append(f"this CPU lacks {', '.join(missing)}, which the code was compiled for")
    return reasons


@functools.cache
def host_cpu_features() -> frozenset[str]:
    """This CPU's feature flags from /proc/cpuinfo, normalized; empty where unreadable."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    match = re.search(r"^(?:flags|Features)\s*:(.*)$", text, re.MULTILINE)
    return frozenset(feature_key(flag) for flag in match.group(1).split()) if match else frozenset()


def feature_key(name: str) -> str:
    """Normalize an LLVM (`avx512vnni`, `sse4.1`) or cpuinfo (`avx512_vnni`) feature name."""
    key = re.sub(r"[._\-]", "", name.strip().lstrip("+").lower())
    return _LLVM_TO_CPUINFO.get(key, key)


@functools.cache
def cuda_available() -> bool:
    """True when the CUDA driver loads and reports at least one device."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return driver.cuInit(0) == 0 and driver.cuDeviceGetCount(ctypes.byref(count)) == 0 \
        and count.value > 0
