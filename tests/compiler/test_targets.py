"""`--target` / `--arch`: canonical target JSON for the cache key and the manifest."""

from __future__ import annotations

import pytest

from tfcheck.compiler.targets import TargetError, canonical_json, describe, device_of, resolve_target


def test_cpu_is_the_host_with_a_system_triple() -> None:
    target = resolve_target("cpu", None)
    assert target["kind"] == "llvm" and "conda" not in target["mtriple"]
    assert target["mcpu"] and target["num-cores"] >= 1
    assert device_of(target) == "cpu" and describe(target) == f"llvm:{target['mcpu']}"


def test_cuda_needs_an_arch_and_gets_the_host_as_host() -> None:
    with pytest.raises(TargetError, match="--arch"):
        resolve_target("cuda", None)
    with pytest.raises(TargetError, match="--arch"):
        resolve_target("cuda", "hopper")
    target = resolve_target("cuda", "sm_90")
    assert target["arch"] == "sm_90" and target["host"] == resolve_target("cpu", None)
    assert (device_of(target), describe(target)) == ("cuda", "cuda:sm_90")


def test_json_targets_are_checked_by_tvm() -> None:
    target = resolve_target('{"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "znver4"}', None)
    assert target["mcpu"] == "znver4"
    assert canonical_json(target) == canonical_json(dict(reversed(list(target.items()))))
    with pytest.raises(TargetError, match="not valid JSON"):
        resolve_target("{kind: llvm}", None)
    with pytest.raises(TargetError, match='"kind"'):
        resolve_target('{"kind": "metal"}', None)
    with pytest.raises(TargetError, match="unknown target"):
        resolve_target("tpu", None)
    with pytest.raises(TargetError, match="--arch applies"):
        resolve_target("cpu", "sm_90")
