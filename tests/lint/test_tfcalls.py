"""The engine facts behind TFC004/005/007/012/017: tf.function call sites, Python data, sure graph loops."""

from __future__ import annotations

import ast

from tfcheck.engine import analyze_source
from tfcheck.engine.facts import FileFacts
from tfcheck.engine.loops import surely_graph_loop
from tfcheck.engine.pydata import is_python_iterator, python_data


def facts_of(code: str) -> FileFacts:
    return analyze_source("example.py", "import numpy as np\nimport tensorflow as tf\n" + code, "example")


def bound(facts: FileFacts) -> list[tuple[str, dict[str, str]]]:
    """Each tf.function call as (function name, {parameter: argument source})."""
    return [(c.function.name, {p: ast.unparse(a) for p, a in c.arguments.items()}) for c in facts.tf_function_calls]


def test_calls_bind_positional_and_keyword_arguments_and_skip_self() -> None:
    facts = facts_of(
        "@tf.function\ndef f(a, b, c=1):\n    return a\nf(1, c=3)\n"
        "class T:\n    @tf.function\n    def step(self, x):\n        return x\n    def run(self):\n"
        "        self.step(5)\n"
    )
    assert bound(facts) == [("f", {"a": "1", "c": "3"}), ("step", {"x": "5"})]


def test_wrapped_functions_share_one_identity_per_tf_function_object() -> None:
    facts = facts_of(
        "def g(x):\n    return x\nf1 = tf.function(g)\nf2 = tf.function(g, input_signature=[])\n"
        "f1(1)\nf1(2)\nf2(3)\ng(4)\n"
    )
    calls = facts.tf_function_calls
    assert [c.has_signature for c in calls] == [False, False, True]  # g(4) is a plain call
    assert calls[0].identity is calls[1].identity is not calls[2].identity


def test_forwarding_helpers_and_concrete_functions_count_as_calls() -> None:
    facts = facts_of(
        "def measure(fn, *args):\n    return fn.get_concrete_function(*args)\n"
        "@tf.function\ndef train(data):\n    return data\nmeasure(train, [1, 2])\ntrain.get_concrete_function(7)\n"
    )
    assert bound(facts) == [("train", {"data": "[1, 2]"}), ("train", {"data": "7"})]


def test_python_data_is_narrow() -> None:
    facts = facts_of("BIG = np.zeros(1000)\nSMALL = np.array([1, 2])\nRECORDS = [(1, 2)] * 3\nSCALES = [0.5, 1.0]\n")
    names = {node.id: node for node in ast.walk(facts.source.tree) if isinstance(node, ast.Name)}
    assert python_data(facts, names["BIG"]) == "a NumPy array"
    assert python_data(facts, names["RECORDS"]) == "the module-level list `RECORDS`"
    assert python_data(facts, names["SMALL"]) is None and python_data(facts, names["SCALES"]) is None


def test_python_iterators_exclude_dataset_iterators_and_unknown_values() -> None:
    facts = facts_of("a = iter([1, 2])\nb = iter(tf.data.Dataset.range(3))\nc = iter(make())\nd = zip([1], [2])\n")
    values = {t.id: stmt.value for stmt in facts.source.tree.body if isinstance(stmt, ast.Assign)
              for t in stmt.targets if isinstance(t, ast.Name)}
    assert [is_python_iterator(facts, values[n]) for n in "abcd"] == [True, False, False, True]


def test_sure_graph_loops_need_direct_evidence() -> None:
    facts = facts_of(
        "from tensorflow.python.util import nest\n@tf.function\ndef f(x):\n"
        "    for i in tf.range(3):\n        pass\n    for o in nest.flatten(x):\n        pass\n"
        "    for r in tf.unstack(x):\n        pass\n    j = tf.constant(0)\n    while j < 3:\n        j += 1\n"
    )
    loops = [n for n, _ in facts.graph_nodes(ast.For, ast.While)]
    assert [surely_graph_loop(facts, loop) for loop in sorted(loops, key=lambda n: n.lineno)] == \
        [True, False, False, True]
