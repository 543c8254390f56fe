"""Value kinds that follow the file's own functions: what a function returns (tuple elements through
unpacking) and what a constructor parameter holds (tfcheck.engine.values)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from tfcheck.engine import analyze_source


def kinds_of(code: str, name: str) -> set[str]:
    """The kinds of the last read of the name (or `self.` attribute) `name` in `code`."""
    facts = analyze_source("m.py", textwrap.dedent(code), "m")
    reads = [node for node in ast.walk(facts.source.tree)
             if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load)
             and facts.text(node) == name]
    assert reads, f"{name} is not read in the snippet"
    return facts.kinds(max(reads, key=lambda node: (node.lineno, node.col_offset)))


# sionna 0.19.2 fec/interleaving.py:153-194, cut down: a method returns two tensors, unpacked in `build`.
PERM = """
    import tensorflow as tf
    class Interleaver(tf.keras.layers.Layer):
        def _generate_perm_rc(self, n_seq):
            ind = tf.range(n_seq)
            perm_seq = tf.boolean_mask(ind, ind < n_seq)
            return perm_seq, {second}
        def build(self, input_shape):
            p, pi = self._generate_perm_rc(input_shape[-1])
            self._perm_seq = p
            self._perm_seq_inv = pi
            use(self._perm_seq, self._perm_seq_inv)
"""


def test_tuple_elements_of_a_method_are_followed_through_unpacking() -> None:
    code = PERM.format(second="tf.argsort(perm_seq)")
    assert kinds_of(code, "self._perm_seq") == {"tensor"}
    assert kinds_of(code, "self._perm_seq_inv") == {"tensor"}


def test_an_element_the_file_cannot_tell_stays_unknown() -> None:
    assert kinds_of(PERM.format(second="helper(perm_seq)"), "self._perm_seq_inv") == set()
    assert kinds_of(PERM.format(second="perm_seq, 3"), "self._perm_seq") == set()  # a 3-tuple, unpacked into 2


def test_what_a_function_returns() -> None:
    code = """
        import tensorflow as tf
        def make(x):
            return tf.square(x)
        def other(x):
            if x:
                return [x]
            return unknown(x)
        a = make(1)
        b = other(1)
        use(a, b)
    """
    assert kinds_of(code, "a") == {"tensor"}
    assert kinds_of(code, "b") == set()  # one `return` the file cannot tell


@pytest.mark.parametrize("decorator", ["@functools.lru_cache", "@contextlib.contextmanager", "@property"])
def test_a_decorator_that_may_change_the_return_leaves_it_unknown(decorator: str) -> None:
    code = f"""
        import contextlib, functools
        import tensorflow as tf
        {decorator}
        def make(x):
            return tf.square(x)
        a = make(1)
        use(a)
    """
    assert kinds_of(code, "a") == set()


def test_a_cycle_between_functions_is_unknown_whichever_is_asked_first() -> None:
    code = """
        import tensorflow as tf
        def a(n):
            return b(n - 1)
        def b(n):
            if n:
                return a(n)
            return tf.zeros([1])
        x = a(3)
        y = b(3)
        use(x, y)
    """
    assert kinds_of(code, "x") == set() and kinds_of(code, "y") == set()


def test_a_long_chain_of_calls_is_bounded() -> None:
    chain = "\n".join(f"def f{i}(x):\n    return f{i + 1}(x)" for i in range(3000))
    code = f"import tensorflow as tf\n{chain}\ndef f3000(x):\n    return tf.square(x)\nv = f0(1)\nuse(v)\n"
    facts = analyze_source("m.py", code, "m")
    last = max((n for n in ast.walk(facts.source.tree) if isinstance(n, ast.Name) and n.id == "v"),
               key=lambda n: n.lineno)
    assert facts.kinds(last) == set()  # deeper than the bound: unknown, and no RecursionError


# tf-models-official 2.20.0 official/nlp/modeling/layers/transformer_scaffold_test.py:51-68, cut down.
RECORDER = """
    import tensorflow as tf
    class Recorder(tf.keras.layers.Layer):
        def __init__(self, {params}, **kwargs):
            super().__init__(**kwargs)
            self.list = call_list
        def call(self, inputs):
            self.list.append(True)
            return inputs
    {rest}
"""
CONSTRUCTOR_CASES = {
    "positional": ("call_list", "layer = Recorder([])", {"list"}),
    "keyword": ("call_list", "layer = Recorder(call_list={})", {"dict"}),
    "dict display spread": ("call_list", "cfg = {'call_list': set()}\nlayer = Recorder(**cfg)", {"set"}),
    "default, no instantiation": ("call_list=[]", "", {"list"}),
    "default, not passed": ("call_list=[]", "layer = Recorder(name='r')", {"list"}),
    "subclass through super": ("call_list", "class Sub(Recorder):\n    def __init__(self):\n"
                               "        super().__init__(call_list=[])\nlayer = Sub()", {"list"}),
    "no evidence": ("call_list", "", set()),
    "disagreeing instantiations": ("call_list", "a = Recorder([])\nb = Recorder(None)", set()),
    "default against a passed value": ("call_list=[]", "a = Recorder()\nb = Recorder(make())", set()),
    "passed through *args": ("call_list", "def make(*args):\n    return Recorder(*args)\na = Recorder([])", set()),
    "passed through **kwargs": ("call_list", "def make(**kw):\n    return Recorder(**kw)\na = Recorder([])", set()),
    "a changed dict spread": ("call_list", "cfg = {'call_list': []}\ncfg['call_list'] = make()\n"
                              "layer = Recorder(**cfg)", set()),
}


@pytest.mark.parametrize("case", CONSTRUCTOR_CASES)
def test_what_a_constructor_parameter_holds(case: str) -> None:
    params, rest, expected = CONSTRUCTOR_CASES[case]
    code = RECORDER.format(params=params, rest=textwrap.indent(rest, "    ").lstrip())
    assert kinds_of(code, "self.list") == expected


def test_get_config_of_a_keras_layer_counts_unless_it_has_its_own_from_config() -> None:
    config = ("    def get_config(self):\n        config = super().get_config()\n"
              "        config['call_list'] = []\n        return config\n")
    code = textwrap.dedent(RECORDER.format(params="call_list", rest="")).rstrip() + "\n" + config
    assert kinds_of(code, "self.list") == {"list"}
    restore = "    @classmethod\n    def from_config(cls, config):\n        return cls(**config)\n"
    assert kinds_of(code + restore, "self.list") == set()
