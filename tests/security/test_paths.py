"""Names are identifiers, never paths (issue 18, docs/artifact-format.md "Names and paths").

A name from source code, the configuration, the command line or a manifest must never make
tfcheck write, replace or delete outside its folder, or load a library from outside an artifact
folder. Most tests call the functions that turn names into paths directly, on hand-written
folders; one slow test runs `tfcheck build` end to end.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

import tfcheck
from tfcheck.compiler.build.export import export_artifact, runtime_record
from tfcheck.compiler.cache.artifacts import ArtifactCache, entry_problem
from tfcheck.compiler.trace.discover import discover
from tfcheck.compiler.build.driver import export_clashes
from tfcheck.runtime import ArtifactError
from tfcheck.runtime import library as runtime_library
from tfcheck.runtime.manifest import Manifest, TensorSpec, read_manifest
from tfcheck.runtime.paths import UnsafePathError, check_name, name_problem, path_inside

BAD_NAMES = ["../victim", "../../x", "..\\victim", "a/b", "a\\b", "/tmp/abs", "a\0b", "", ".", "..",
             "...", ".hidden", "C:x", "x" * 201]
GOOD_NAMES = ["classify", "scale__1x4", "f__llvm-x86-64", "f__cuda-sm_90", "a..b", "ünïcode", "x" * 200]
LIBRARY = b"pretend this is a shared library"


@pytest.mark.parametrize("name", BAD_NAMES)
def test_names_that_are_paths_are_refused(name: str) -> None:
    assert name_problem(name) is not None
    with pytest.raises(UnsafePathError, match="names are identifiers, not paths"):
        check_name(name, "artifact name")


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_plain_names_are_accepted(name: str) -> None:
    assert name_problem(name) is None and check_name(name, "artifact name") == name


@pytest.mark.parametrize("name", [None, 3, ["lib.so"]])
def test_names_that_are_not_strings_are_refused(name: object) -> None:
    assert "not a string" in str(name_problem(name))


def test_path_inside_follows_links(tmp_path: Path) -> None:
    folder, outside = tmp_path / "folder", tmp_path / "outside.so"
    folder.mkdir()
    outside.write_bytes(LIBRARY)
    (folder / "inner.so").write_bytes(LIBRARY)
    (folder / "link.so").symlink_to(outside)
    (folder / "here.so").symlink_to("inner.so")
    (folder / "self").symlink_to(".")
    assert path_inside(folder, "here.so", "'library'") == (folder / "inner.so").resolve()
    for name in ("link.so", "self"):
        with pytest.raises(UnsafePathError, match="outside"):
            path_inside(folder, name, "'library'")


# --- export: `tfcheck build --out` ----------------------------------------------------------------


def _artifact(tmp_path: Path) -> Path:
    """A cache entry to export (export copies whatever the folder holds)."""
    cache = ArtifactCache(tmp_path / "cache")
    staging = cache.new_staging()
    (staging / "lib.so").write_bytes(LIBRARY)
    manifest = Manifest(key="ab" * 32, function="f", qualname="m.f", device="cpu", inputs=(), outputs=(),
                        output_structure={"kind": "tuple"}, library="lib.so",
                        library_sha256=hashlib.sha256(LIBRARY).hexdigest(), created="2026-11-22T00:00:00Z")
    return cache.commit(staging, manifest)


def _victim(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "precious.txt").write_text("keep me")
    return folder


@pytest.mark.parametrize("name", ["../victim", "../../victim", "..", "/ABSOLUTE/victim", "..\\victim", ""])
def test_export_refuses_names_that_leave_out(tmp_path: Path, name: str) -> None:
    out = tmp_path / "a" / "deploy"
    victims = [_victim(tmp_path / "a" / "victim"), _victim(tmp_path / "victim")]
    absolute = name.replace("/ABSOLUTE", str(tmp_path / "a"))
    with pytest.raises(UnsafePathError, match="export name"):
        export_artifact(_artifact(tmp_path), out, absolute)
    assert all((victim / "precious.txt").read_text() == "keep me" for victim in victims)
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["victim"]  # nothing created either


SAME_NAME = """
import tensorflow as tf
import tfcheck


@tfcheck.aot{options}
@tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
def f(x):
    return x * {factor}.0
"""


def test_two_functions_with_one_artifact_name_do_not_share_an_export(project: Callable[..., Path]) -> None:
    """`a.f` and `b.f` would both export to `--out/f`, the later silently replacing the earlier:
    the second fails, naming both, unless `name=` tells them apart."""
    folder = project({"a.py": SAME_NAME.format(options="", factor=2), "b.py": SAME_NAME.format(options="", factor=3),
                      "c.py": SAME_NAME.format(options='(name="f_c")', factor=4)})
    functions = discover([folder / "a.py", folder / "b.py", folder / "c.py"]).functions
    clashes = export_clashes(functions)
    assert list(clashes) == [1]
    assert clashes[1].startswith("b.f: its artifact name 'f' is also a.f's") and "name=" in clashes[1]
    # A function that fails before it is built (a SavedModel without that signature) claims no name.
    assert export_clashes([dataclasses.replace(functions[0], problem="no signature 'f'"), *functions[1:]]) == {}


@pytest.mark.slow
def test_a_build_with_a_name_clash_exports_the_first_and_fails_the_second(
        project: Callable[..., Path], run_cli: Callable[..., Result]) -> None:
    folder = project({"a.py": SAME_NAME.format(options="", factor=2), "b.py": SAME_NAME.format(options="", factor=3)})
    result = run_cli(folder, "build", "a.py", "b.py", "--out", str(folder / "out"), "--cache-dir",
                     str(folder / "cache"), "--format", "json")
    assert result.exit_code == 1, result.output
    records = {record["function"]: record for record in json.loads(result.stdout)["functions"]}
    assert records["a.f"]["status"] == "built" and records["b.f"]["status"] == "failed"
    assert read_manifest(folder / "out" / "f").qualname == "a.f"


def test_export_into_an_out_that_is_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "deploy").symlink_to(real)
    exported = export_artifact(_artifact(tmp_path), tmp_path / "deploy", "f")
    assert exported == real.resolve() / "f" and (real / "f" / "lib.so").read_bytes() == LIBRARY


@pytest.mark.parametrize("target", ["victim", "missing"])
def test_an_older_export_that_is_a_link_is_replaced_not_followed(tmp_path: Path, target: str) -> None:
    """A link to a folder elsewhere (or a dangling one) is replaced by the export; whatever it
    points to is left alone, and no `.f.old.*` leftover stays behind."""
    victim = _victim(tmp_path / "victim")
    out = tmp_path / "deploy"
    out.mkdir()
    (out / "f").symlink_to(tmp_path / target)
    exported = export_artifact(_artifact(tmp_path), out, "f")
    assert not exported.is_symlink() and (exported / "lib.so").read_bytes() == LIBRARY
    assert sorted(p.name for p in out.iterdir()) == ["f"]
    assert sorted(p.name for p in victim.iterdir()) == ["precious.txt"]


# --- the cache -------------------------------------------------------------------------------------


def test_a_cache_entry_whose_library_leaves_it_is_corrupt(tmp_path: Path) -> None:
    folder = _artifact(tmp_path)
    outside = tmp_path / "outside.so"
    outside.write_bytes(LIBRARY)
    manifest_path = folder / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**manifest, "library": "../../outside.so"}))
    assert "'library' '../../outside.so' contains '/'" in str(entry_problem(folder))
    manifest_path.write_text(json.dumps(manifest))
    (folder / "lib.so").unlink()
    (folder / "lib.so").symlink_to(outside)
    assert "outside" in str(entry_problem(folder))
    assert ArtifactCache(tmp_path / "cache").lookup(manifest["key"])[0] is None  # moved aside ...
    assert outside.read_bytes() == LIBRARY  # ... without touching what the link pointed to


def test_clean_removes_a_linked_entry_but_not_its_target(tmp_path: Path, run_cli: Callable[..., Result]
                                                        ) -> None:
    victim = _victim(tmp_path / "elsewhere")
    (victim / "manifest.json").write_text("{}")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "entry").symlink_to(victim)
    result = run_cli(tmp_path, "clean", "--cache-dir", str(cache))
    assert result.exit_code == 0 and "removed 1 artifact(s)" in result.output
    assert list(cache.iterdir()) == [] and (victim / "precious.txt").read_text() == "keep me"


def test_clean_lint_cache_deletes_only_what_the_lint_cache_wrote(project: Callable[..., Path],
                                                                 run_cli: Callable[..., Result]) -> None:
    """`cache-dir = "."` in the configuration must not delete the project."""
    folder = project({"model.py": "x = 1\n", ".gitignore": "build/\n"},
                     config='[tool.tfcheck]\ncache-dir = "."\n')
    assert run_cli(folder, "check", "model.py").exit_code == 0
    assert (folder / "lint").is_dir()
    result = run_cli(folder, "clean", "--cache-dir", str(folder / "no-artifacts"), "--lint-cache")
    assert result.exit_code == 0
    assert sorted(p.name for p in folder.iterdir()) == [".gitignore", "model.py", "pyproject.toml"]
    assert (folder / ".gitignore").read_text() == "build/\n"


# --- loading: `tfcheck.load` -----------------------------------------------------------------------


def _manifest(library: Any) -> dict[str, Any]:
    """A manifest this machine can run (as far as the checks before loading go)."""
    return {
        "format_version": 1, "function": "f", "qualname": "m.f",
        "inputs": [{"name": "x", "shape": [1], "dtype": "float32"}],
        "outputs": [{"name": "y", "shape": [1], "dtype": "float32"}], "output_structure": {"kind": "tensor"},
        "target": {"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": "x86-64"}, "device": "cpu",
        "cpu_features": [], "versions": {"tvm": importlib.metadata.version("apache-tvm")},
        "library": library, "library_sha256": hashlib.sha256(LIBRARY).hexdigest(), "entry": "main",
        "runtime": runtime_record("cpu"),
    }


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The libraries the runtime hands to TVM's loader (which is replaced by a recorder)."""
    paths: list[Path] = []

    class Recorder:
        def __init__(self, library: Path, entry: str, device: str, runtime: object, weights: object) -> None:
            paths.append(Path(library))

    monkeypatch.setattr(runtime_library, "Executable", Recorder)
    return paths


def _artifact_folder(root: Path, library: Any) -> Path:
    """`root/art/` with a manifest naming `library`, `root/art/lib.so`, and `root/outside.so`
    holding the same bytes (so the SHA-256 check alone would pass)."""
    folder = root / "art"
    folder.mkdir(parents=True)
    (folder / "lib.so").write_bytes(LIBRARY)
    (root / "outside.so").write_bytes(LIBRARY)
    (folder / "manifest.json").write_text(json.dumps(_manifest(library)))
    return folder


@pytest.mark.parametrize("library", ["../outside.so", "../../outside.so", "/ABSOLUTE/outside.so",
                                     "..\\outside.so", "lib\0.so", "", ".", "..", 5, None])
def test_load_refuses_a_library_field_that_is_a_path(tmp_path: Path, opened: list[Path], library: Any) -> None:
    if isinstance(library, str):
        library = library.replace("/ABSOLUTE", str(tmp_path))
    folder = _artifact_folder(tmp_path / "out", library)
    with pytest.raises(ArtifactError, match=r"'library'") as error:
        tfcheck.load(tmp_path / "out")
    assert str(folder) in str(error.value) and opened == []
    with pytest.raises(ArtifactError, match=r"'library'"):
        read_manifest(folder)


def test_load_refuses_a_library_link_out_of_the_folder(tmp_path: Path, opened: list[Path]) -> None:
    folder = _artifact_folder(tmp_path, "lib.so")
    (folder / "lib.so").unlink()
    (folder / "lib.so").symlink_to(tmp_path / "outside.so")
    with pytest.raises(ArtifactError, match="'library' 'lib.so' leads to .*outside.so, outside"):
        tfcheck.load(folder)
    assert opened == []


def test_a_library_swapped_for_a_link_after_a_lazy_load_is_refused(tmp_path: Path, opened: list[Path]) -> None:
    folder = _artifact_folder(tmp_path, "lib.so")
    library = tfcheck.load(folder, lazy=True)
    (folder / "lib.so").unlink()
    (folder / "lib.so").symlink_to(tmp_path / "outside.so")
    with pytest.raises(ArtifactError, match="outside"):
        library.f.artifacts[0].open()
    assert opened == []


def test_a_manifest_link_out_of_the_folder_is_refused(tmp_path: Path, opened: list[Path]) -> None:
    folder = _artifact_folder(tmp_path, "lib.so")
    (folder / "manifest.json").rename(tmp_path / "elsewhere.json")
    (folder / "manifest.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(ArtifactError, match="'manifest.json' leads to .*elsewhere.json, outside"):
        tfcheck.load(folder)
    assert opened == []


def test_artifacts_reached_through_a_linked_folder_load(tmp_path: Path, opened: list[Path]) -> None:
    """Links to the artifact folder, or to `--out`, are fine: their contents are checked against
    the folder they lead to."""
    folder = _artifact_folder(tmp_path / "real", "lib.so")
    (tmp_path / "deploy").symlink_to(tmp_path / "real")
    (tmp_path / "current").symlink_to(folder)
    for root in (tmp_path / "deploy", tmp_path / "current"):
        assert list(tfcheck.load(root)) == ["m.f"]
    assert opened == [folder.resolve() / "lib.so"] * 2


# --- build: names from source ----------------------------------------------------------------------


def test_discovery_refuses_a_literal_name_that_is_a_path(tmp_path: Path) -> None:
    (tmp_path / "models.py").write_text(
        "import tensorflow as tf\nimport tfcheck\n\n"
        "@tfcheck.aot(name='../victim')\n@tf.function\ndef evil(x):\n    return x\n\n"
        "@tfcheck.aot(name='fine')\n@tf.function\ndef good(x):\n    return x\n")
    evil, good = discover([tmp_path / "models.py"]).functions
    assert evil.problem == ("models.evil: artifact name '../victim' contains '/': "
                            "names are identifiers, not paths")
    assert good.problem is None


def test_target_suffixes_and_shape_tags_are_checked_as_part_of_the_export_name() -> None:
    pytest.importorskip("tvm")
    from tfcheck.compiler.build.driver import _export_names
    from tfcheck.compiler.process.messages import TracedVariant

    variants = [TracedVariant("", [TensorSpec("x", shape, "float32")], "", "", "") for shape in ((1, 4), (3, 4))]
    assert _export_names("f", variants, "__llvm-x86-64") == ["f__1x4__llvm-x86-64", "f__3x4__llvm-x86-64"]
    with pytest.raises(UnsafePathError, match="export name 'f__1x4__llvm-../../x'"):
        _export_names("f", variants, "__llvm-../../x")
    with pytest.raises(UnsafePathError, match="artifact name '..'"):
        _export_names("..", variants[:1], "")


SOURCE = '''
import tensorflow as tf
import tfcheck

COMPUTED = "/".join(["..", "victim"])


@tfcheck.aot(name="../victim")
@tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
def literal(x):
    return x + 1.0


@tfcheck.aot(name=COMPUTED)
@tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
def computed(x):
    return x * 2.0


@tfcheck.aot
@tf.function(input_signature=[tf.TensorSpec([2], tf.float32)])
def fine(x):
    return x - 1.0
'''


@pytest.mark.slow
def test_build_with_a_path_for_a_name_leaves_the_folder_beside_out_alone(
        project: Callable[..., Path], run_cli: Callable[..., Result]) -> None:
    folder = project({"models.py": SOURCE})
    victim = _victim(folder / "victim")
    result = run_cli(folder, "build", "models.py", "--out", "deploy", "--cache-dir", "cache", "--format", "json")
    report = {record["function"]: record for record in json.loads(result.stdout)["functions"]}
    assert result.exit_code == 1
    assert sorted(p.name for p in victim.iterdir()) == ["precious.txt"]
    assert sorted(p.name for p in (folder / "deploy").iterdir()) == ["fine", "tvm-runtime"]
    assert report["models.fine"]["status"] == "built"
    for function in ("literal", "computed"):  # found before tracing / after tracing
        assert report[f"models.{function}"]["status"] == "failed"
        assert report[f"models.{function}"]["message"] == (
            f"models.{function}: artifact name '../victim' contains '/': names are identifiers, not paths")
