"""The project pass (tfcheck/project.py): roots that graph code in one file gives functions of another."""

from __future__ import annotations

import json
from pathlib import Path

from tfcheck.findings import FileResult
from tfcheck.jobs import FileJob
from tfcheck.project import ProjectFacts, analyze_project


def job(module: str, display: str | None = None) -> FileJob:
    display = display or module.replace(".", "/") + ".py"
    return FileJob(Path(display), display, display, module, False)


def test_a_call_roots_the_function_of_the_longest_module_of_the_run() -> None:
    roots = ProjectFacts([job("pkg"), job("pkg.models"), job("pkg.models.dense")])
    calls = [("pkg.models.dense.Dense.call", "step", 3), ("pkg.models.build", "step", 4),
             ("numpy.add", "step", 5), ("other.helper", "step", 6)]
    changed = roots.absorb([FileResult("train.py", external_calls=calls)])
    assert [(j.module, j.extra_roots) for j in changed] == [
        ("pkg.models", (("build", "called from graph code in step (train.py:4)"),)),
        ("pkg.models.dense", (("Dense.call", "called from graph code in step (train.py:3)"),)),
    ]


def test_the_first_call_names_the_reason_and_a_known_root_changes_nothing() -> None:
    roots = ProjectFacts([job("pkg.util")])
    first = FileResult("a.py", external_calls=[("pkg.util.helper", "f", 1)])
    second = FileResult("b.py", external_calls=[("pkg.util.helper", "g", 2)])
    [changed] = roots.absorb([first, second])
    assert changed.extra_roots == (("helper", "called from graph code in f (a.py:1)"),)
    assert roots.absorb([second]) == []


def test_a_module_name_shared_by_two_files_resolves_to_the_first() -> None:
    roots = ProjectFacts([job("train", "a/train.py"), job("train", "b/train.py")])
    [changed] = roots.absorb([FileResult("main.py", external_calls=[("train.step", "main", 1)])])
    assert changed.display == "a/train.py"


def test_a_module_name_shared_by_two_files_resolves_to_the_callers_folder_first() -> None:
    """`import utils` in a script resolves to the `utils.py` beside it, as `sys.path[0]` makes it
    (google/uncertainty-baselines has ten script folders with a `utils.py` each)."""
    roots = ProjectFacts([job("utils", "a/utils.py"), job("utils", "b/utils.py")])
    [changed] = roots.absorb([FileResult("b/train.py", external_calls=[("utils.step", "main", 1)])])
    assert changed.display == "b/utils.py"


def test_an_argument_that_reaches_the_graph_in_the_callee_is_given_back_to_the_caller() -> None:
    facts = ProjectFacts([job("train", "x/train.py"), job("utils", "x/utils.py")])
    caller = FileResult("x/train.py", external_calls=[("utils.update", "step", 3)],
                        asked_arguments=[("utils.update", "eval_time"), ("utils.update", "#1")])
    [callee_job] = facts.absorb([caller])
    assert callee_job.extra_roots == (("update", "called from graph code in step (x/train.py:3)"),)
    callee = FileResult("x/utils.py", parameter_sinks=[("update", "eval_time"), ("update", "#0")])
    [again] = facts.absorb([callee])
    assert (again.display, again.reaching_arguments) == ("x/train.py", (("utils.update", "eval_time"),))
    assert facts.absorb([callee]) == []  # settled


def test_a_clock_read_passed_to_another_files_metric_helper_is_reported(project, run_cli) -> None:
    """google/uncertainty-baselines 163351d baselines/toxic_comments/deterministic.py:323-357 and
    utils.py:870-931, cut down: the eval time measured while tracing reaches a metric in utils.py."""
    root = project({
        "x/utils.py": "import tensorflow as tf\n\ndef make_update_fn(labels, eval_time=None):\n"
                      "    def update_fn(metrics):\n        metrics['acc'].update_state(labels)\n"
                      "        if eval_time:\n            metrics['eval_time'].update_state(eval_time)\n"
                      "    return update_fn\n\ndef log_fn(labels, elapsed=None):\n    print('took', elapsed)\n"
                      "    return labels\n",
        "x/train.py": "import time\nimport tensorflow as tf\nimport utils\nmetrics = {}\n\n@tf.function\n"
                      "def test_step(labels):\n    start = time.time()\n    elapsed = time.time() - start\n"
                      "    utils.make_update_fn(labels, eval_time=elapsed)(metrics)\n"
                      "    utils.log_fn(labels, time.time())\n",
    })
    result = run_cli(root, "check", "--no-cache", "--format", "json", ".")
    found = [(f["path"], f["line"], f["code"]) for f in json.loads(result.stdout) if f["code"] == "TFC010"]
    assert found == [("x/train.py", 8, "TFC010"), ("x/train.py", 9, "TFC010")]


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


def test_a_module_named_by_its_ending_resolves_to_the_one_module_that_ends_so() -> None:
    """A script run from a subfolder imports `tf2.efficientdet_keras` for the run's
    `efficientdet.tf2.efficientdet_keras` (google/automl efficientdet/tf2/train_lib.py)."""
    roots = ProjectFacts([job("efficientdet.tf2.efficientdet_keras"), job("other.tf2.anchors")])
    [changed] = roots.absorb([FileResult("train.py", external_calls=[("tf2.efficientdet_keras.build", "step", 1)])])
    assert changed.module == "efficientdet.tf2.efficientdet_keras"
    assert ProjectFacts([job("a.tf2.x"), job("b.tf2.x")]).absorb(
        [FileResult("t.py", external_calls=[("tf2.x.f", "s", 1)])]) == []  # two endings: not known


def test_a_class_built_on_another_files_model_gets_its_kind_once() -> None:
    facts = ProjectFacts([job("pkg.base"), job("pkg.train")])
    base = FileResult("pkg/base.py", class_kinds=[("pkg.base.Net", "model")])
    train = FileResult("pkg/train.py", foreign_bases=["pkg.base.Net", "abc.ABC"])
    [changed] = facts.absorb([base, train])
    assert (changed.module, changed.foreign_kinds) == ("pkg.train", (("pkg.base.Net", "model"),))
    again = FileResult("pkg/train.py", class_kinds=[("pkg.train.NetTrain", "model")], foreign_bases=["pkg.base.Net"])
    assert facts.absorb([again]) == []  # settled: the same bases give the same kinds


def test_train_step_of_a_subclass_of_another_files_model_is_graph_code(project, run_cli) -> None:
    root = project({
        "pkg/__init__.py": "",
        "pkg/base.py": "import tensorflow as tf\nclass Net(tf.keras.Model):\n    def call(self, x):\n        return x\n",
        "pkg/train.py": "import tensorflow as tf\nfrom pkg import base\nclass NetTrain(base.Net):\n"
                        "    def train_step(self, data):\n        v = tf.Variable(1.0)\n        return {'v': v}\n",
    })
    result = run_cli(root, "check", "--format", "json", "--no-cache", ".")
    assert [(f["path"], f["line"], f["code"]) for f in json.loads(result.stdout)] == [("pkg/train.py", 5, "TFC004")]
