"""`--target` / `--arch` and `targets=`: canonical target JSON for the cache key and the manifest."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfcheck.compiler.discover import AnnotatedFunction
from tfcheck.compiler.driver import BuildOptions, targets_of
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


def _function(targets: list[str] | None) -> AnnotatedFunction:
    return AnnotatedFunction(path=Path("m.py"), module="m", root=Path("."), qualname="f", line=1, end_line=2,
                             targets=targets)


def test_a_functions_targets_apply_unless_the_command_line_names_one() -> None:
    host = resolve_target("cpu", None)
    znver4 = '{"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "znver4"}'
    options = BuildOptions(target=host, cache_dir=Path("cache"), arch="sm_90")
    assert targets_of(_function(None), options) == [host]
    assert [describe(t) for t in targets_of(_function(["cpu", znver4, "cuda"]), options)] == [
        describe(host), "llvm:znver4", "cuda:sm_90"]
    chosen = BuildOptions(target=resolve_target(znver4, None), cache_dir=Path("cache"), target_chosen=True)
    assert [describe(t) for t in targets_of(_function(["cpu", "cuda"]), chosen)] == ["llvm:znver4"]


def test_a_cuda_entry_without_arch_is_an_error_for_that_function() -> None:
    options = BuildOptions(target=resolve_target("cpu", None), cache_dir=Path("cache"))
    with pytest.raises(TargetError, match="--arch"):
        targets_of(_function(["cpu", "cuda"]), options)
