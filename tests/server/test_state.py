"""The server's lint state without the protocol: a pass gives what `tfcheck check` gives on the same
text, an unchanged pass analyses nothing, a change re-analyses only what it affects, and a file that
stops parsing keeps its last good facts for the others."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tfcheck.config import load_config
from tfcheck.runner import Analyzer, lint_paths
from tfcheck.server import state
from tfcheck.server.documents import OpenDocument, source_bytes
from tfcheck.server.state import Projects

CALLER = """\
import tensorflow as tf

import helpers


@tf.function
def step(x):
    return helpers.scale(x)
"""
HELPERS = """\
import random

import tensorflow as tf


def scale(x):
    assert tf.reduce_all(x > 0)
    return x * random.random()
"""
OTHER = """\
import tensorflow as tf


@tf.function
def other(x):
    assert tf.reduce_all(x > 0)
    return x
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name, text in {"a.py": CALLER, "helpers.py": HELPERS, "other.py": OTHER}.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "pyproject.toml").write_text("[tool.tfcheck]\n")
    return tmp_path


def document(folder: Path, name: str, text: str | None = None) -> OpenDocument:
    path = folder / name
    return OpenDocument(path.as_uri(), path, 1, path.read_text() if text is None else text)


@pytest.fixture
def analyses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files each pass analyses (open documents, and files read from disk)."""
    seen: list[str] = []
    analyze, run = state.analyze, Analyzer.run

    def counted_analyze(job, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(job.path.name)
        return analyze(job, *args, **kwargs)

    def counted_run(self, jobs):  # type: ignore[no-untyped-def]
        seen.extend(job.path.name for job in jobs)
        return run(self, jobs)

    monkeypatch.setattr(state, "analyze", counted_analyze)
    monkeypatch.setattr(Analyzer, "run", counted_run)
    return seen


def codes_by_file(projects: Projects, documents: list[OpenDocument]) -> dict[str, list[str]]:
    return {linted.document.path.name: [f.code for f in linted.findings] for linted in projects.lint(documents)}


def test_each_pass_reports_what_check_reports_on_the_same_text(folder: Path) -> None:
    """Edited documents, pass after pass on one warm state, give what `tfcheck check` gives once the
    edits are on disk (roots gained, lost and gained again)."""
    projects = Projects([folder])
    eager = CALLER.replace("@tf.function\n", "")
    for edited in ({"a.py": CALLER.replace("helpers.scale(x)", "helpers.scale(x) + 1"), "other.py": eager},
                   {"a.py": eager, "other.py": OTHER}, {"a.py": CALLER, "other.py": OTHER + "\n"}):
        documents = [document(folder, name, text) for name, text in edited.items()] + [document(folder, "helpers.py")]
        linted = {outcome.document.path.name: outcome.findings for outcome in projects.lint(documents)}
        for name, text in edited.items():
            (folder / name).write_text(text)
        expected = lint_paths([folder], load_config(folder), jobs=1).findings
        assert sorted((f for findings in linted.values() for f in findings), key=lambda f: f.sort_key) == expected
        assert bool(linted["helpers.py"]) is (edited["a.py"] != eager)


def test_an_unchanged_pass_analyses_nothing_and_a_change_only_what_it_affects(
        folder: Path, analyses: list[str]) -> None:
    projects = Projects([folder])
    documents = [document(folder, "a.py"), document(folder, "helpers.py")]
    assert codes_by_file(projects, documents) == {"a.py": [], "helpers.py": ["TFC008", "TFC010"]}
    assert sorted(analyses) == ["a.py", "helpers.py", "helpers.py", "other.py"]  # helpers again with its root
    analyses.clear()
    projects.lint(documents)
    assert analyses == ["helpers.py"]  # from now on its first round (without its root) is a summary
    analyses.clear()
    projects.lint(documents)
    assert analyses == []
    documents[0] = document(folder, "a.py", CALLER + "# a comment\n")
    projects.lint(documents)
    assert analyses == ["a.py"]  # helpers' job (its roots) did not change
    analyses.clear()
    documents[0] = document(folder, "a.py", CALLER.replace("@tf.function\n", ""))
    assert codes_by_file(projects, documents)["helpers.py"] == []
    assert analyses == ["a.py", "helpers.py"]  # helpers lost its root: its first round in full this time


def test_a_file_that_stops_parsing_keeps_its_last_good_facts_for_the_others(folder: Path) -> None:
    projects = Projects([folder])
    documents = [document(folder, "a.py"), document(folder, "helpers.py")]
    projects.lint(documents)
    documents[0] = document(folder, "a.py", CALLER.replace("def step(x):", "def step(x:"))
    assert codes_by_file(projects, documents) == {"a.py": ["TFC000"], "helpers.py": ["TFC008", "TFC010"]}


def test_files_changed_on_disk_are_read_again_when_said_or_seen_at_a_save(folder: Path) -> None:
    projects = Projects([folder])
    documents = [document(folder, "helpers.py")]
    assert codes_by_file(projects, documents)["helpers.py"] == ["TFC008", "TFC010"]
    (folder / "a.py").write_text(CALLER.replace("@tf.function\n", ""))
    os.utime(folder / "a.py", ns=(0, 0))  # a stat that differs however fast the file system's clock
    assert codes_by_file(projects, documents)["helpers.py"] == ["TFC008", "TFC010"]  # not known yet
    projects.refresh_disk()
    assert codes_by_file(projects, documents)["helpers.py"] == []
    (folder / "b.py").write_text(CALLER)
    projects.files_changed([folder / "b.py"], created_or_deleted=True)
    assert codes_by_file(projects, documents)["helpers.py"] == ["TFC008", "TFC010"]


def test_an_excluded_document_is_not_linted_and_a_broken_configuration_keeps_the_last_good(folder: Path) -> None:
    projects = Projects([folder])
    documents = [document(folder, "other.py")]
    assert codes_by_file(projects, documents) == {"other.py": ["TFC008"]}
    (folder / "pyproject.toml").write_text('[tool.tfcheck]\nexclude = ["other.py"]\n')
    projects.reload_configs()
    [outcome] = projects.lint(documents)
    assert outcome.findings == [] and outcome.project is None
    (folder / "pyproject.toml").write_text('[tool.tfcheck]\nselect = ["BOGUS"]\n')
    projects.reload_configs()
    assert codes_by_file(projects, documents) == {"other.py": []}  # still the exclude
    assert "BOGUS" in projects.errors[folder]


def test_a_file_outside_every_folder_is_linted_alone(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    elsewhere = tmp_path_factory.mktemp("loose") / "loose.py"
    elsewhere.write_text(OTHER)
    assert codes_by_file(Projects([folder]), [document(elsewhere.parent, elsewhere.name)]) == {"loose.py": ["TFC008"]}


def test_a_coding_line_decides_the_bytes_the_engine_reads() -> None:
    text = "# -*- coding: latin-1 -*-\nname = 'café'\n"
    assert source_bytes(text) == text.encode("latin-1")
    assert source_bytes("x = 'café'\n") == "x = 'café'\n".encode()
    assert source_bytes("# coding: nonsense\n") == b"# coding: nonsense\n"  # the engine says what is wrong


def test_relint_keeps_the_roots_other_files_give(folder: Path) -> None:
    projects = Projects([folder])
    helpers = document(folder, "helpers.py")
    [outcome] = projects.lint([helpers])
    assert outcome.project is not None
    relint: Callable[[str], list] = outcome.project.relint(helpers)  # type: ignore[type-arg]
    assert [f.code for f in relint(HELPERS + "\n")] == ["TFC008", "TFC010"]
