"""TFC014: `tf.config.run_functions_eagerly(True)` that is never switched back off."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

_SWITCHES = frozenset({"tensorflow.config.run_functions_eagerly",
                       "tensorflow.config.experimental_run_functions_eagerly"})


class EagerModeLeftOn(Rule):
    """`tf.config.run_functions_eagerly(True)` left on makes every tf.function run eagerly.

    ## What it does
    Finds calls of `tf.config.run_functions_eagerly(True)` (and the older
    `tf.config.experimental_run_functions_eagerly(True)`) in a function or module that does not switch
    it back off later in the same scope, with `run_functions_eagerly(False)` or by restoring the
    previous setting (`run_functions_eagerly(previous)`). A switch that depends on a run-time option
    (`run_functions_eagerly(args.eager)`, or under `if args.eager:`) is the user's choice and is not
    reported. In test files, only a switch at module level is reported (not in a `conftest.py`, and not
    when the file switches it back off anywhere): a test or `setUp` that turns eager mode on does so on
    purpose, but pytest imports every test module while collecting, before any test runs, so a module-level
    switch makes every test of the session, in every file, run its tf.functions eagerly.

    ## Why is this bad
    The switch is global. Once on, every tf.function in the process runs as plain Python: no graph,
    no Grappler optimisations, no XLA, often several times slower, and Python side effects run on every
    call, hiding the very bugs that appear in graph mode. A debugging aid left in library or training
    code silently slows everything down. The severity is WARNING: results are right, just slow.

    ## Example
    ```python
    tf.config.run_functions_eagerly(True)
    result = train(dataset)
    ```

    ## Use instead
    ```python
    tf.config.run_functions_eagerly(True)
    try:
        result = train(dataset)
    finally:
        tf.config.run_functions_eagerly(False)
    ```
    """

    code = "TFC014"
    name = "eager-mode-left-on"
    severity = Severity.WARNING
    must_flag = (
        "import tensorflow as tf\ntf.config.run_functions_eagerly(True)\n",
        "import tensorflow as tf\ndef debug(ds):\n    tf.config.run_functions_eagerly(True)\n    return list(ds)\n",
        "from tensorflow import config\nconfig.experimental_run_functions_eagerly(True)\n",
        # Switched off in another function is not the same scope.
        "import tensorflow as tf\ndef on():\n    tf.config.run_functions_eagerly(True)\n"
        "def off():\n    tf.config.run_functions_eagerly(False)\n",
        # Switched off before, not after.
        "import tensorflow as tf\ntf.config.run_functions_eagerly(False)\ntf.config.run_functions_eagerly(run_eagerly=True)\n",
    )
    must_not_flag = (
        # The article: on before the function, off after it.
        "import tensorflow as tf\ntf.config.run_functions_eagerly(True)\n@tf.function\ndef square(x):\n"
        "    return x * x\nsquare(tf.constant(2.0))\ntf.config.run_functions_eagerly(False)\n",
        "import tensorflow as tf\ndef debug(f, x):\n    previous = tf.config.functions_run_eagerly()\n"
        "    tf.config.run_functions_eagerly(True)\n    try:\n        return f(x)\n    finally:\n"
        "        tf.config.run_functions_eagerly(previous)\n",
        # A user's choice, not a literal True (OpenNMT-tf's command line: `if args.eager_execution:`).
        "import tensorflow as tf\ndef main(args):\n    tf.config.run_functions_eagerly(args.eager)\n",
        "import tensorflow as tf\ndef main(args):\n    if args.eager_execution:\n"
        "        tf.config.run_functions_eagerly(True)\n",
        "import tensorflow as tf\ntf.config.run_functions_eagerly(False)\n",
        # TF1 graph mode for the whole process: the switch does nothing.
        "import tensorflow as tf\ntf.compat.v1.disable_eager_execution()\ntf.config.run_functions_eagerly(True)\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        if "functions_eagerly" not in facts.source.text:
            return  # most files never mention the switch
        if any(facts.resolve(call.func) in _GRAPH_MODE for call, _ in facts.calls):
            return  # TF1 graph mode: the switch has no effect (google-research/meta-dataset's reparameterizable_base_test.py)
        by_scope: dict[object, list[ast.Call]] = {}
        for call, function in facts.calls:
            if facts.resolve(call.func) in _SWITCHES and not _under_option(facts, call):
                by_scope.setdefault(function, []).append(call)
        if facts.is_test_file:
            # Tests switch eager mode on deliberately, and switch it back; only the module's own switch, which
            # runs when pytest collects the file, outlives its tests.
            if _is_conftest(facts.path) or any(not _turns_on(call) for calls in by_scope.values() for call in calls):
                return
            by_scope = {None: by_scope.get(None, [])}
        for calls in by_scope.values():
            for index, call in enumerate(calls):
                if _turns_on(call) and not any(not _turns_on(later) for later in calls[index + 1:]):
                    yield self.finding(facts, call, _TEST_MESSAGE if facts.is_test_file else _MESSAGE)


# Calls that turn the whole process to TensorFlow 1 graph mode, where run_functions_eagerly does nothing.
_GRAPH_MODE = frozenset({"tensorflow.disable_eager_execution", "tensorflow.disable_v2_behavior"})  # canonical: `tf.compat.v1.` dropped
_MESSAGE = ("`run_functions_eagerly(True)` is never switched back off in this scope: every tf.function in the "
            "process runs eagerly (slowly); restore it with run_functions_eagerly(False) in a `finally:`")
_TEST_MESSAGE = ("`run_functions_eagerly(True)` at module level of a test file runs when pytest imports it to "
                 "collect its tests, before any test runs: every tf.function of the whole test session then runs "
                 "eagerly, and graph mode is never tested; switch it on in a fixture or `setUp` and back off after")


def _is_conftest(path: str) -> bool:
    """pytest's `conftest.py`: configures a test session on purpose."""
    return path.replace("\\", "/").rsplit("/", 1)[-1] == "conftest.py"


def _under_option(facts: FileFacts, call: ast.Call) -> bool:
    """Inside an `if` (in its own function) on something other than a constant: a run-time option."""
    for ancestor in facts.ancestors(call):
        if isinstance(ancestor, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
        if isinstance(ancestor, (ast.If, ast.IfExp)) and not isinstance(ancestor.test, ast.Constant):
            return True
    return False


def _turns_on(call: ast.Call) -> bool:
    """A literal `True` argument (positional or `run_eagerly=True`)."""
    arguments = list(call.args[:1]) + [k.value for k in call.keywords if k.arg == "run_eagerly"]
    return any(isinstance(arg, ast.Constant) and arg.value is True for arg in arguments)
