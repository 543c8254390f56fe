"""Which functions AutoGraph gives up on (tfcheck.engine.autograph), cause by cause, as TensorFlow 2.21
decides it: autograph/core/unsupported_features_checker.py, pyct/parser.py, converters/directives.py.
Each refused form, given tensor control flow, was run in TensorFlow 2.21: AutoGraph warned and the
tensor `if`/`for` then raised (the rule TFC034's examples)."""

from __future__ import annotations

import textwrap

from tfcheck.engine import analyze_source

_SOURCE = textwrap.dedent("""
    import tensorflow as tf
    class Scaler(tf.Module):
        @tf.function
        def mangled_in_nested_def(self, x):
            def inner():
                return self.__scale
            return x
        @tf.function
        def dunder(self, x):
            return self.__class__
    @tf.function
    def nested_generator(x):
        def pairs(items):
            yield from items
        return x
    @tf.function
    def while_else(x):
        while x < 3:
            x += 1
        else:
            pass
        return x
    @tf.function
    def directive_after_statement(x):
        for i in tf.range(3):
            x += 1
            tf.autograph.experimental.set_loop_options(maximum_iterations=3)
        return x
    @tf.function
    def directive_outside_loop(x):
        tf.autograph.experimental.set_loop_options(maximum_iterations=3)
        return x
    @tf.function
    def directive_first_of_inner_loop(x):
        for i in tf.range(3):
            x += 1
            for j in tf.range(2):
                tf.autograph.experimental.set_loop_options(maximum_iterations=2)
                x += 1
        return x
    @tf.function
    def cond_lambdas(x):
        return tf.cond(tf.reduce_sum(x) > 1, lambda: x * 2 if tf.reduce_sum(x) > 5 else x, lambda: x)
    same = tf.data.Dataset.range(3).map(lambda x: x).map(lambda x: x + 1)
    different = tf.data.Dataset.range(3).map(lambda x: x).map(lambda y: y + 1)
    def not_converted(x):
        for i in x:
            pass
        else:
            pass
""")


def test_refusal_causes() -> None:
    facts = analyze_source("m.py", _SOURCE, "m")
    # the nested `inner` and `pairs` are never called, so AutoGraph never tries them; both lambdas of
    # line 45 share one key; the two of `cond_lambdas` are converted with it
    causes = {f"{info.qualname}:{info.lineno}": refusal.cause for info in facts.functions
              if (refusal := facts.autograph_refusal(info)) is not None}
    assert causes == {
        "Scaler.mangled_in_nested_def:5": "mangled names are not yet supported",
        "nested_generator:13": "generators are not supported",
        "while_else:18": "while/else statement not yet supported",
        "directive_after_statement:25": '"set_loop_options" must be the first statement in the loop block',
        "directive_outside_loop:31": '"set_loop_options" must be used inside a statement',
        "<lambda>:45": "could not parse the source code of <lambda>: found multiple definitions with identical "
                       "signatures at the location",
    }, causes
    converted = {info.qualname for info in facts.graph_functions if facts.autograph_converted(info)}
    assert {"Scaler.dunder", "directive_first_of_inner_loop", "cond_lambdas.<lambda>"} <= converted


def test_mixed_indentation_only_in_an_indented_function() -> None:
    spaces_in_tab_block = "import tensorflow as tf\nclass T(tf.Module):\n\t@tf.function\n\tdef f(self, x):\n\t    return x\n"
    tabs_only = "import tensorflow as tf\nclass T(tf.Module):\n\t@tf.function\n\tdef f(self, x):\n\t\treturn x\n"
    for source, expected in ((spaces_in_tab_block, "code mixing tabs and spaces for indentation is not allowed"),
                             (tabs_only, None)):
        facts = analyze_source("m.py", source, "m")
        (info,) = facts.functions
        refusal = facts.autograph_refusal(info)
        assert (refusal.cause if refusal else None) == expected
