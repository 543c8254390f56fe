"""`tfcheck clean --cache-dir OUT` on a `tfcheck build --out` folder also deletes the TVM runtime
bundled for its artifacts (issue 40, item 8), and nothing outside the folder, through no link."""

from __future__ import annotations

from pathlib import Path

from tfcheck.runtime.bundled import RUNTIME_DIR

TAG = "tvm-0.27.0-0123456789ab"


def _exported(root: Path, runtime: bool = True) -> Path:
    """An --out folder: one artifact and (unless not `runtime`) the runtime bundled for it."""
    out = root / "deploy"
    (out / "classify").mkdir(parents=True)
    (out / "classify" / "manifest.json").write_text("{}")
    if runtime:
        (out / RUNTIME_DIR / TAG).mkdir(parents=True)
        (out / RUNTIME_DIR / TAG / "libtvm_ffi.so").write_bytes(b"\x7fELF")
    return out


def _outside(root: Path) -> Path:
    """A folder outside the --out folder that a link points into."""
    outside = root / "elsewhere"
    (outside / TAG).mkdir(parents=True)
    (outside / TAG / "libtvm_ffi.so").write_bytes(b"\x7fELF")
    return outside


def test_clean_removes_the_bundled_runtime_with_the_artifacts(tmp_path, run_cli) -> None:
    out = _exported(tmp_path)
    (out / "README.txt").write_text("mine\n")
    result = run_cli(tmp_path, "clean", "--cache-dir", "deploy")
    assert result.exit_code == 0
    assert result.stdout == f"removed 1 artifact(s) from deploy and the TVM runtime bundled for them ({RUNTIME_DIR}/)\n"
    assert sorted(path.name for path in out.iterdir()) == ["README.txt"]


def test_clean_keeps_what_the_build_did_not_write_in_the_runtime_folder(tmp_path, run_cli) -> None:
    out = _exported(tmp_path)
    (out / RUNTIME_DIR / "notes.txt").write_text("mine\n")
    assert run_cli(tmp_path, "clean", "--cache-dir", "deploy").exit_code == 0
    assert [path.name for path in (out / RUNTIME_DIR).iterdir()] == ["notes.txt"]


def test_a_runtime_folder_that_is_a_link_loses_the_link_only(tmp_path, run_cli) -> None:
    out, outside = _exported(tmp_path, runtime=False), _outside(tmp_path)
    (out / RUNTIME_DIR).symlink_to(outside, target_is_directory=True)
    assert run_cli(tmp_path, "clean", "--cache-dir", "deploy").exit_code == 0
    assert not (out / RUNTIME_DIR).is_symlink() and not (out / RUNTIME_DIR).exists()
    assert (outside / TAG / "libtvm_ffi.so").is_file()


def test_links_inside_the_runtime_folder_are_never_followed(tmp_path, run_cli) -> None:
    out, outside = _exported(tmp_path), _outside(tmp_path)
    (out / RUNTIME_DIR / TAG / "libtvm_runtime.so").symlink_to(outside / TAG / "libtvm_ffi.so")
    (out / RUNTIME_DIR / "tvm-0.26.0-ba9876543210").symlink_to(outside / TAG, target_is_directory=True)
    assert run_cli(tmp_path, "clean", "--cache-dir", "deploy").exit_code == 0
    assert not (out / RUNTIME_DIR).exists()
    assert (outside / TAG / "libtvm_ffi.so").read_bytes() == b"\x7fELF"


def test_a_cache_without_a_bundled_runtime_says_nothing_of_one(tmp_path, run_cli) -> None:
    (tmp_path / "cache" / "a1b2").mkdir(parents=True)
    (tmp_path / "cache" / "a1b2" / "manifest.json").write_text("{}")
    result = run_cli(tmp_path, "clean", "--cache-dir", "cache")
    assert result.stdout == "removed 1 artifact(s) from cache\n"
