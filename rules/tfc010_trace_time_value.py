"""TFC010: Python randomness and clocks evaluated once, at trace time, in graph code."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine.facts import FileFacts
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

# Calls whose value changes from call to call in Python, with what to use in graph code instead.
_CLOCKS = frozenset({
    "time.time", "time.time_ns", "time.monotonic", "time.monotonic_ns", "time.perf_counter",
    "time.perf_counter_ns", "time.process_time", "time.process_time_ns", "time.localtime", "time.gmtime",
    "time.ctime", "datetime.datetime.now", "datetime.datetime.utcnow", "datetime.datetime.today",
    "datetime.date.today",
})
_RANDOM_MODULES = ("numpy.random.", "random.", "secrets.")
# Calls in those modules that make a generator or set state rather than produce a value; values drawn
# from a generator made this way are caught at the method call (`rng.normal()`).
_GENERATOR_FACTORIES = frozenset({
    "numpy.random.default_rng", "numpy.random.RandomState", "numpy.random.Generator", "numpy.random.PCG64",
    "numpy.random.SeedSequence", "numpy.random.MT19937", "numpy.random.Philox", "random.Random",
    "random.SystemRandom",
})
_STATE_SETTERS = frozenset({"numpy.random.seed", "numpy.random.set_state", "numpy.random.get_state",
                            "random.seed", "random.setstate", "random.getstate"})


class TraceTimeValue(Rule):
    """Python randomness or a clock read in graph code is evaluated once, while tracing.

    ## What it does
    Finds calls in graph code that produce a different value on every Python call: NumPy and Python
    random numbers (`np.random.*`, `random.*`, draws from a `np.random.default_rng()` or
    `random.Random()` generator, `secrets`) and clocks (`time.time()`, `datetime.now()`, ...), whose
    value reaches the graph: an operand of a TensorFlow operation, a returned value, the test of an `if`
    or the bound of a loop. Values used only in Python bookkeeping (timing a step for a log line or a
    metric, an op `name=`, a `shared_name=`), constants such as `np.pi`, calls that only create a
    generator or set a seed, a draw right after the function seeds its generator, and a draw made
    into `tf.constant(...)` (a random constant, on purpose) are not reported. Unique tokens
    (`uuid.uuid4()`, `os.urandom()`) are not either: graph code uses them as names and separators,
    which one value per trace serves (google-research/text-to-text-transfer-transformer's t5 preprocessors). A seed
    helper (a function whose name says seed, `make_default_seed()`) returns a seed fixed at trace time
    on purpose: its draw is reported only where a call of it in the file's graph code puts the value
    in the graph other than as the `seed=` of a stateful op (a stateless op's seed is reported).

    ## Why is this bad
    Python code in a tf.function runs only while tracing. The random number or timestamp is computed
    once and baked into the graph as a constant, so every later call sees the same "random" dropout
    mask, augmentation or timestamp, silently. The function and any SavedModel or compiled artifact made
    from it keep that frozen value. The severity is WARNING: the code runs, but computes the wrong thing.

    ## Example
    ```python
    @tf.function
    def augment(image):
        if np.random.rand() < 0.5:
            image = tf.image.flip_left_right(image)
        noise = np.random.normal(size=image.shape)
        return image + noise
    ```

    ## Use instead
    ```python
    @tf.function
    def augment(image):
        if tf.random.uniform([]) < 0.5:
            image = tf.image.flip_left_right(image)
        noise = tf.random.normal(tf.shape(image))
        return image + noise
    ```
    Use `tf.random.*` (or a `tf.random.Generator` created outside the function) for randomness, and
    `tf.timestamp()` for the time: they are graph operations evaluated on every call.
    """

    code = "TFC010"
    name = "trace-time-value"
    severity = Severity.ERROR
    must_flag = (
        # A choice that picks the code traced (google/uncertainty-baselines 163351d
        # baselines/drug_cardiotoxicity/augmentation_utils.py:112-118, cut down).
        "import random\nimport tensorflow as tf\nclass GraphAugment:\n    def __init__(self, names):\n"
        "        self.names = names\n        self.available = {'drop': tf.nn.dropout, 'noise': tf.identity}\n"
        "    def augment(self, x):\n        name = random.choice(self.names)\n        return self.available[name](x)\n"
        "augmenter = GraphAugment(['drop', 'noise'])\n@tf.function\ndef train_step(x):\n    return augmenter.augment(x)\n",
        # Indices drawn in a replay buffer's sampler, returned in a dict (lazyprogrammer/machine_learning_examples
        # 9c35878 tf2.0/rl_trader.py:54-60 and 285-288, cut down).
        "import numpy as np\nimport tensorflow as tf\nclass ReplayBuffer:\n    def __init__(self):\n"
        "        self.obs = np.zeros([500, 4])\n        self.size = 0\n    def sample_batch(self, batch_size=32):\n"
        "        idxs = np.random.randint(0, self.size, size=batch_size)\n        return dict(s=self.obs[idxs])\n"
        "class Agent:\n    def __init__(self):\n        self.memory = ReplayBuffer()\n    @tf.function\n"
        "    def replay(self):\n        batch = self.memory.sample_batch(32)\n        return tf.reduce_sum(batch['s'])\n",
        "import numpy as np\nimport tensorflow as tf\n@tf.function\ndef f(x):\n"
        "    return x + np.random.normal(size=[3])\n",
        "import random\nimport tensorflow as tf\n@tf.function\ndef f(x):\n"
        "    if random.random() < 0.5:\n        x = -x\n    return x\n",
        "import time\nimport tensorflow as tf\n@tf.function\ndef f(x):\n    return x * time.time()\n",
        "from datetime import datetime\nimport tensorflow as tf\n@tf.function\ndef f(x):\n"
        "    stamp = datetime.now().isoformat()\n    return tf.strings.join([x, stamp])\n",
        # Draws from a NumPy generator made outside the function.
        "import numpy as np\nimport tensorflow as tf\nrng = np.random.default_rng(0)\n"
        "@tf.function\ndef f(x):\n    return x + rng.normal()\n",
        "import numpy as np\nimport tensorflow as tf\nclass Aug(tf.keras.layers.Layer):\n"
        "    def __init__(self):\n        super().__init__()\n        self.rng = np.random.RandomState(1)\n"
        "    @tf.function\n    def call(self, x):\n        return x * self.rng.uniform()\n",
        "import numpy as np\nimport tensorflow as tf\nds = tf.data.Dataset.range(4).map(lambda x: x + np.random.randint(9))\n",
        # A frozen branch, a frozen loop bound, a frozen order.
        "import random\nimport tensorflow as tf\n@tf.function\ndef f(x):\n    for _ in range(random.randint(1, 4)):\n"
        "        x = x * 2\n    return x\n",
        "import random\nimport tensorflow as tf\n@tf.function\ndef f(xs):\n    order = list(range(3))\n"
        "    random.shuffle(order)\n    return tf.gather(xs, order)\n",
        # A seed helper feeding a stateless op: the same numbers on every call.
        "import numpy as np\nimport tensorflow as tf\ndef random_seed():\n    return np.random.randint(10e6)\n"
        "@tf.function\ndef f(x):\n    return x + tf.random.stateless_uniform([2], seed=[random_seed(), 0])\n",
    )
    must_not_flag = (
        # A unique token per trace, as a separator (google-research/text-to-text-transfer-transformer e081111
        # t5/data/preprocessors.py:702, cut down), and a random constant said so (tensorflow/docs
        # site/en/guide/graph_optimization.ipynb, cell 13).
        "import uuid\nimport tensorflow as tf\ndef key():\n    return str(uuid.uuid4())\n"
        "@tf.function\ndef f(x):\n    return tf.strings.join([x, key()])\n",
        "import numpy as np\nimport tensorflow as tf\n@tf.function\ndef f():\n"
        "    a = tf.constant(np.random.randn(20, 20), dtype=tf.float32)\n    return tf.matmul(a, a)\n",
        # Seeded right before: the same draw on purpose (horovod 2626dc8 test/parallel/test_xla.py:163-164).
        "import numpy as np\nimport tensorflow as tf\n@tf.function\ndef allreduce_test(tensor):\n"
        "    np.random.seed(1234)\n    factor = np.random.uniform()\n    return tensor * factor\n",
        # tensorflow/docs 7c36502 site/en/guide/data_performance.ipynb, cells 62-64, cut down: the decorator hands
        # the map function to tf.py_function, so its clock reads run eagerly for every element.
        "import time\nimport tensorflow as tf\ndef map_decorator(func):\n    def wrapper(steps, times):\n"
        "        return tf.py_function(func, inp=(steps, times), Tout=(tf.string, tf.float32))\n    return wrapper\n"
        "@map_decorator\ndef naive_map(steps, times):\n    map_enter = time.perf_counter()\n"
        "    return steps, times + map_enter\nds = tf.data.Dataset.range(2).map(naive_map)\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    return x + tf.random.normal(tf.shape(x))\n",
        "import numpy as np\nimport tensorflow as tf\n@tf.function\ndef f(x):\n    return x * np.pi + np.sqrt(2.0)\n",
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    return x * tf.timestamp()\n",
        # Outside graph code.
        "import numpy as np\nimport tensorflow as tf\nnoise = np.random.normal(size=[3])\n"
        "@tf.function\ndef f(x, n):\n    return x + n\nf(1.0, noise)\n",
        # Making a generator or seeding is not drawing a value.
        "import numpy as np\nimport tensorflow as tf\n@tf.function\ndef f(x):\n"
        "    np.random.seed(0)\n    rng = np.random.default_rng(0)\n    return x\n",
        "import random\nimport tensorflow as tf\ng = tf.random.Generator.from_seed(1)\n"
        "@tf.function\ndef f(x):\n    return x + g.normal([])\n",
        # An eager py_function callback runs on every call.
        "import numpy as np\nimport tensorflow as tf\ndef noise(x):\n    return x + np.random.rand()\n"
        "@tf.function\ndef f(x):\n    return tf.numpy_function(noise, [x], tf.float64)\n",
        # Timing a trace step for a metric (TensorFlow's functional_saver.py), and unique op names.
        "import time\nimport logging\nimport tensorflow as tf\n@tf.function\ndef f(x, cb):\n"
        "    start = time.time() * 1e6\n    y = cb(x)\n    end = time.time() * 1e6\n"
        "    logging.info('took %s', end - start)\n    return y\n",
        "import math, time\nimport tensorflow as tf\nfrom tensorflow.python.checkpoint import metrics\n"
        "@tf.function\ndef f(x, cb):\n    start = time.time() * 1e6\n    y = cb(x)\n"
        "    metrics.AddShardingCallbackDuration(callback_duration=math.ceil(time.time() * 1e6 - start))\n"
        "    return y\n",
        "import uuid\nimport tensorflow as tf\n@tf.function\ndef f(x):\n"
        "    v = tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[], shared_name=str(uuid.uuid4()))\n    return x\n",
        # `random` as a local name is not the module.
        "import tensorflow as tf\n@tf.function\ndef f(x, random):\n    return x + random.uniform()\n",
        # keras/src/random/seed_generator.py's make_default_seed: a seed helper; fixing the seed of a
        # stateful op at trace time is its purpose (the op still draws new numbers on every call).
        "import random as python_random\nimport tensorflow as tf\ndef make_default_seed():\n"
        "    return python_random.randint(1, int(1e9))\n@tf.function\ndef noise(x):\n"
        "    return x + tf.random.normal(tf.shape(x), seed=make_default_seed())\n",
        "import random\nimport tensorflow as tf\ndef get_seed(seed=None):\n    if seed is None:\n"
        "        seed = random.randint(0, 2**31 - 1)\n    return seed\n@tf.function\ndef f(x):\n"
        "    return x + tf.random.uniform([2], seed=get_seed())\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        for node, function in facts.graph_nodes(ast.Call):
            assert isinstance(node, ast.Call)
            what = _trace_time_source(facts, node)
            if what == "a random number" and (_seeded_before(facts, node, function) or _made_constant(facts, node)):
                continue  # the same numbers on every trace, on purpose
            if what is not None and _frozen(facts, node, function):
                yield self.finding(
                    facts, node,
                    f"`{facts.text(node.func)}()` is {what} evaluated once while tracing and frozen into the graph; "
                    f"use {'tf.timestamp()' if what == 'a clock' else 'tf.random.* or a tf.random.Generator'}",
                    function=function)


def _made_constant(facts: FileFacts, call: ast.Call) -> bool:
    """`tf.constant(np.random.randn(2000, 2000))`: a random constant, said so (tensorflow/docs 7c36502
    site/en/guide/graph_optimization.ipynb, cell 13)."""
    parent = facts.parent(call)
    return isinstance(parent, ast.Call) and call in parent.args and facts.resolve(parent.func) == "tensorflow.constant"


def _seeded_before(facts: FileFacts, call: ast.Call, function: FunctionInfo) -> bool:
    """`np.random.seed(1234)` (or `random.seed`) earlier in the same function: the draw is meant to be the
    same every time (horovod 2626dc8 test/parallel/test_xla.py:163-164, a test's fixed scale factor)."""
    name = facts.resolve(call.func) or ""
    module = name.rsplit(".", 1)[0]
    return any(isinstance(node, ast.Call) and facts.resolve(node.func) == f"{module}.seed"
               and (node.lineno, node.col_offset) < (call.lineno, call.col_offset) for node in function.nodes)


def _frozen(facts: FileFacts, call: ast.Call, function: FunctionInfo) -> bool:
    """The value reaches the graph; for an in-place shuffle, the shuffled sequence does."""
    name = facts.resolve(call.func) or ""
    if name.endswith(".shuffle") and call.args:
        return facts.reaches_graph(call.args[0], function) or any(
            facts.reaches_graph(use, function) for use in _later_uses(facts, call.args[0], function))
    return facts.reaches_graph(call, function)


def _later_uses(facts: FileFacts, sequence: ast.expr, function: FunctionInfo) -> list[ast.Name]:
    """Loads of the shuffled local name in the function."""
    if not isinstance(sequence, ast.Name):
        return []
    return [use for use in facts.loads_under(function).get(sequence.id, ()) if use is not sequence]


def _trace_time_source(facts: FileFacts, call: ast.Call) -> str | None:
    """`a random number` or `a clock` when the call produces one in Python, else None."""
    name = facts.resolve(call.func)
    if name is None:
        return "a random number" if _is_generator_draw(facts, call.func) else None
    if name in _CLOCKS:
        return "a clock"
    if name.startswith(_RANDOM_MODULES) and name not in _GENERATOR_FACTORIES and name not in _STATE_SETTERS:
        return "a random number"
    return None


def _is_generator_draw(facts: FileFacts, func: ast.expr) -> bool:
    """`rng.normal()` / `self.rng.uniform()` where `rng` is only ever bound to a Python/NumPy generator."""
    if not isinstance(func, ast.Attribute):
        return False
    receiver = func.value
    if isinstance(receiver, ast.Name):
        assigned = [b.value for b in facts.bindings_of(receiver)]
    elif facts.is_self_attribute(receiver):
        cls = facts.class_of_self(receiver)  # type: ignore[arg-type]
        assigned = [value for _, value in facts.self_attribute_values(cls, receiver.attr)] if cls else []
    else:
        return False
    return bool(assigned) and all(isinstance(value, ast.Call) and facts.resolve(value.func) in _GENERATOR_FACTORIES
                                  for value in assigned)
