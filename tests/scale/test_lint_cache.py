"""The lint cache: warm runs answer from it without reading files, and nothing in it is trusted blindly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import tfcheck.cache as cache_module
import tfcheck.runner as runner
from tfcheck.cache import LintCache, run_key
from tfcheck.config import Config
from tfcheck.findings import RunResult
from tfcheck.runner import lint_paths

CALLER = """
import tensorflow as tf
from pkg import helpers

@tf.function
def step(x):
    print("step")
    return helpers.scale(x)
"""
HELPERS = """
def scale(x):
    print("inner")
    return x * 2
"""
PLAIN = "def unrelated():\n    return 1\n"


@pytest.fixture
def tree(project, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package whose findings need the cross-file pass; files count as settled at once."""
    monkeypatch.setattr(cache_module, "RACY_SECONDS", -1.0)
    return project({"pkg/__init__.py": "", "pkg/caller.py": CALLER, "pkg/helpers.py": HELPERS, "pkg/plain.py": PLAIN})


def lint(root: Path, **options) -> RunResult:
    return lint_paths([root / "pkg"], Config(root=root, select=("ALL",)), jobs=1, cache_dir=root / "cache", **options)


def summary(result: RunResult) -> list[tuple[str, int, str, str]]:
    return [(Path(f.path).name, f.line, f.code, f.message) for f in result.findings]


def test_warm_run_gives_the_same_findings_without_analysing(tree: Path) -> None:
    cold = lint(tree)
    assert cold.analyzed == 5  # four files, and helpers.py again with its extra graph roots
    assert [(name, code) for name, _, code, _ in summary(cold)] == [("caller.py", "TFC001"), ("helpers.py", "TFC001")]
    warm = lint(tree)
    assert warm.analyzed == 0
    assert summary(warm) == summary(cold) and warm.lines == cold.lines and warm.files == cold.files


def test_warm_run_does_not_read_unchanged_files(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cold = lint(tree)
    read: list[Path] = []
    original = runner.read_file
    monkeypatch.setattr(runner, "read_file", lambda path, display: read.append(path) or original(path, display))
    assert summary(lint(tree)) == summary(cold)
    assert read == []


def test_one_changed_file_is_the_only_one_analysed(tree: Path) -> None:
    lint(tree)
    (tree / "pkg/plain.py").write_text(PLAIN + "\ndef more():\n    return 2\n")
    assert lint(tree).analyzed == 1
    (tree / "pkg/caller.py").write_text(CALLER.replace('print("step")', "pass"))
    result = lint(tree)
    assert [(name, code) for name, _, code, _ in summary(result)] == [("helpers.py", "TFC001")]
    assert result.analyzed == 1  # helpers.py keeps the same roots, so its entry still holds


def test_cross_file_facts_follow_a_change_in_the_caller(tree: Path) -> None:
    lint(tree)
    (tree / "pkg/caller.py").write_text("import tensorflow as tf\n\n@tf.function\ndef step(x):\n    return x\n")
    assert summary(lint(tree)) == []  # helpers.py is no longer graph code: its cached finding is not reused


def _entries(root: Path) -> list[Path]:
    return sorted(p for p in (root / "cache").rglob("*.json") if p.name != "stat.json")


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "empty", "swap", "bad_types"])
def test_damaged_entries_are_rebuilt_not_trusted(tree: Path, damage: str) -> None:
    cold = lint(tree)
    entries = _entries(tree)
    for i, entry in enumerate(entries):
        data = entry.read_bytes()
        head, _, body = data.partition(b"\n\n")
        if damage == "truncate":
            entry.write_bytes(data[: len(data) // 2])
        elif damage == "flip":
            entry.write_bytes(data.replace(b'"lines":', b'"lines":9'))
        elif damage == "garbage":
            entry.write_bytes(os.urandom(64))
        elif damage == "empty":
            entry.write_bytes(b"")
        elif damage == "swap":  # a whole, valid entry of another file in this file's place
            entry.write_bytes(entries[(i + 1) % len(entries)].read_bytes())
        elif damage == "bad_types":  # well-formed and correctly summed, but not findings
            bad = json.dumps({"lines": 1, "findings": [{"path": 3}], "suppressed": [], "external_calls": []}).encode()
            key = entry.stem
            entry.write_bytes(cache_module._header(key, bad) + b"\n\n" + bad)
    again = lint(tree)
    assert summary(again) == summary(cold) and again.lines == cold.lines
    assert again.analyzed == cold.analyzed
    assert lint(tree).analyzed == 0  # rebuilt


@pytest.mark.parametrize("content", [b"", b"{", b"[]", b'{"x": 1}', b'{"/no/such": [[1, 2], "sha"]}'])
def test_a_damaged_stat_manifest_only_costs_reading(tree: Path, content: bytes) -> None:
    cold = lint(tree)
    (tree / "cache/lint/v1/stat.json").write_bytes(content)
    warm = lint(tree)
    assert summary(warm) == summary(cold) and warm.analyzed == 0


def test_config_and_rule_selection_are_part_of_the_key(tree: Path) -> None:
    lint(tree)
    config = Config(root=tree, select=("TFC000",))
    result = lint_paths([tree / "pkg"], config, jobs=1, cache_dir=tree / "cache")
    assert result.findings == [] and result.analyzed == 5


def test_editing_a_rule_or_the_engine_changes_the_run_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "fake_rules"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tfc999.py").write_text("CODE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(cache_module, "_CODE_PACKAGES", ("fake_rules",))
    before = run_key(Config())
    assert run_key(Config()) == before
    (package / "tfc999.py").write_text("CODE = 2\n")
    assert run_key(Config()) != before


def test_an_unwritable_cache_folder_only_costs_speed(tree: Path) -> None:
    (tree / "cache").write_text("a file where the cache folder should be")
    first, second = lint(tree), lint(tree)
    assert summary(first) == summary(second) != [] and second.analyzed == 5


def test_concurrent_writers_never_expose_a_partial_entry(tmp_path: Path) -> None:
    cache = LintCache(tmp_path, "k" * 32)
    payloads = [{"lines": n, "findings": [], "suppressed": [], "external_calls": [["m.f", "g", n]] * 200}
                for n in range(1, 6)]
    seen: list[object] = []
    stop = threading.Event()

    def write() -> None:
        while not stop.is_set():
            for payload in payloads:
                cache.store("e" * 64, payload)

    def read() -> None:
        for _ in range(2000):
            seen.append(cache.load("e" * 64))

    writers = [threading.Thread(target=write) for _ in range(3)]
    for thread in writers:
        thread.start()
    read()
    stop.set()
    for thread in writers:
        thread.join()
    assert all(entry is None or entry in payloads for entry in seen)
    assert any(entry in payloads for entry in seen)


def test_two_cli_runs_at_once_on_one_tree_agree(tree: Path) -> None:
    for i in range(30):
        (tree / f"pkg/mod{i}.py").write_text(CALLER.replace("step", f"step{i}"))
    command = [sys.executable, "-m", "tfcheck", "check", "--format", "json", "--exit-zero", "pkg"]
    expected = subprocess.run([*command, "--no-cache"], cwd=tree, capture_output=True, text=True, check=True).stdout
    for _ in range(2):  # the first round races on an empty cache, the second on a full one
        runs = [subprocess.Popen([*command, "--cache-dir", "shared"], cwd=tree, stdout=subprocess.PIPE, text=True)
                for _ in range(2)]
        outputs = [run.communicate()[0] for run in runs]
        assert [run.returncode for run in runs] == [0, 0]
        assert outputs == [expected, expected]
    assert json.loads(expected)


def test_cli_cache_options(tree: Path, run_cli) -> None:
    assert run_cli(tree, "check", "--no-cache", "pkg").exit_code == 1
    assert not (tree / ".tfcheck_cache").exists()
    assert run_cli(tree, "check", "--cache-dir", "elsewhere", "pkg").exit_code == 1
    assert (tree / "elsewhere/.gitignore").read_text().splitlines()[-1] == "*"
    assert run_cli(tree, "check", "pkg").exit_code == 1
    assert (tree / ".tfcheck_cache/lint/v1/stat.json").is_file()
