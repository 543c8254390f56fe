"""The project pass (tfcheck/project.py): roots that graph code in one file gives functions of another."""

from __future__ import annotations

import json
from pathlib import Path

from tfcheck.findings import FileResult
from tfcheck.jobs import FileJob
from tfcheck.project import ProjectRoots, analyze_project


def job(module: str, display: str | None = None) -> FileJob:
    display = display or module.replace(".", "/") + ".py"
    return FileJob(Path(display), display, display, module, False)


def test_a_call_roots_the_function_of_the_longest_module_of_the_run() -> None:
    roots = ProjectRoots([job("pkg"), job("pkg.models"), job("pkg.models.dense")])
    calls = [("pkg.models.dense.Dense.call", "step", 3), ("pkg.models.build", "step", 4),
             ("numpy.add", "step", 5), ("other.helper", "step", 6)]
    changed = roots.add_calls([FileResult("train.py", external_calls=calls)])
    assert [(j.module, j.extra_roots) for j in changed] == [
        ("pkg.models", (("build", "called from graph code in step (train.py:4)"),)),
        ("pkg.models.dense", (("Dense.call", "called from graph code in step (train.py:3)"),)),
    ]


def test_the_first_call_names_the_reason_and_a_known_root_changes_nothing() -> None:
    roots = ProjectRoots([job("pkg.util")])
    first = FileResult("a.py", external_calls=[("pkg.util.helper", "f", 1)])
    second = FileResult("b.py", external_calls=[("pkg.util.helper", "g", 2)])
    [changed] = roots.add_calls([first, second])
    assert changed.extra_roots == (("helper", "called from graph code in f (a.py:1)"),)
    assert roots.add_calls([second]) == []


def test_a_module_name_shared_by_two_files_resolves_to_the_first() -> None:
    roots = ProjectRoots([job("train", "a/train.py"), job("train", "b/train.py")])
    [changed] = roots.add_calls([FileResult("main.py", external_calls=[("train.step", "main", 1)])])
    assert changed.display == "a/train.py"


def test_a_file_is_analysed_again_in_each_round_it_gains_roots_and_keeps_them_all() -> None:
    """a.step -> b.first -> c.middle -> b.last: b gains roots in two rounds; its last analysis has both."""
    calls = {("pkg.a", ()): [("pkg.b.first", "step", 6)],
             ("pkg.b", ()): [],
             ("pkg.c", ()): [],
             ("pkg.b", ("first",)): [("pkg.c.middle", "first", 4)],
             ("pkg.c", ("middle",)): [("pkg.b.last", "middle", 4)],
             ("pkg.b", ("first", "last")): [("pkg.c.middle", "first", 4)]}
    asked: list[list[str]] = []

    def analyze_many(jobs: list[FileJob]) -> list[FileResult]:
        asked.append([j.module for j in jobs])
        return [FileResult(j.display, external_calls=calls[j.module, tuple(f for f, _ in j.extra_roots)])
                for j in jobs]

    results = analyze_project([job("pkg.a"), job("pkg.b"), job("pkg.c")], analyze_many)
    assert asked == [["pkg.a", "pkg.b", "pkg.c"], ["pkg.b"], ["pkg.c"], ["pkg.b"]]
    assert list(results) == ["pkg/a.py", "pkg/b.py", "pkg/c.py"]
    assert results["pkg/b.py"].external_calls == [("pkg.c.middle", "first", 4)]


def test_a_chain_back_into_a_file_is_followed_to_the_end(project, run_cli) -> None:
    root = project({
        "pkg/__init__.py": "",
        "pkg/a.py": "import tensorflow as tf\nfrom pkg import b\n\n@tf.function\ndef step(x):\n    return b.first(x)\n",
        "pkg/b.py": "from pkg import c\n\ndef first(x):\n    return c.middle(x)\n\ndef last(x):\n    print(x)\n"
                    "    return x\n",
        "pkg/c.py": "from pkg import b\n\ndef middle(x):\n    return b.last(x)\n",
    })
    result = run_cli(root, "check", "--no-cache", "--format", "json", ".")
    [finding] = json.loads(result.stdout)
    assert (finding["path"], finding["line"], finding["code"]) == ("pkg/b.py", 7, "TFC001")
    assert finding["message"].endswith("[`last` is graph code: called from graph code in middle (pkg/c.py:4)]")
