"""The content-addressed cache: keys, atomic commits, corrupt entries, races, index, export."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing
from pathlib import Path

import pytest

from tfcheck.compiler.cache.artifacts import (
    FAST_KEYS,
    ArtifactCache,
    artifact_cache,
    cache_key,
    entry_problem,
    python_sources,
    sources_digest,
)
from tfcheck.compiler.build.export import export_artifact, shape_tag
from tfcheck.compiler.process.messages import CompileOptions
from tfcheck.compiler.process.target import BuildTarget
from tfcheck.config import BuildConfig, Config
from tfcheck.runtime.manifest import CACHE_DIR, Manifest, TensorSpec
from tfcheck.runtime.paths import UnsafePathError
from tfcheck.runtime.digest import file_sha256

INPUTS = [TensorSpec("x", (1, 4), "float32")]
TARGET = {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "skylake", "num-cores": 2}
OPTIONS = CompileOptions("tfcheck-default")
VERSIONS = {"tfcheck": "0.1.0", "compiler_sources": "0123456789abcdef", "tvm": "0.27.0", "tensorflow": "2.21.0"}
RUNTIME = {"tag": "tvm-0.27.0-0123456789ab", "tvm": "0.27.0", "tvm_ffi": "0.1.14",
           "libraries": {name: "0" * 64 for name in ("libtvm_ffi.so", "libtvm_runtime.so",
                                                     "libtvm_runtime_extra.so")}}


def key(**changes: object) -> str:
    arguments = {"graph_sha256": "ab" * 32, "inputs": INPUTS, "target": TARGET,
                 "compile_options": OPTIONS, "versions": VERSIONS, **changes}
    arguments["target"] = BuildTarget.of(arguments["target"])  # type: ignore[arg-type]
    return cache_key(**arguments)  # type: ignore[arg-type]


def test_key_changes_with_every_component_and_ignores_target_key_order() -> None:
    variants = [
        key(graph_sha256="cd" * 32),
        key(inputs=[dataclasses.replace(INPUTS[0], shape=(2, 4))]),
        key(inputs=[dataclasses.replace(INPUTS[0], dtype="float16")]),
        key(target={**TARGET, "mcpu": "znver4"}),
        key(compile_options=CompileOptions("metaschedule", 64)),
        key(versions={**VERSIONS, "tvm": "0.28.0"}),
        key(versions={**VERSIONS, "tensorflow": "2.22.0"}),
        key(versions={**VERSIONS, "tfcheck": "0.2.0"}),
        key(versions={**VERSIONS, "compiler_sources": "fedcba9876543210"}),
    ]
    assert len({key(), *variants}) == len(variants) + 1
    assert key(target=dict(reversed(list(TARGET.items())))) == key()


def test_the_key_hashes_the_parts_as_the_manifest_records_them() -> None:
    """Typed messages changed no key: the key is the SHA-256 of the parts' JSON, as it always was."""
    parts = {"format_version": 1, "graph_sha256": "ab" * 32, "inputs": [{"name": "x", "shape": [1, 4], "dtype": "float32"}],
             "target": json.dumps(TARGET, sort_keys=True, separators=(",", ":")),
             "compile_options": {"schedules": "tfcheck-default"}, "versions": VERSIONS, "structures": None}
    assert key() == hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def test_a_changed_code_generator_changes_the_sources_digest(tmp_path: Path) -> None:
    schedule = tmp_path / "rules" / "contraction.py"
    schedule.parent.mkdir()
    schedule.write_text("TILE = 8\n")
    before = sources_digest(tmp_path)
    assert sources_digest(tmp_path) == before and len(before) == 16
    schedule.write_text("TILE = 16\n")
    assert sources_digest(tmp_path) != before
    schedule.write_text("TILE = 8\n")
    schedule.rename(tmp_path / "contraction.py")  # the same file in another stage folder
    assert sources_digest(tmp_path) != before


def test_build_versions_name_the_compiler_sources() -> None:
    pytest.importorskip("tvm")
    from tfcheck.compiler.build.driver import versions

    recorded = versions()
    assert len(recorded["compiler_sources"]) == 16 and "tensorflow" not in recorded  # the tracing child's


def test_every_compiler_module_is_in_the_key() -> None:
    """The importer's symbolic shapes, the TFLite conversion and the schedules all shape the
    library; a module left out of the hash let a changed one return the old one's artifacts."""
    pytest.importorskip("tvm")
    from tfcheck.compiler.build import driver

    package = driver.COMPILER_ROOT
    hashed = {path.relative_to(package).as_posix() for path in python_sources(package)}
    assert hashed == {path.relative_to(package).as_posix() for path in package.rglob("*.py")
                      if "__pycache__" not in path.parts}
    assert {"frontend/symbolic_import.py", "trace/bridge.py", "schedules/rules/contraction.py"} <= hashed


def stage(cache: ArtifactCache, entry_key: str, payload: bytes = b"library") -> tuple[Path, Manifest]:
    staging = cache.new_staging()
    (staging / "lib.so").write_bytes(payload)
    manifest = Manifest(key=entry_key, function="f", qualname="m.f", device="cpu",
                        inputs=(TensorSpec("x", (1, 4), "float32"),), outputs=(), output_structure={"kind": "tuple"},
                        library="lib.so", library_sha256=file_sha256(staging / "lib.so"),
                        runtime=RUNTIME, created="2026-11-22T00:00:00Z")
    return staging, manifest


def test_commit_then_lookup_and_index(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "cache")
    assert cache.lookup(key()) == (None, None)
    staging, manifest = stage(cache, key())
    folder = cache.commit(staging, manifest)
    assert folder == tmp_path / "cache" / key() and not staging.exists()
    assert cache.lookup(key()) == (manifest, None)
    index = json.loads((tmp_path / "cache" / "index.json").read_text())
    assert index[key()]["qualname"] == "m.f"


@pytest.mark.parametrize("damage", ["truncate library", "delete library", "garble manifest", "delete manifest",
                                    "older runtime record"])
def test_corrupt_entries_are_reported_and_removed(tmp_path: Path, damage: str) -> None:
    """An older tfcheck recorded no libtvm_ffi.so: such an entry is rebuilt, not exported unrunnable."""
    cache = ArtifactCache(tmp_path)
    folder = cache.commit(*stage(cache, key()))
    target, action = {"truncate library": ("lib.so", "truncate"), "delete library": ("lib.so", "delete"),
                      "garble manifest": ("manifest.json", "truncate"),
                      "delete manifest": ("manifest.json", "delete"),
                      "older runtime record": ("manifest.json", "drop libtvm_ffi.so")}[damage]
    if action == "truncate":
        (folder / target).write_bytes((folder / target).read_bytes()[:5])
    elif action == "delete":
        (folder / target).unlink()
    else:
        manifest = json.loads((folder / target).read_text())
        del manifest["runtime"]["libraries"]["libtvm_ffi.so"]
        (folder / target).write_text(json.dumps(manifest))
    manifest, problem = cache.lookup(key())
    assert manifest is None and problem
    assert not folder.exists()
    assert cache.lookup(key()) == (None, None)


def test_losing_a_commit_race_keeps_the_winner(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path)
    first, manifest = stage(cache, key())
    second, _ = stage(cache, key())
    cache.commit(first, manifest)
    cache.commit(second, manifest)
    assert not second.exists()
    assert entry_problem(cache.entry(key())) is None


def _commit_many(root: str, worker: int) -> None:
    cache = ArtifactCache(Path(root))
    for index in range(20):
        cache.commit(*stage(cache, key(graph_sha256=f"{index % 5:064d}"), payload=b"same bytes"))
        cache.commit(*stage(cache, key(graph_sha256=f"{worker}{index:063d}")))


def test_concurrent_processes_leave_valid_entries_and_a_complete_index(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_commit_many, args=(str(tmp_path), w)) for w in range(1, 4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    entries = [p for p in tmp_path.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(entries) == 5 + 3 * 20
    assert all(entry_problem(entry) is None for entry in entries)
    index = json.loads((tmp_path / "index.json").read_text())
    assert set(index) == {entry.name for entry in entries}
    assert list((tmp_path / ".tmp").iterdir()) == []


def test_export_replaces_an_older_copy(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "cache")
    folder = cache.commit(*stage(cache, key()))
    out = tmp_path / "out"
    (out / "f").mkdir(parents=True)
    (out / "f" / "stale.txt").write_text("old")
    exported = export_artifact(folder, out, "f")
    assert sorted(p.name for p in exported.iterdir()) == ["lib.so", "manifest.json"]
    assert sorted(p.name for p in out.iterdir()) == ["f"]


def test_shape_tag() -> None:
    assert shape_tag([TensorSpec("x", (8, 224, 224, 3), "float32"), TensorSpec("k", (), "int32")]) == "8x224x224x3_scalar"


def test_the_cache_keeps_itself_out_of_git(tmp_path: Path) -> None:
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    cache = ArtifactCache(tmp_path / ".tfcheck" / "artifacts")
    cache.commit(*stage(cache, key()))
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path,
                            capture_output=True, text=True, check=True)
    assert status.stdout == ""
    assert (tmp_path / ".tfcheck/artifacts/.gitignore").read_text().splitlines()[-1] == "*"
    assert [folder.name for folder in cache.root.iterdir() if (folder / "manifest.json").is_file()] == [key()]


def test_the_cache_folder_is_the_flag_else_the_config_else_the_default(tmp_path: Path) -> None:
    """One function decides it for `build`, `inspect`, `ls` and `clean` (issue 38: `inspect` ignored
    the config's cache-dir)."""
    configured = Config(root=tmp_path, build=BuildConfig(cache_dir=str(tmp_path / "configured")))
    assert artifact_cache(tmp_path / "flag", configured).root == tmp_path / "flag"
    assert artifact_cache(None, configured).root == tmp_path / "configured"
    assert artifact_cache(None, Config(root=tmp_path)).root == CACHE_DIR


def test_the_cache_keeps_its_records_inside_its_fast_key_folder(tmp_path: Path) -> None:
    """Trace records, host records and failed lifted builds all live under `.fastkeys/`, by names
    the cache checks; `clear` takes them with the artifacts, and nothing else."""
    cache = ArtifactCache(tmp_path / "cache")
    cache.keep_trace_record("a" * 64, "{}")
    cache.keep_host_record("0123abcd", '{"mtriple": "x"}')
    cache.keep_lifted_failure(key(), "no constant operand")
    assert (cache.trace_record("a" * 64), cache.host_record("0123abcd"), cache.lifted_failure(key())) == (
        "{}", '{"mtriple": "x"}', "no constant operand")
    assert sorted(path.name for path in (cache.root / FAST_KEYS).iterdir()) == [
        "a" * 64, "host-cpu-0123abcd.json", f"lifted-failed-{key()}"]
    assert cache.trace_record("b" * 64) is None and cache.lifted_failure("0" * 64) is None
    for bad in ("../escape", "/etc/passwd", ".."):
        with pytest.raises(UnsafePathError):
            cache.keep_trace_record(bad, "{}")
        with pytest.raises(UnsafePathError):
            cache.entry(bad)
    cache.commit(*stage(cache, key()))
    (cache.root / "notes").mkdir()
    assert cache.clear() == 1
    assert sorted(path.name for path in cache.root.iterdir()) == [".gitignore", ".lock", ".tmp", "notes"]
