"""`--target` / `--arch` and `targets=`: canonical target JSON for the cache key and the manifest."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tfcheck.compiler.build import targets
from tfcheck.compiler.build.targets import TargetChoice, TargetError, choose_targets, resolve_target
from tfcheck.compiler.process.target import BuildTarget
from tfcheck.compiler.cache.artifacts import FAST_KEYS, ArtifactCache


def test_cpu_is_the_host_with_a_system_triple() -> None:
    target = resolve_target("cpu", None).json
    assert target["kind"] == "llvm" and "conda" not in target["mtriple"]
    assert target["mcpu"] and target["num-cores"] >= 1
    assert resolve_target("cpu", None).device == "cpu" and resolve_target("cpu", None).label == f"llvm:{target['mcpu']}"


def test_cuda_needs_an_arch_and_gets_the_host_as_host() -> None:
    with pytest.raises(TargetError, match="--arch"):
        resolve_target("cuda", None)
    with pytest.raises(TargetError, match="--arch"):
        resolve_target("cuda", "hopper")
    target = resolve_target("cuda", "sm_90")
    assert target.json["arch"] == "sm_90" and target.json["host"] == resolve_target("cpu", None).json
    assert (target.device, target.label) == ("cuda", "cuda:sm_90")


def test_json_targets_are_checked_by_tvm() -> None:
    target = resolve_target('{"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "znver4"}', None)
    assert target.json["mcpu"] == "znver4"
    assert target.canonical == BuildTarget.of(dict(reversed(list(target.json.items())))).canonical
    with pytest.raises(TargetError, match="not valid JSON"):
        resolve_target("{kind: llvm}", None)
    with pytest.raises(TargetError, match='"kind"'):
        resolve_target('{"kind": "metal"}', None)
    with pytest.raises(TargetError, match="unknown target"):
        resolve_target("tpu", None)
    with pytest.raises(TargetError, match="--arch applies"):
        resolve_target("cpu", "sm_90")


def test_a_build_target_is_frozen_and_keeps_its_key_order_for_the_manifest() -> None:
    target = BuildTarget.of({"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "znver4"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        target.text = "{}"  # type: ignore[misc]
    target.json["mcpu"] = "changed"
    assert list(target.json) == ["kind", "mtriple", "mcpu"] and target.json["mcpu"] == "znver4"
    assert target.canonical == '{"kind":"llvm","mcpu":"znver4","mtriple":"x86_64-linux-gnu"}'


def test_a_functions_targets_apply_unless_the_command_line_names_one(tmp_path: Path) -> None:
    host = resolve_target("cpu", None)
    znver4 = '{"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "znver4"}'
    unnamed = choose_targets(None, None, "sm_90", ArtifactCache(tmp_path))
    assert (unnamed.default, unnamed.named, unnamed.for_function(None)) == (host, False, [host])
    assert [t.label for t in unnamed.for_function(["cpu", znver4, "cuda"])] == [host.label, "llvm:znver4", "cuda:sm_90"]
    for named in (choose_targets(znver4, None, None, None), choose_targets(None, znver4, None, None)):
        assert named.named and [t.label for t in named.for_function(["cpu", "cuda"])] == ["llvm:znver4"]
    assert choose_targets("cpu", znver4, None, None).default == host  # the flag over the config


def test_a_cuda_entry_without_arch_is_an_error_for_that_function(tmp_path: Path) -> None:
    choice = TargetChoice(resolve_target("cpu", None), cache=ArtifactCache(tmp_path))
    with pytest.raises(TargetError, match="--arch"):
        choice.for_function(["cpu", "cuda"])


# --- the host CPU kept in the artifact cache, so that an unchanged rebuild never imports TVM ----

RESOLVE_IN_A_FRESH_PROCESS = """
import json, sys
from pathlib import Path
from tfcheck.compiler.build.targets import resolve_target
from tfcheck.compiler.cache.artifacts import ArtifactCache
target = resolve_target("cpu", None, ArtifactCache(Path(sys.argv[1])))
print(json.dumps({"target": target.json, "tvm_imported": "tvm" in sys.modules}))
"""


def _records(cache: Path) -> list[Path]:
    return sorted((cache / FAST_KEYS).glob("host-cpu-*.json"))


def _recorded(cache: Path) -> Path:
    """The record that resolving the host target with `cache` leaves there."""
    resolve_target("cpu", None, ArtifactCache(cache))
    [record] = _records(cache)
    return record


def test_the_host_cpu_is_recorded_and_read_back_without_importing_tvm(tmp_path: Path) -> None:
    asked = resolve_target("cpu", None, ArtifactCache(tmp_path))
    assert asked == resolve_target("cpu", None) and len(_records(tmp_path)) == 1
    fresh = subprocess.run([sys.executable, "-c", RESOLVE_IN_A_FRESH_PROCESS, str(tmp_path)],
                           capture_output=True, text=True, check=True)
    assert json.loads(fresh.stdout) == {"target": asked.json, "tvm_imported": False}


def test_a_record_counts_only_for_the_same_cpu_and_tvm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = resolve_target("cpu", None).json
    record = _recorded(tmp_path)
    record.write_text(json.dumps({"mtriple": real["mtriple"], "mcpu": "recorded"}))
    assert resolve_target("cpu", None, ArtifactCache(tmp_path)).json["mcpu"] == "recorded"  # the record is what answers

    description = targets._cpu_description()
    assert description is not None
    monkeypatch.setattr(targets, "_cpu_description", lambda: {**description, "flags": "sse2"})
    assert resolve_target("cpu", None, ArtifactCache(tmp_path)).json["mcpu"] == real["mcpu"]  # another CPU: TVM asked
    monkeypatch.setattr(targets, "_cpu_description", lambda: description)
    version = targets._version
    monkeypatch.setattr(targets, "_version", lambda name: "99.0" if name == "apache-tvm" else version(name))
    assert resolve_target("cpu", None, ArtifactCache(tmp_path)).json["mcpu"] == real["mcpu"]  # another TVM: TVM asked
    monkeypatch.setattr(targets, "_version", version)
    assert resolve_target("cpu", None, ArtifactCache(tmp_path)).json["mcpu"] == "recorded"
    assert resolve_target("cuda", "sm_90", ArtifactCache(tmp_path)).json["host"]["mcpu"] == "recorded"
    record.write_text(json.dumps({"mtriple": real["mtriple"], "mcpu": "recorded", "mattr": []}))
    assert "mattr" not in resolve_target("cpu", None, ArtifactCache(tmp_path)).json  # an empty list is no list: the same key


@pytest.mark.parametrize("content", ["not json", "[]", '{"mtriple": "x86_64-linux-gnu"}',
                                     '{"mtriple": "x86_64-linux-gnu", "mcpu": "../../etc"}',
                                     '{"mtriple": "x86_64-linux-gnu", "mcpu": 5}',
                                     '{"mtriple": "x86_64-linux-gnu", "mcpu": "x", "mattr": "-avx512f"}',
                                     '{"mtriple": "x86_64-linux-gnu", "mcpu": "x", "mattr": ["+avx512f"]}',
                                     '{"mtriple": "x86_64-linux-gnu", "mcpu": "x", "other": 1}'])
def test_a_malformed_record_is_replaced_by_what_tvm_says(tmp_path: Path, content: str) -> None:
    real = resolve_target("cpu", None).json
    record = _recorded(tmp_path)
    record.write_text(content)
    assert resolve_target("cpu", None, ArtifactCache(tmp_path)).json == real
    assert json.loads(record.read_text()) == {key: real[key] for key in real if key not in ("kind", "num-cores")}


def test_without_proc_cpuinfo_nothing_is_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(targets, "_cpu_description", lambda: None)
    assert resolve_target("cpu", None, ArtifactCache(tmp_path)) == resolve_target("cpu", None)
    assert _records(tmp_path) == []


# --- vector extensions that a virtual machine hides from its guest -------------------------------


@pytest.fixture
def without_avx512(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This machine as a virtual machine that hides AVX-512 would show it: /proc/cpuinfo's flags
    without any avx512 one (LLVM still names the CPU by its model)."""
    from tfcheck.runtime import target as runtime_target

    listed = runtime_target.host_cpu_features()
    if "avx512f" not in listed:
        pytest.skip("needs a CPU with AVX-512 to hide it")
    monkeypatch.setattr(runtime_target, "host_cpu_features", lambda: frozenset(f for f in listed if "avx512" not in f))
    targets._llvm_host.cache_clear()
    yield
    targets._llvm_host.cache_clear()


def test_vector_extensions_the_machine_hides_are_turned_off(without_avx512: None, tmp_path: Path) -> None:
    import tvm
    from tvm.target.codegen import llvm_cpu_has_features

    from tfcheck.compiler.build.compile import compiled_cpu_features
    from tfcheck.compiler.schedules.cpu import vector_bits

    host = resolve_target("cpu", None, ArtifactCache(tmp_path)).json
    assert "-avx512f" in host["mattr"] and "-avx2" not in host["mattr"]
    target = tvm.target.Target(host)
    assert not llvm_cpu_has_features(["avx512f"], target) and llvm_cpu_has_features(["avx2"], target)
    assert vector_bits(target) == 256  # the schedules' tiles for 8-float vectors and 16 registers
    assert not [name for name in compiled_cpu_features(target) if "avx512" in name]
    assert json.loads(_recorded(tmp_path).read_text())["mattr"] == host["mattr"]  # the record keeps them
    assert resolve_target("cpu", None, ArtifactCache(tmp_path)).json == host


# The flags of an AMD Zen 3 (AVX2, no AVX-512) in /proc/cpuinfo, normalized, as far as LLVM names them.
ZEN3_FLAGS = frozenset({"sse", "sse2", "pni", "ssse3", "sse41", "sse42", "popcnt", "avx", "avx2", "fma", "f16c",
                        "bmi1", "bmi2", "abm", "movbe", "aes", "pclmulqdq", "xsave", "cx16", "sse4a"})


def test_a_build_for_avx512_needs_avx512_whatever_machine_built_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Built for `znver4` on a Zen 3, the manifest listed only what the Zen 3 has, and the runtime
    would have loaded AVX-512 code on an AVX2 CPU (issue 39). Tuning flags are still left out."""
    import tvm

    from tfcheck.compiler.build.compile import compiled_cpu_features
    from tfcheck.runtime import target as runtime_target

    znver4 = tvm.target.Target({"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "znver4"})
    on_this_machine = compiled_cpu_features(znver4)
    monkeypatch.setattr(runtime_target, "host_cpu_features", lambda: ZEN3_FLAGS)
    on_zen3 = compiled_cpu_features(znver4)
    assert {"avx512f", "avx512bw", "avx512vl", "avx2", "fma"} <= set(on_zen3)
    assert not [name for name in on_zen3 if name.startswith(("prefer-", "fast-", "slow-", "tuning"))]
    vector = set(targets.VECTOR_FEATURES)
    assert vector & set(on_zen3) == vector & set(on_this_machine)


def test_nothing_is_turned_off_where_the_flags_list_what_the_name_implies() -> None:
    implied = {"avx", "avx2", "fma", "avx512f", "prefer-256-bit", "amx-tile"}
    listed = frozenset({"avx", "avx2", "fma", "avx512f"})
    assert targets._hidden_vector_features("x86_64-linux-gnu", implied, listed) == []
    assert targets._hidden_vector_features("x86_64-linux-gnu", implied, listed - {"avx512f"}) == ["avx512f"]
    assert targets._hidden_vector_features("aarch64-linux-gnu", implied, frozenset({"neon"})) == []
    assert targets._hidden_vector_features("x86_64-linux-gnu", implied, frozenset()) == []  # flags unread
