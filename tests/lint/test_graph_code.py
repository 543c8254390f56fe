"""Which functions the engine treats as graph code: every spelling in the foundation issue."""

from __future__ import annotations

import json
import textwrap

import pytest

from tfcheck.engine import EngineSettings, analyze_source


def graph_names(code: str, settings: EngineSettings | None = None) -> set[str]:
    facts = analyze_source("m.py", textwrap.dedent(code), "m", settings)
    return {info.qualname for info in facts.graph_functions}


GRAPH = {
    "decorator": """
        import tensorflow as tf
        @tf.function
        def f(x): return x
    """,
    "decorator call": """
        import tensorflow as tf
        @tf.function(jit_compile=True, reduce_retracing=True)
        def f(x): return x
    """,
    "plain import": """
        import tensorflow
        @tensorflow.function
        def f(x): return x
    """,
    "from import": """
        from tensorflow import function
        @function
        def f(x): return x
    """,
    "from import alias": """
        from tensorflow import function as tff
        @tff()
        def f(x): return x
    """,
    "compat v2": """
        import tensorflow.compat.v2 as tf
        @tf.function
        def f(x): return x
    """,
    "internal def_function": """
        from tensorflow.python.eager import def_function
        @def_function.function
        def f(x): return x
    """,
    "method": """
        import tensorflow as tf
        class M(tf.Module):
            @tf.function
            def f(self, x): return x
    """,
    "tf.function(f)": """
        import tensorflow as tf
        def f(x): return x
        g = tf.function(f, input_signature=[tf.TensorSpec([None])])
    """,
    "tf.function(self.method)": """
        import tensorflow as tf
        class M:
            def __init__(self):
                self.g = tf.function(self.f)
            def f(self, x): return x
    """,
    "dataset map": """
        import tensorflow as tf
        def f(x): return x
        ds = tf.data.Dataset.range(10).map(f)
    """,
    "dataset filter keyword": """
        import tensorflow as tf
        def f(x): return x > 1
        ds = tf.data.Dataset.range(10)
        ds = ds.filter(predicate=f)
    """,
    "dataset flat_map interleave reduce": """
        import tensorflow as tf
        def f(x): return x
        ds = tf.data.Dataset.range(10).batch(2).flat_map(f)
    """,
    "map_fn": """
        import tensorflow as tf
        def f(x): return x
        y = tf.map_fn(f, tf.range(3))
    """,
    "while_loop body and cond": """
        import tensorflow as tf
        def f(i): return i < 3
        y = tf.while_loop(f, lambda i: i + 1, [0])
    """,
    "cond": """
        import tensorflow as tf
        def f(): return 1
        y = tf.cond(tf.constant(True), f, lambda: 2)
    """,
    "switch_case": """
        import tensorflow as tf
        def f(): return 1
        y = tf.switch_case(tf.constant(0), [f, lambda: 2])
    """,
    "vectorized_map": """
        import tensorflow as tf
        def f(x): return x
        y = tf.vectorized_map(f, tf.range(3))
    """,
    "keras train_step": """
        import keras
        class M(keras.Model):
            def train_step(self, data): return self.f(data)
            def f(self, data): return data
    """,
    "transitive": """
        import tensorflow as tf
        def f(x): return x
        @tf.function
        def g(x): return f(x)
    """,
    "transitive through self": """
        import tensorflow as tf
        class M(tf.keras.Model):
            def train_step(self, data):
                return self.f(data)
            def f(self, data): return data
    """,
    # TensorFlow's tutorial "Custom training with tf.distribute.Strategy" (distributed_train_step).
    "strategy.run in a tf.function": """
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
        def f(inputs): return inputs
        @tf.function
        def distributed_train_step(dataset_inputs):
            per_replica_losses = strategy.run(f, args=(dataset_inputs,))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)
    """,
    # tf-models-official's orbit trainers keep the strategy on self (orbit/standard_runner.py).
    "experimental_run_v2 on self.strategy, fn as keyword": """
        import tensorflow as tf
        class Trainer:
            def __init__(self):
                self.strategy = tf.distribute.get_strategy()
            @tf.function
            def train(self, x):
                return self.strategy.experimental_run_v2(fn=self.f, args=(x,))
            def f(self, x): return x
    """,
    "extended.call_for_each_replica": """
        import tensorflow as tf
        @tf.function
        def step(x):
            def f(y): return y
            return tf.distribute.get_strategy().extended.call_for_each_replica(f, args=(x,))
    """,
    # OpenNMT-tf's trainer: the strategy is a parameter, known by its name only (opennmt/training.py).
    "strategy parameter, by its name": """
        import tensorflow as tf
        def make(distribution_strategy):
            def f(x): return x
            @tf.function
            def step(x):
                return distribution_strategy.run(f, args=(x,))
            return step
    """,
    # tf-models-official's tests get the strategy from TensorFlow's test combinations as `distribution`
    # (official/nlp/modeling/models/t5_test.py).
    "distribution.run in a tf.function": """
        import tensorflow as tf
        def test_step(distribution, inputs):
            def f(x): return x
            @tf.function
            def step():
                return distribution.run(f, args=(inputs,))
            return step()
    """,
    "layer on a self attribute": """
        import keras
        class Encoder(keras.layers.Layer):
            def call(self, x): return self.f(x)
            def f(self, x): return x
        class Net(keras.Model):
            def __init__(self):
                super().__init__()
                self.encoder = Encoder()
            def train_step(self, data):
                return self.encoder(data)
    """,
    # keras.io "Customizing what happens in fit()": `y_pred = self(x, training=True)` in train_step.
    "self(x) in train_step": """
        import keras
        class M(keras.Model):
            def train_step(self, data):
                x, y = data
                return self(x, training=True)
            def call(self, x): return self.f(x)
            def f(self, x): return x
    """,
    "model called in a tf.function": """
        import tensorflow as tf
        class M(tf.keras.Model):
            def call(self, x): return self.f(x)
            def f(self, x): return x
        model = M()
        @tf.function
        def step(x):
            return model(x)
    """,
    "model.fit traces call": """
        import keras
        class M(keras.Model):
            def call(self, x): return self.f(x)
            def f(self, x): return x
        model = M()
        model.compile(optimizer="adam", loss="mse")
        model.fit(xs, ys)
    """,
    # tensorflow/tensorflow#40508: a custom loss calling `.numpy()` fails inside fit (Keras 3, TF 2.21).
    "loss passed to compile": """
        import keras
        def f(y_true, y_pred): return y_true - y_pred
        model = keras.Sequential([keras.layers.Dense(1)])
        model.compile(optimizer="adam", loss=f)
    """,
    "metrics list and loss dict passed to compile, run_eagerly=False": """
        import keras
        def f(y_true, y_pred): return y_true
        def build(model):
            model.compile("adam", {"out": f}, metrics=["mae", f], run_eagerly=False)
    """,
    "loss passed positionally to compile": """
        def f(y_true, y_pred): return y_true - y_pred
        model.compile("adam", f)
    """,
    "method of an object on a self attribute": """
        import tensorflow as tf
        class Runner:
            def f(self, x): return x
        class Net(tf.Module):
            def __init__(self):
                self.runner = Runner()
            @tf.function
            def __call__(self, x):
                return self.runner.f(x)
    """,
    "__call__ of a plain object called from graph code": """
        import tensorflow as tf
        class Scale:
            def __call__(self, x): return self.f(x)
            def f(self, x): return x * 2
        scale = Scale()
        @tf.function
        def step(x):
            return scale(x)
    """,
}


@pytest.mark.parametrize("code", GRAPH.values(), ids=GRAPH.keys())
def test_graph_code(code: str) -> None:
    # with `keras-call-is-graph = false`: Keras call reached from graph code is graph code all the same
    assert any(name.split(".")[-1] in ("f", "<lambda>")
               for name in graph_names(code, EngineSettings(keras_call_is_graph=False))), code


NOT_GRAPH = {
    "plain function": """
        import tensorflow as tf
        def f(x): return x
    """,
    "py_function target": """
        import tensorflow as tf
        def f(x): return x
        @tf.function
        def g(x): return tf.py_function(f, [x], tf.float32)
    """,
    "numpy_function target": """
        import tensorflow as tf
        def f(x): return x
        @tf.function
        def g(x): return tf.numpy_function(func=f, inp=[x], Tout=tf.float32)
    """,
    "called only under init_scope": """
        import tensorflow as tf
        def f(): return 1
        @tf.function
        def g(x):
            with tf.init_scope():
                f()
            return x
    """,
    "another library's function decorator": """
        import other
        @other.function
        def f(x): return x
    """,
    "map of a non-dataset": """
        def f(x): return x
        ys = list(map(f, [1, 2]))
        pool = Pool()
        pool.map(f, [1, 2])
    """,
    "strategy.run called eagerly": """
        import tensorflow as tf
        strategy = tf.distribute.MirroredStrategy()
        def f(x): return x
        def train(x):
            return strategy.run(f, args=(x,))
    """,
    ".run of something that is not a strategy": """
        import tensorflow as tf
        class Runner:
            pass
        runner = Runner()
        def f(x): return x
        @tf.function
        def step(x):
            return runner.run(f, args=(x,))
    """,
    "layer built but not called in graph code": """
        import keras
        class L(keras.layers.Layer):
            def call(self, x): return self.f(x)
            def f(self, x): return x
        @tf.function
        def step(x):
            layer = L()
            return x
    """,
    "model.fit on a library model": """
        import keras
        class L(keras.layers.Layer):
            def call(self, x): return self.f(x)
            def f(self, x): return x
        model = keras.Sequential([keras.layers.Dense(1)])
        model.fit(xs, ys)
    """,
    "loss passed to compile with run_eagerly=True": """
        import keras
        def f(y_true, y_pred): return y_true - y_pred
        model = keras.Sequential([keras.layers.Dense(1)])
        model.compile(optimizer="adam", loss=f, metrics=[f], run_eagerly=True)
    """,
    "run_eagerly from a flag: it may be true": """
        def f(y_true, y_pred): return y_true - y_pred
        model.compile(optimizer="adam", loss=f, run_eagerly=args.eager)
    """,
    "compile of a module, not a model": """
        import re
        def f(x): return x
        pattern = re.compile("a", f)
    """,
    "train_step of a non-model": """
        class Trainer:
            def train_step(self, batch): return self.f(batch)
            def f(self, batch): return batch
    """,
    "shadowed tf": """
        import tensorflow as tf
        def outer(tf):
            @tf.function
            def f(x): return x
    """,
}


@pytest.mark.parametrize("code", NOT_GRAPH.values(), ids=NOT_GRAPH.keys())
def test_not_graph_code(code: str) -> None:
    # with `keras-call-is-graph = false`, so that the Keras cases test reach alone
    assert not any(name.split(".")[-1] == "f" for name in graph_names(code, EngineSettings(keras_call_is_graph=False))), code


def test_function_alias_from_config() -> None:
    code = """
        from tf_agents.utils import common
        @common.function
        def f(x): return x
    """
    assert graph_names(code) == set()
    assert graph_names(code, EngineSettings(function_aliases=("tf_agents.utils.common.function",))) == {"f"}


def test_keras_call_by_default_unless_configured_off() -> None:
    code = """
        import tensorflow as tf
        class L(tf.keras.layers.Layer):
            def call(self, x): return x
        class Sub(L):
            def call(self, x): return x
        class Plain:
            def call(self, x): return x
    """
    assert graph_names(code) == {"L.call", "Sub.call"}
    assert graph_names(code, EngineSettings(keras_call_is_graph=False)) == set()


def test_reasons_say_why() -> None:
    facts = analyze_source("m.py", textwrap.dedent("""
        import tensorflow as tf
        def helper(x): return x
        @tf.function
        def f(x): return helper(x)
    """), "m")
    reasons = {info.qualname: reason for info, reason in facts.graph_functions.items()}
    assert reasons["f"] == "decorated with tf.function"
    assert "called from f (line 5)" in reasons["helper"]


def json_findings(run_cli, root) -> list[dict]:
    """The findings of `tfcheck check --format json .` run in `root`."""
    return json.loads(run_cli(root, "check", "--format", "json", ".").stdout)


def test_cross_file_helpers_are_graph_code(project, run_cli) -> None:
    root = project({
        "pkg/__init__.py": "",
        "pkg/util.py": "def helper(x):\n    print(x)\n    return x\n\ndef unused(x):\n    print(x)\n",
        "pkg/deep.py": "from pkg import util\n\ndef middle(x):\n    return util.helper(x)\n",
        "pkg/main.py": "import tensorflow as tf\nfrom pkg.deep import middle\n\n@tf.function\ndef f(x):\n    return middle(x)\n",
    })
    flagged = {(f["path"], f["line"]) for f in json_findings(run_cli, root)}
    assert flagged == {("pkg/util.py", 2)}


def test_rebound_names() -> None:
    facts = analyze_source("m.py", textwrap.dedent("""
        try:
            import numpy as np
        except ImportError:
            np = None
        if flag:
            mode = 1
        else:
            mode = 2
        once = 1
        twice = 1
        twice = 2
        looped = 0
        for i in range(3):
            looped = i
        via_global = 0
        def bump():
            global via_global
            via_global += 1
        def outer():
            count = 0
            def inner():
                nonlocal count
                count = 1
            fixed = 1
            return inner, fixed
    """), "m")
    module = facts.module_scope
    rebound = {name for name in module.bindings if facts.is_rebound(module, name)}
    assert rebound == {"twice", "looped", "via_global", "i"}
    outer = next(info for info in facts.functions if info.name == "outer")
    assert facts.is_rebound(outer.scope, "count") and not facts.is_rebound(outer.scope, "fixed")


def test_name_wrapped_twice_by_tf_function() -> None:
    """sionna 0.19.2 utils/misc.py:657,664: two `mc_fun = tf.function(mc_fun, ...)` branches sent
    function_target from one binding to the other forever (RecursionError: a TFC000 on a valid file)."""
    facts = analyze_source("m.py", textwrap.dedent("""
        import tensorflow as tf
        def simulate(mc_fun, graph_mode):
            if graph_mode == "graph":
                mc_fun = tf.function(mc_fun, jit_compile=False)
            elif graph_mode == "xla":
                mc_fun = tf.function(mc_fun, jit_compile=True)
            return mc_fun()
        def step():
            return tf.constant(1)
        @tf.function
        def f():
            g = tf.function(step)
            g = tf.function(g)
            return g()
    """), "m")
    assert {info.qualname for info in facts.graph_functions} == {"f", "step"}


def test_value_kinds() -> None:
    facts = analyze_source("m.py", textwrap.dedent("""
        import numpy as np
        import tensorflow as tf
        def gen():
            yield 1
        a = [1, 2]
        b = np.zeros(3)
        c = iter(a)
        d = gen()
        e = tf.Variable(1.0)
        f = tf.data.Dataset.range(3).batch(2)
        g = tf.constant(1)
        h = {}
    """), "m")
    kinds = {b.name: facts.kinds(b.value) for bs in facts.module_scope.bindings.values() for b in bs if b.value}
    assert kinds == {"a": {"list"}, "b": {"ndarray"}, "c": {"iterator"}, "d": {"iterator"}, "e": {"variable"},
                     "f": {"dataset"}, "g": {"tensor"}, "h": {"dict"}}


def origins_of(code: str) -> dict[str, bool]:
    """Whether each graph function is reached only from tf.data (input pipeline only)."""
    facts = analyze_source("m.py", textwrap.dedent(code), "m")
    return {info.qualname: facts.input_pipeline_only(info) for info in facts.graph_functions}


def test_input_pipeline_only_is_what_only_tf_data_reaches() -> None:
    assert origins_of("""
        import tensorflow as tf
        def parse(x): return decode(x)
        def decode(x): return tf.map_fn(lambda y: y, x)
        def shared(x): return x
        def export(x): return x
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(x): return shared(x)
        ds = tf.data.Dataset.from_tensor_slices(["a"]).map(parse).map(shared)
        y = tf.map_fn(export, tf.range(3))
    """) == {"parse": True, "decode": True, "decode.<lambda>": True, "shared": False, "serve": False, "export": False}


def test_strategy_run_reason_names_the_step() -> None:
    facts = analyze_source("m.py", textwrap.dedent(GRAPH["strategy.run in a tf.function"]), "m")
    reasons = {info.qualname: reason for info, reason in facts.graph_functions.items()}
    assert reasons["f"] == "passed to strategy.run from graph code in distributed_train_step (line 7)"


def test_compiled_loss_reason_names_the_compile_call() -> None:
    facts = analyze_source("m.py", textwrap.dedent(GRAPH["loss passed to compile"]), "m")
    reasons = {info.qualname: reason for info, reason in facts.graph_functions.items()}
    assert reasons == {"f": "passed as loss= to compile (line 5)"}


def test_autograph_converts_what_tf_function_and_tf_data_reach() -> None:
    facts = analyze_source("m.py", textwrap.dedent("""
        import keras
        import tensorflow as tf
        def helper(x): return x
        def plain(x): return x
        def parse(x): return x
        def loss(y, p): return y - p
        def looped(x):
            for i in range(2):
                pass
            else:
                pass
        @tf.function
        def f(x): return helper(x) + looped(x)
        g = tf.function(plain, autograph=False)
        ds = tf.data.Dataset.range(3).map(parse)
        class L(keras.layers.Layer):
            def call(self, x): return x
        model.compile(loss=loss)
    """), "m")
    converted = {info.qualname for info in facts.graph_functions if facts.autograph_converted(info)}
    assert converted == {"f", "helper", "parse"}


def test_keras_call_and_methods_reached_across_files(project, run_cli) -> None:
    """`self.encoder(x)` runs the `call` of an `Encoder` from another file; `self.runner.run_inner(x)`
    runs a method of a `Runner` from another file, so the tf.function it makes is made while tracing
    (TFC013 exempts it)."""
    root = project({
        "pkg/__init__.py": "",
        "pkg/blocks.py": """
            import keras
            class Base(keras.layers.Layer):
                def call(self, x):
                    print(x)
                    return x
            class Encoder(Base):
                pass
            class Unused(keras.layers.Layer):
                def call(self, x):
                    print(x)
                    return x
        """,
        "pkg/runner.py": """
            import tensorflow as tf
            class Runner:
                def run_inner(self, x):
                    print(x)
                    inner = tf.function(lambda y: y * 2)
                    return inner(x)
        """,
        "pkg/model.py": """
            import tensorflow as tf
            from pkg.blocks import Encoder
            from pkg.runner import Runner
            class Net(tf.Module):
                def __init__(self):
                    self.encoder = Encoder()
                    self.runner = Runner()
                @tf.function
                def __call__(self, x):
                    return self.runner.run_inner(self.encoder(x))
        """,
    }, config="[tool.tfcheck]\nselect = ['ALL']\nkeras-call-is-graph = false\n")  # reach alone: Unused.call is not reached
    flagged = [(f["path"], f["line"], f["code"], f["message"]) for f in json_findings(run_cli, root)]
    assert [(path, line, code) for path, line, code, _ in flagged] == [("pkg/blocks.py", 5, "TFC001"),
                                                                         ("pkg/runner.py", 5, "TFC001")]
    assert all("called from graph code in Net.__call__ (pkg/model.py:11)" in message for *_, message in flagged)


def test_module_level_code_sees_the_definition_in_effect() -> None:
    """A notebook defines `to_grayscale` twice; cell 9's `map` traces the first only (the second's
    py_function finding named cell 9's map: practical-ml-vision-book 07b_gpumax.ipynb, issue 36)."""
    facts = analyze_source("nb.py", "import tensorflow as tf\ndef to_grayscale(img):\n    return img\n"
                           "ds = tf.data.Dataset.range(3).map(to_grayscale)\n"
                           "def to_grayscale(img):\n    return tf.py_function(abs, [img], tf.float32)\n", "nb")
    assert [(info.lineno, reason) for info, reason in facts.graph_functions.items()] == [
        (2, "traced by Dataset.map at line 4")]


def test_self_method_calls_reach_the_overrides_of_the_files_subclasses() -> None:
    """`self.forward(x)` in a base class's `call` runs whichever `forward` the instance's class has."""
    names = graph_names("""
        import tensorflow as tf
        class Base(tf.keras.layers.Layer):
            def call(self, x):
                return self.forward(x)
            def forward(self, x):
                return x
        class Child(Base):
            def forward(self, x):
                return x * 2
        class Other(tf.Module):
            def forward(self, x):
                return x
    """)
    assert {"Base.call", "Base.forward", "Child.forward"} <= names
    assert "Other.forward" not in names
