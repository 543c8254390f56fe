"""TFC012: a tf.function called with changing Python numbers or new plain objects: one trace each."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from tfcheck.engine import kinds
from tfcheck.engine.facts import FileFacts, TfFunctionCall, ValueOf
from tfcheck.engine.scopes import ClassInfo, FunctionInfo
from tfcheck.findings import Finding, Fix, Severity
from tfcheck.edits import call_code, expression_code, replace_node
from tfcheck.rule import Rule

# Methods that give a class its own trace identity, so new instances need not retrace.
_TRACE_IDENTITY_METHODS = frozenset({"__tf_tracing_type__", "__eq__", "__hash__"})
_COUNTER_SOURCES = frozenset({"builtins.range", "builtins.enumerate"})
_NUMBER_CONVERSIONS = frozenset({"builtins.int", "builtins.float"})
# NumPy calls whose elements are np.float64, a subclass of Python float: traced by value like floats.
# (Rows of 2-D arrays are arrays, traced by shape like tensors, so other NumPy data does not count.)
_FLOAT_SEQUENCES = frozenset({"numpy.linspace", "numpy.geomspace", "numpy.logspace"})
# TensorFlow warns after 5 retraces in a row; a loop known to run fewer times retraces a bounded few.
FEW_TRACES = 5


class RetracePythonArg(Rule):
    """A tf.function called with Python values that change on every call retraces every time.

    ## What it does
    Finds calls of a tf.function without an `input_signature` that pass the counter of a Python loop
    (`for step in range(n): train_step(x, step)`, or a comprehension's `[lr_fn(x) for x in range(n)]`),
    that pass different Python numbers in different calls to a parameter the function only feeds to
    TensorFlow ops, or that pass a new instance of a plain Python class on each call. The counter or
    the numbers may reach the call through the parameters of an eager helper (`for i in range(64):
    visualize(i)` where `visualize(i)` calls `step(image, i)`), up to two helpers deep. A tf.function
    handed to Keras' `LearningRateScheduler` is called with a new Python int every epoch.

    ## Why is this bad
    A tf.function keys its traces on the values of Python arguments (and on the identity of plain
    objects). Each new number or object means a new trace: Python runs the whole function again and
    builds a new graph, which is slow and grows memory with every call, while the graphs are the same.
    It is a warning because results stay correct.

    ## Example
    ```python
    @tf.function
    def train(num_steps):
        for _ in tf.range(num_steps):
            train_one_step()

    train(num_steps=10)
    train(num_steps=20)  # traces again
    ```

    ## Use instead
    ```python
    train(num_steps=tf.constant(10))
    train(num_steps=tf.constant(20))  # reuses the trace
    ```
    Pass tensors, give the function an `input_signature`, or give the class a trace type
    (`tf.experimental.ExtensionType`, or `__tf_tracing_type__`). `--unsafe-fixes` wraps a changing
    number in `tf.constant(...)`; it is unsafe because the dtype becomes int32/float32 (`x * step` may
    then need a cast) and Python branches on the value become graph conditionals.
    """

    code = "TFC012"
    name = "retrace-python-arg"
    severity = Severity.WARNING
    opt_in = True
    must_flag = (
        # Reference: different Python numbers for a parameter only fed to TensorFlow ops.
        "import tensorflow as tf\ndef train_one_step():\n  pass\n\n@tf.function\ndef train(num_steps):\n"
        "  print(\"Tracing with num_steps = \", num_steps)\n  tf.print(\"Executing with num_steps = \", num_steps)\n"
        "  for _ in tf.range(num_steps):\n    train_one_step()\n\ntrain(num_steps=10)\ntrain(num_steps=20)\n",
        # Reference: new instances of plain classes on every call.
        "import tensorflow as tf\n@tf.function\ndef get_mixed_flavor(fruit_a, fruit_b):\n"
        "  return fruit_a.flavor + fruit_b.flavor\n\nclass Fruit:\n  flavor = tf.constant([0, 0])\n\n"
        "class Apple(Fruit):\n  flavor = tf.constant([1, 2])\n\nclass Mango(Fruit):\n"
        "  flavor = tf.constant([3, 4])\n\nget_mixed_flavor(Apple(), Mango())\nget_mixed_flavor(Apple(), Mango())\n",
        # Walking Python numbers, and a value computed from the loop variable.
        "import numpy as np\nimport tensorflow as tf\n@tf.function\ndef sample(x, alpha):\n"
        "    return x + alpha * tf.random.normal(tf.shape(x))\nsigmas = np.geomspace(1.0, 0.01, 10)\n"
        "def generate(x, eps):\n    for sigma in sigmas:\n        alpha = eps * (sigma / sigmas[-1]) ** 2\n"
        "        x = sample(x, alpha)\n    return x\n",
        "import tensorflow as tf\n@tf.function\ndef train(x, lr):\n    return x * lr\n"
        "for lr in [0.1, 0.05, 0.01, 0.005, 0.001]:\n    train(1.0, lr)\n",
        # The counter of a Python loop (from a real training script: `epoch` is not even used).
        "import tensorflow as tf\n@tf.function\ndef train(images, labels, epoch, training_mode):\n"
        "    return tf.reduce_mean(images - labels)\nepochs = 10000\nfor epoch in range(epochs):\n"
        "    for train_images, train_labels in train_ds:\n"
        "        train(train_images, train_labels, epoch, 'latent')\n",
        "import tensorflow as tf\n@tf.function\ndef train_step(x, step):\n    return x * step\n"
        "for step in range(1000):\n    train_step(tf.ones(3), step)\n",
        "import tensorflow as tf\nclass Trainer:\n    @tf.function\n    def step(self, x, epoch):\n"
        "        return x + epoch\n    def fit(self, x):\n        for epoch, batch in enumerate(x):\n"
        "            self.step(batch, epoch)\n",
        "import tensorflow as tf\ndef step(x, i):\n    return x * i\nstep = tf.function(step)\n"
        "for i in range(100):\n    step(1.0, i)\n",
        "import tensorflow as tf\nf = tf.function(lambda x, i: x + i)\ni = 0\nwhile i < 10:\n    f(1.0, float(i))\n"
        "    i += 1\n",
        "import tensorflow as tf\nclass Config:\n    def __init__(self):\n        self.scale = 2.0\n"
        "@tf.function\ndef f(x, cfg):\n    return x * cfg.scale\nfor batch in range(3):\n    f(1.0, Config())\n",
        # The loop counter passed through an eager helper (fchollet/deep-learning-with-python-notebooks
        # dea84a4 second_edition/chapter09_part03_interpreting-what-convnets-learn.ipynb, cells 28-37).
        "import tensorflow as tf\ndef compute_loss(image, filter_index):\n"
        "    return tf.reduce_mean(feature_extractor(image)[:, 2:-2, 2:-2, filter_index])\n"
        "@tf.function\ndef gradient_ascent_step(image, filter_index, learning_rate):\n"
        "    with tf.GradientTape() as tape:\n        tape.watch(image)\n"
        "        loss = compute_loss(image, filter_index)\n    grads = tape.gradient(loss, image)\n"
        "    return image + learning_rate * tf.math.l2_normalize(grads)\n"
        "def generate_filter_pattern(filter_index):\n    image = tf.random.uniform((1, 200, 200, 3))\n"
        "    for i in range(30):\n        image = gradient_ascent_step(image, filter_index, 10.)\n"
        "    return image[0].numpy()\nall_images = []\nfor filter_index in range(64):\n"
        "    all_images.append(generate_filter_pattern(filter_index))\n",
        # Two helpers deep, and a value the helper computes from its parameter.
        "import tensorflow as tf\n@tf.function\ndef step(x, scale):\n    return x * scale\n"
        "def inner(x, i):\n    scale = i * 0.1\n    return step(x, scale)\ndef outer(x, i):\n    return inner(x, i)\n"
        "for i in range(100):\n    outer(1.0, i)\n",
        # A comprehension is a loop; `rng` holds range(EPOCHS) (GoogleCloudPlatform/training-data-analyst
        # a308313 courses/fast-and-lean-data-science/TPU-GPU optimized Jigsaw Multilingual BERT.ipynb, cell 8).
        "import tensorflow as tf\nEPOCHS = 6\nLR_MAX, LR_MIN, LR_EXP_DECAY = 0.001, 0.0001, .9\n@tf.function\n"
        "def lr_fn(epoch):\n    lr = (LR_MAX - LR_MIN) * LR_EXP_DECAY**(epoch) + LR_MIN\n    return lr\n"
        "rng = [i for i in range(EPOCHS)]\ny = [lr_fn(x) for x in rng]\n",
        # Keras calls a schedule with the epoch, a Python int (the same notebook, cell 17).
        "import tensorflow as tf\n@tf.function\ndef lr_fn(epoch):\n    return 0.0009 * 0.9**(epoch) + 0.0001\n"
        "lr_callback = tf.keras.callbacks.LearningRateScheduler(lr_fn)\n"
        "history = model.fit(train_dataset, steps_per_epoch=STEPS_PER_EPOCH, epochs=EPOCHS, callbacks=[lr_callback])\n",
        "import keras\nimport tensorflow as tf\n@tf.function\ndef decay(epoch, lr):\n"
        "    return lr * tf.exp(-0.1 * epoch)\n"
        "callbacks = [keras.callbacks.LearningRateScheduler(lambda epoch, lr: decay(epoch, lr))]\n",
        # Different numbers through the parameters of a helper, and a tensor indexed with one
        # (GoogleCloudPlatform/asl-ml-immersion 238875e asl_core/notebooks/responsible_ai/explainable_ai/
        # integrated_gradients.ipynb, cells 52, 83, 95, 97 and 98).
        "import tensorflow as tf\ndef compute_gradients(model, path_inputs, target_class_idx):\n"
        "    with tf.GradientTape() as tape:\n        tape.watch(path_inputs)\n"
        "        outputs = tf.nn.softmax(model(path_inputs), axis=-1)[:, target_class_idx]\n"
        "    return tape.gradient(outputs, path_inputs)\n@tf.function\n"
        "def integrated_gradients(model, baseline, input, target_class_idx, m_steps=50):\n"
        "    alphas = tf.linspace(0.0, 1.0, m_steps + 1)\n"
        "    path = baseline + alphas[:, None, None, None] * (input - baseline)\n"
        "    return tf.reduce_mean(compute_gradients(model, path, target_class_idx), axis=0)\n"
        "def plot_img_attributions(model, baseline, img, target_class_idx, m_steps=50, cmap=None):\n"
        "    ig_attributions = integrated_gradients(model=model, baseline=baseline, input=img,\n"
        "                                           target_class_idx=target_class_idx, m_steps=m_steps)\n"
        "    return tf.reduce_sum(tf.math.abs(ig_attributions), axis=-1)\n"
        "_ = plot_img_attributions(model=classifier, img=fireboat, baseline=black, target_class_idx=555, m_steps=240)\n"
        "_ = plot_img_attributions(model=classifier, img=panda, baseline=black, target_class_idx=780, m_steps=100)\n",
        # Two helpers deep, the tf.function called per batch (tensorflow/docs 7c36502
        # site/en/tutorials/interpretability/integrated_gradients.ipynb, cells 67-79).
        "import tensorflow as tf\n@tf.function\ndef one_batch(baseline, image, alpha_batch, target_class_idx):\n"
        "    return tf.nn.softmax(model(baseline + alpha_batch * (image - baseline)))[:, target_class_idx]\n"
        "def integrated_gradients(baseline, image, target_class_idx, m_steps=50, batch_size=32):\n"
        "    alphas = tf.linspace(start=0.0, stop=1.0, num=m_steps+1)\n    gradient_batches = []\n"
        "    for alpha in tf.range(0, len(alphas), batch_size):\n"
        "        alpha_batch = alphas[alpha:tf.minimum(alpha + batch_size, len(alphas))]\n"
        "        gradient_batches.append(one_batch(baseline, image, alpha_batch, target_class_idx))\n"
        "    return tf.concat(gradient_batches, axis=0)\n"
        "def plot_img_attributions(baseline, image, target_class_idx, m_steps=50):\n"
        "    return integrated_gradients(baseline=baseline, image=image, target_class_idx=target_class_idx,\n"
        "                                m_steps=m_steps)\n"
        "ig_attributions = integrated_gradients(baseline=baseline, image=fireboat, target_class_idx=555, m_steps=240)\n"
        "_ = plot_img_attributions(image=panda, baseline=baseline, target_class_idx=389, m_steps=55)\n",
    )
    must_not_flag = (
        # Reference: tensors instead of Python numbers; a fixed input_signature.
        "import tensorflow as tf\ndef train_one_step():\n  pass\n\n@tf.function\ndef train(num_steps):\n"
        "  for _ in tf.range(num_steps):\n    train_one_step()\n\n"
        "train(num_steps=tf.constant(10))\ntrain(num_steps=tf.constant(20))\n",
        "import tensorflow as tf\n@tf.function(input_signature=(tf.TensorSpec(shape=[None], dtype=tf.int32),))\n"
        "def g(x):\n  return x\nfor i in range(10):\n  g(tf.constant([i]))\n",
        # Python numbers that configure the graph; flags; one value.
        "import tensorflow as tf\n@tf.function\ndef f(x, num_layers):\n    for _ in range(num_layers):\n"
        "        x = tf.nn.relu(x)\n    return x\nf(1.0, 2)\nf(1.0, 3)\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, training):\n    return tf.nn.dropout(x, 0.5) if training else x\n"
        "f(1.0, True)\nf(1.0, False)\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, n):\n    return x * tf.cast(n, tf.float32)\nf(1.0, 3)\nf(2.0, 3)\n",
        # The index selects a Python object: one trace per block is the design.
        "import tensorflow as tf\nclass Stack:\n    def __init__(self, blocks):\n        self.blocks = blocks\n"
        "    @tf.function\n    def run_block(self, x, i):\n        return self.blocks[i](x)\n"
        "    def __call__(self, x, n):\n        for i in range(n):\n            x = self.run_block(x, i)\n"
        "        return x\n",
        # Rows of a NumPy array are arrays: traced by shape and dtype, like tensors.
        "import numpy as np\nimport tensorflow as tf\n@tf.function\ndef f(row):\n    return tf.reduce_sum(row)\n"
        "DATA = np.ones((100, 8))\nfor row in DATA:\n    f(row)\n",
        # A few settings; a value computed from something other than the loop variable.
        "import tensorflow as tf\n@tf.function\ndef train(x, lr):\n    return x * lr\n"
        "for lr in [0.1, 0.01]:\n    train(1.0, lr)\n",
        "import tensorflow as tf\n@tf.function\ndef f(x, scale):\n    return x * scale\nbase = 2.0\n"
        "for batch in dataset:\n    scale = base * 2\n    f(batch, scale)\n",
        # A handful of known iterations: a bounded number of traces (TensorFlow warns from 5 on).
        "import tensorflow as tf\n@tf.function\ndef f(i):\n    return tf.constant(i) + tf.constant(i)\n"
        "for step in range(3):\n    print(f(step).numpy())\n",
        # Not a counter: accumulating a tensor in a loop and passing it on.
        "import tensorflow as tf\n@tf.function\ndef f(x):\n    return x * 2\ntotal = tf.zeros(3)\n"
        "for b in [tf.ones(3)] * 10:\n    total += b\n    f(total)\n",
        # The loop counter converted to a tensor; a loop inside graph code; an object made once.
        "import tensorflow as tf\n@tf.function\ndef step(x, i):\n    return x + i\nfor i in range(10):\n"
        "    step(1.0, tf.constant(i))\n",
        "import tensorflow as tf\n@tf.function\ndef inner(x, i):\n    return x * i\n@tf.function\ndef outer(x):\n"
        "    for i in range(3):\n        x = inner(x, i)\n    return x\n",
        "import tensorflow as tf\nclass Config:\n    pass\n@tf.function\ndef f(x, cfg):\n    return x\n"
        "cfg = Config()\nfor _ in range(3):\n    f(1.0, cfg)\n",
        # A class with its own trace type.
        "import tensorflow as tf\nclass Key:\n    def __eq__(self, other):\n        return True\n"
        "    def __hash__(self):\n        return 0\n@tf.function\ndef f(x, k):\n    return x\n"
        "for _ in range(3):\n    f(1.0, Key())\n",
        # Through a helper: a few fixed iterations; a tensor made of the counter; a helper that binds its
        # parameter anew; a helper that is graph code; a Python index, one trace per block by design.
        "import tensorflow as tf\n@tf.function\ndef step(image, i):\n    return image * tf.cast(i, tf.float32)\n"
        "def visualize(i):\n    return step(tf.ones(3), i)\nfor i in range(3):\n    visualize(i)\n",
        "import tensorflow as tf\n@tf.function\ndef step(image, i):\n    return image * tf.cast(i, tf.float32)\n"
        "def visualize(i):\n    return step(tf.ones(3), tf.constant(i))\nfor i in range(64):\n    visualize(i)\n",
        "import tensorflow as tf\n@tf.function\ndef step(image, i):\n    return image * tf.cast(i, tf.float32)\n"
        "def visualize(i):\n    i = tf.constant(i)\n    return step(tf.ones(3), i)\n"
        "for i in range(64):\n    visualize(i)\n",
        "import tensorflow as tf\n@tf.function\ndef step(x, i):\n    return x * i\ndef helper(x, i):\n"
        "    return step(x, i)\n@tf.function\ndef outer(x):\n    for i in range(10):\n        x = helper(x, i)\n"
        "    return x\n",
        "import tensorflow as tf\nBLOCKS = [tf.keras.layers.Dense(4) for _ in range(8)]\n@tf.function\n"
        "def run_block(x, i):\n    return BLOCKS[i](x)\ndef run(x, i):\n    return run_block(x, i)\n"
        "for i in range(8):\n    run(tf.ones((1, 4)), i)\n",
        # Comprehensions: a few known epochs; tensors made of the element.
        "import tensorflow as tf\nEPOCHS = 3\n@tf.function\ndef lr_fn(epoch):\n    return 0.9**epoch\n"
        "rng = [i for i in range(EPOCHS)]\ny = [lr_fn(x) for x in rng]\n",
        "import tensorflow as tf\n@tf.function\ndef lr_fn(epoch):\n    return 0.9**epoch\n"
        "y = [lr_fn(tf.constant(x)) for x in range(100)]\n",
        # Schedules: a plain function, which Keras calls eagerly; a signature; a few epochs.
        "import tensorflow as tf\ndef lr_fn(epoch):\n    return 0.9**epoch\n"
        "callback = tf.keras.callbacks.LearningRateScheduler(lr_fn)\n",
        "import tensorflow as tf\n@tf.function(input_signature=[tf.TensorSpec([], tf.int32)])\ndef lr_fn(epoch):\n"
        "    return 0.9 ** tf.cast(epoch, tf.float32)\ncallback = tf.keras.callbacks.LearningRateScheduler(lr_fn)\n",
        "import tensorflow as tf\n@tf.function\ndef lr_fn(epoch):\n    return 0.9**epoch\n"
        "callback = tf.keras.callbacks.LearningRateScheduler(lr_fn)\nmodel.fit(ds, epochs=3, callbacks=[callback])\n",
        # Numbers through a helper: the same number from every caller; a number the function needs in Python.
        "import tensorflow as tf\n@tf.function\ndef ig(x, class_idx):\n    return tf.nn.softmax(x)[:, class_idx]\n"
        "def plot(x, class_idx):\n    return ig(x, class_idx)\nplot(a, 555)\nplot(b, 555)\n",
        "import tensorflow as tf\ndef build(x, n):\n    for _ in range(n):\n        x = tf.nn.relu(x)\n    return x\n"
        "@tf.function\ndef f(x, n):\n    return build(x, n)\ndef run(x, n):\n    return f(x, n)\n"
        "run(1.0, 2)\nrun(1.0, 3)\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        calls = [c for c in facts.tf_function_calls
                 if not c.has_signature and not facts.is_graph_function(c.caller)]
        tf_alias = facts.tensorflow_alias
        object_lines = _first_object_lines(facts, calls)
        schedulers = _schedulers(facts)
        memo: dict[tuple[int, str, str], str | None] = {}
        reported: set[int] = set()
        walked: set[tuple[int, str, int]] = set()
        for tf_call in calls:
            for parameter, argument in tf_call.arguments.items():
                counter = None if _indexes_python(facts, tf_call.function, parameter) \
                    else _loop_counter(facts, argument, tf_call.call) \
                    or _changing_through_helper(facts, argument, tf_call.caller, schedulers, memo)
                reason = counter or _new_plain_object(facts, argument, tf_call, object_lines)
                sequence = _named_sequence(facts, argument, tf_call.call) if counter is not None else None
                if sequence is not None:  # a second loop over `rng` finds the traces the first one made
                    key = (id(tf_call.identity), parameter, id(sequence))
                    if key in walked:
                        continue
                    walked.add(key)
                if reason is not None:
                    reported.add(id(argument))
                    fix = _to_tensor_fix(facts, argument, tf_alias) if counter is not None else None
                    yield self.finding(facts, argument, f"`{tf_call.function.name}` is traced again for every "
                                       f"{reason} passed as `{parameter}`; pass a tensor (tf.constant) or give "
                                       "the tf.function an input_signature", fix)
        for scheduler in schedulers:
            target = facts.tf_function_object(scheduler.schedule)
            if target is not None and not target[2] and _epoch_changes(facts, target[0], scheduler.schedule):
                yield self.finding(facts, scheduler.schedule, f"`{target[0].name}` is traced again every epoch: Keras' "
                                   "`LearningRateScheduler` calls it with the epoch, a new Python int each time; "
                                   "make the schedule a plain Python function (Keras calls it eagerly) or give "
                                   "the tf.function an input_signature")
        for tf_call, parameter, argument in _new_numbers(calls, _number_for(facts)):
            if id(argument) in reported:
                continue
            through = f" (through the callers of `{tf_call.caller.name}`)" \
                if tf_call.caller is not None and _number_literal(argument) is None else ""
            yield self.finding(facts, argument, f"`{tf_call.function.name}` is called with different Python numbers "
                               f"for `{parameter}`{through}, which it only uses as a tensor: each value is a new "
                               "trace; pass tf.constant(...) instead", _to_tensor_fix(facts, argument, tf_alias))


def _to_tensor_fix(facts: FileFacts, argument: ast.expr, tf_alias: str | None) -> Fix | None:
    """`f(x, step)` -> `f(x, tf.constant(step))`. Unsafe: the dtype becomes int32/float32 and a function
    that branches on the value in Python (`if step > 10:`) now builds a tf.cond instead."""
    if tf_alias is None:
        return None
    code = call_code(f"{tf_alias}.constant", expression_code(facts, argument))
    return Fix(f"Pass `{code}`", (replace_node(facts, argument, code),), safe=False)


def _parameter_uses(facts: FileFacts, function: FunctionInfo, parameter: str) -> list[ast.Name]:
    """The reads of a parameter in the function's own code (a nested function's use is its own business)."""
    return [use for use in facts.uses_of(parameter, function) if facts.function_of(use) is function]


def _indexes_python(facts: FileFacts, function: FunctionInfo, parameter: str) -> bool:
    """`self.blocks[i]`: the function needs the Python value, one trace per index is its design."""
    for use in _parameter_uses(facts, function, parameter):
        parent = facts.parent(use)
        if isinstance(parent, ast.Subscript) and parent.slice is use and kinds.TENSOR not in facts.kinds(parent.value):
            return True
    return False


def _loop_counter(facts: FileFacts, argument: ast.expr, call: ast.Call, via: str = "") -> str | None:
    """`i` (or `float(i)`, `i * 2`) where `i` changes on every iteration of a Python loop around the call.

    `i` counts (`range`, `enumerate`, `i += 1`), walks Python numbers (`for lr in np.geomspace(...)`),
    or is computed in the loop from one of those (`alpha = eps * (sigma / s0) ** 2`). A comprehension
    is a loop too: `[lr_fn(x) for x in range(EPOCHS)]`. `via` names the helpers the value went through.
    """
    for name in _number_names(facts, argument):
        changing = _changing_name(facts, name, call, True, via)
        if changing is not None:
            return changing
    return None


def _changing_name(facts: FileFacts, name: ast.Name, call: ast.Call, derived: bool, via: str = "") -> str | None:
    for binding in facts.bindings_of(name):
        loop = _comprehension_around(facts, binding.node, call) or facts.common_loop(binding.node, call)
        if loop is None:
            continue
        where = f"({facts.line_name(_line_of(facts, loop))}{via})"
        if binding.kind == "augassign" and facts.kinds(name) == {kinds.NUMBER} or _counts(facts, loop, binding.node):
            return f"value of the loop counter `{name.id}` {where}"
        if _walks_numbers(facts, loop, binding.node):
            return f"value of the loop variable `{name.id}` {where}"
        if derived and binding.kind == "assign" and binding.value is not None \
                and _is_arithmetic(facts, binding.value):
            for source in _number_names(facts, binding.value):
                if _changing_name(facts, source, call, derived=False) is not None:
                    return f"value of `{name.id}`, computed from the loop variable `{source.id}` {where}"
    return None


def _comprehension_around(facts: FileFacts, target: ast.AST, call: ast.Call) -> ast.comprehension | None:
    """The `for x in ...` of a comprehension that binds `target` and runs `call` once per element."""
    generator = facts.parent(target)
    while isinstance(generator, (ast.Tuple, ast.List, ast.Starred)):
        generator = facts.parent(generator)
    if not isinstance(generator, ast.comprehension):
        return None
    comprehension = facts.parent(generator)
    if comprehension is None or not facts.is_inside(call, comprehension) or facts.is_inside(call, generator.iter):
        return None
    return generator


def _named_sequence(facts: FileFacts, argument: ast.expr, call: ast.Call) -> ast.Call | None:
    """The `range(...)` behind `rng` when the counter walks a name (`for x in rng`, `[f(x) for x in rng]`):
    loops over the same name give the tf.function the same numbers, traced once."""
    if not isinstance(argument, ast.Name):
        return None
    for binding in facts.bindings_of(argument):
        loop = _comprehension_around(facts, binding.node, call) or facts.common_loop(binding.node, call)
        if isinstance(loop, (ast.For, ast.AsyncFor, ast.comprehension)) and loop.target is binding.node \
                and isinstance(loop.iter, ast.Name):
            return _counted_range(facts, loop.iter, 0)
    return None


def _line_of(facts: FileFacts, loop: ast.AST) -> int:
    """A loop's line (a comprehension's `for` has none of its own: the comprehension's)."""
    line = getattr(loop, "lineno", None)
    parent = facts.parent(loop)
    return line if line is not None or parent is None else getattr(parent, "lineno", 1)


def _walks_numbers(facts: FileFacts, loop: ast.AST, target: ast.AST) -> bool:
    """`for lr in np.geomspace(...)` / `for lr in [0.1, 0.05, ...]` (at least FEW_TRACES numbers)."""
    if not (isinstance(loop, (ast.For, ast.AsyncFor, ast.comprehension)) and loop.target is target):
        return False
    sequence = loop.iter
    if isinstance(sequence, ast.Name):
        bindings = facts.bindings_of(sequence)
        if len(bindings) == 1 and bindings[0].value is not None:
            sequence = bindings[0].value
    if isinstance(sequence, (ast.List, ast.Tuple)):
        return len(sequence.elts) >= FEW_TRACES and all(
            isinstance(e, ast.Constant) and type(e.value) in (int, float) for e in sequence.elts)
    return isinstance(sequence, ast.Call) and facts.resolve(sequence.func) in _FLOAT_SEQUENCES


def _is_arithmetic(facts: FileFacts, expr: ast.expr) -> bool:
    """Numbers, names, items and + - * / ** on them, int()/float(), and no tensor: still a Python number."""
    return not facts.kinds(expr) & {kinds.TENSOR, kinds.VARIABLE} and all(
        isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Subscript, ast.Load, ast.operator,
                       ast.unaryop))
        or (isinstance(n, ast.Call) and facts.resolve(n.func) in _NUMBER_CONVERSIONS)
        for n in ast.walk(expr))


def _number_names(facts: FileFacts, argument: ast.expr) -> list[ast.Name]:
    """The names whose Python value the argument is: `i`, `float(i)`, `i + 1`; not `tf.constant(i)`."""
    if isinstance(argument, ast.Name):
        return [argument]
    if isinstance(argument, ast.Call) and facts.resolve(argument.func) in _NUMBER_CONVERSIONS and argument.args:
        return _number_names(facts, argument.args[0])
    if isinstance(argument, ast.BinOp):
        return _number_names(facts, argument.left) + _number_names(facts, argument.right)
    return []


def _counts(facts: FileFacts, loop: ast.AST, target: ast.AST) -> bool:
    """`for i in range(...)` (or over `list(range(...))`, `[i for i in range(...)]`, a name bound once to
    one of those) or the index of `for i, x in enumerate(...)`; a comprehension's `for` alike."""
    if not isinstance(loop, (ast.For, ast.AsyncFor, ast.comprehension)):
        return False
    counted = _counted_range(facts, loop.iter, 0)
    if counted is not None:
        return loop.target is target and not _few_iterations(facts, counted)
    return isinstance(loop.iter, ast.Call) and facts.resolve(loop.iter.func) == "builtins.enumerate" \
        and isinstance(loop.target, ast.Tuple) and bool(loop.target.elts) and loop.target.elts[0] is target


def _counted_range(facts: FileFacts, sequence: ast.expr, depth: int) -> ast.Call | None:
    """The `range(...)` whose numbers `sequence` holds, in order: `range(n)`, `list(range(n))`,
    `[i for i in range(n)]`, or a name bound once to one of those."""
    if depth > 3:
        return None
    if isinstance(sequence, ast.Name):
        bindings = facts.bindings_of(sequence)
        if len(bindings) == 1 and bindings[0].kind == "assign" and bindings[0].value is not None:
            return _counted_range(facts, bindings[0].value, depth + 1)
        return None
    if isinstance(sequence, ast.Call):
        source = facts.resolve(sequence.func)
        if source == "builtins.range":
            return sequence
        if source in ("builtins.list", "builtins.tuple") and len(sequence.args) == 1 and not sequence.keywords:
            return _counted_range(facts, sequence.args[0], depth + 1)
        return None
    if isinstance(sequence, (ast.ListComp, ast.GeneratorExp)) and len(sequence.generators) == 1:
        generator = sequence.generators[0]
        if not generator.ifs and not generator.is_async and isinstance(generator.target, ast.Name) \
                and isinstance(sequence.elt, ast.Name) and sequence.elt.id == generator.target.id:
            return _counted_range(facts, generator.iter, depth + 1)
    return None


def _few_iterations(facts: FileFacts, range_call: ast.Call) -> bool:
    """`range(3)`, `range(EPOCHS)` with `EPOCHS = 3`: fewer traces than TensorFlow's own retracing
    warning threshold; bounded, so fine."""
    numbers = [_int_constant(facts, a) for a in range_call.args]
    if None in numbers or not 1 <= len(numbers) <= 3 or (len(numbers) == 3 and numbers[2] == 0):
        return False
    return len(range(*numbers)) < FEW_TRACES  # type: ignore[arg-type]


def _int_constant(facts: FileFacts, expr: ast.expr) -> int | None:
    """A literal int, or a module-level name bound once to one."""
    if isinstance(expr, ast.Name):
        value = facts.module_constant(expr)
        expr = value if value is not None else expr
    return expr.value if isinstance(expr, ast.Constant) and type(expr.value) is int else None


# -- values that reach the tf.function through an eager helper ------------------------------------------
def _changing_through_helper(facts: FileFacts, argument: ast.expr, helper: FunctionInfo | None,
                             schedulers: list[_Scheduler], memo: dict[tuple[int, str, str], str | None],
                             via: str = "", depth: int = 0) -> str | None:
    """`helper(i)` called in a loop (or handed to Keras' LearningRateScheduler, which calls it every
    epoch), where the eager `helper` passes its parameter on to the tf.function: one trace per value.
    Followed up to two helpers deep; each (helper, parameter) is answered once (`memo`)."""
    if helper is None or depth >= 2 or facts.is_graph_function(helper):
        return None
    name = "a lambda" if isinstance(helper.node, ast.Lambda) else f"`{helper.name}`"
    via = f", through {name}" if not via else f", through {name} and {via[len(', through '):]}"
    for parameter in _helper_parameters(facts, argument, helper):
        key = (id(helper), parameter, via)
        if key not in memo:
            memo[key] = None  # a helper that reaches itself again adds nothing
            memo[key] = _parameter_changes(facts, helper, parameter, schedulers, memo, via, depth)
        if memo[key] is not None:
            return memo[key]
    return None


def _parameter_changes(facts: FileFacts, helper: FunctionInfo, parameter: str, schedulers: list[_Scheduler],
                       memo: dict[tuple[int, str, str], str | None], via: str, depth: int) -> str | None:
    for scheduler in schedulers:
        if helper in scheduler.targets and parameter == _epoch_parameter(helper, scheduler.schedule):
            return f"epoch number Keras' `LearningRateScheduler` passes ({facts.line_name(scheduler.call.lineno)}{via})"
    for call, caller in facts.callers(helper):
        if facts.in_graph_code(call):
            continue
        given = _argument_for(helper, call, parameter)
        if given is None:
            continue
        reason = _loop_counter(facts, given, call, via) \
            or _changing_through_helper(facts, given, caller, schedulers, memo, via, depth + 1)
        if reason is not None:
            return reason
    return None


def _helper_parameters(facts: FileFacts, argument: ast.expr, helper: FunctionInfo) -> list[str]:
    """The parameters of `helper` whose Python value `argument` is (`i`, `float(i)`, `i * 2`, or a name
    the helper computes once from them); never one the helper binds again."""
    found = []
    for name in _number_names(facts, argument):
        bindings = facts.bindings_of(name)
        if len(bindings) != 1:
            continue
        binding = bindings[0]
        if binding.kind == "param" and facts.is_parameter(name, helper):
            found.append(name.id)
        elif binding.kind == "assign" and binding.value is not None and facts.function_of(binding.node) is helper \
                and _is_arithmetic(facts, binding.value):
            found.extend(n.id for n in _number_names(facts, binding.value)
                         if facts.is_parameter(n, helper) and len(facts.bindings_of(n)) == 1)
    return found


def _positional(function: FunctionInfo, callee: ast.expr) -> list[str]:
    """The positional parameters a call through `callee` fills (`self` is bound already for `obj.method`)."""
    names = [a.arg for a in function.node.args.posonlyargs + function.node.args.args]
    return names[1:] if function.cls is not None and isinstance(callee, ast.Attribute) else names


def _argument_for(function: FunctionInfo, call: ast.Call, parameter: str) -> ast.expr | None:
    """The argument `call` gives `parameter` of `function` (None: left to its default, or behind `*args`)."""
    for keyword in call.keywords:
        if keyword.arg == parameter:
            return keyword.value
    positional = _positional(function, call.func)
    if parameter not in positional:
        return None
    position = positional.index(parameter)
    if position >= len(call.args) or any(isinstance(a, ast.Starred) for a in call.args[:position + 1]):
        return None
    return call.args[position]



# -- Keras' LearningRateScheduler ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _Scheduler:
    """A `LearningRateScheduler(schedule)` call of any Keras spelling that runs eagerly and for more than
    a few epochs, with the schedule given and the functions of this file it can be."""

    call: ast.Call
    schedule: ast.expr
    targets: tuple[FunctionInfo, ...]


def _schedulers(facts: FileFacts) -> list[_Scheduler]:
    found = []
    epochs = _callback_epochs(facts)
    for call, caller in facts.calls:
        qualified = facts.resolve(call.func) or ""
        if qualified.rsplit(".", 1)[-1] != "LearningRateScheduler" or "keras" not in qualified \
                or facts.is_graph_function(caller):
            continue
        schedule = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "schedule"), None)
        runs = epochs.get(id(call))
        if schedule is None or isinstance(schedule, ast.Starred) \
                or runs and all(e is not None and e < FEW_TRACES for e in runs):
            continue
        found.append(_Scheduler(call, schedule, tuple(facts.function_target(schedule))))
    return found


def _callback_epochs(facts: FileFacts) -> dict[int, list[int | None]]:
    """For each call made into a callback of `fit(..., callbacks=[...])` (by id, as the list's element or
    through a name bound to it), the epochs of those fits: a literal or a module constant (None: not
    known); `fit`'s default is one epoch. A scheduler only ever in fits of a few epochs traces a few times."""
    epochs: dict[int, list[int | None]] = {}
    for call, _ in facts.calls:
        if not (isinstance(call.func, ast.Attribute) and call.func.attr in ("fit", "fit_generator")):
            continue
        callbacks = next((k.value for k in call.keywords if k.arg == "callbacks"), None)
        if not isinstance(callbacks, (ast.List, ast.Tuple)):
            continue
        given = next((k.value for k in call.keywords if k.arg == "epochs"), None)
        count = 1 if given is None else _int_constant(facts, given)
        for element in callbacks.elts:
            made = [b.value for b in facts.bindings_of(element)] if isinstance(element, ast.Name) else [element]
            for value in made:
                if isinstance(value, ast.Call):
                    epochs.setdefault(id(value), []).append(count)
    return epochs


def _epoch_parameter(function: FunctionInfo, schedule: ast.expr) -> str | None:
    """The parameter Keras gives the epoch: the schedule's first positional one."""
    positional = _positional(function, schedule)
    return positional[0] if positional else None


def _epoch_changes(facts: FileFacts, function: FunctionInfo, schedule: ast.expr) -> bool:
    """The tf.function given as a schedule gets a new epoch on every call (unless it indexes Python with it)."""
    parameter = _epoch_parameter(function, schedule)
    return parameter is not None and not _indexes_python(facts, function, parameter)


def _new_plain_object(facts: FileFacts, argument: ast.expr, tf_call: TfFunctionCall,
                      object_lines: dict[int, int]) -> str | None:
    """`f(Config())` repeated (in a loop, or at a second call site) with a plain Python class."""
    if not isinstance(argument, ast.Call):
        return None
    cls = facts.called_class(argument)
    if cls is None or not _plain_class(facts, cls, 0):
        return None
    in_loop = bool(facts.loops_around(tf_call.call))
    earlier = object_lines.get(id(tf_call.identity), tf_call.call.lineno) < tf_call.call.lineno
    return f"new `{cls.name}` instance (compared by identity)" if in_loop or earlier else None


def _first_object_lines(facts: FileFacts, calls: list[TfFunctionCall]) -> dict[int, int]:
    """For each tf.function object (by identity), the first line that calls it with a new instance of a
    class of this file: found once, not by scanning every call again for each argument."""
    lines: dict[int, int] = {}
    for call in calls:
        if any(facts.called_class(a) is not None for a in call.arguments.values() if isinstance(a, ast.Call)):
            key = id(call.identity)
            lines[key] = min(lines.get(key, call.call.lineno), call.call.lineno)
    return lines


def _plain_class(facts: FileFacts, cls: ClassInfo, depth: int) -> bool:
    """A class of this file with no trace type: not Keras/tf.Module, no decorators, no __eq__/__hash__."""
    if depth > 8 or cls.node.decorator_list or cls.node.keywords or facts.class_kind(cls) != kinds.OBJECT:
        return False
    if any(name in cls.methods for name in _TRACE_IDENTITY_METHODS):
        return False
    for base in cls.node.bases:
        if isinstance(base, ast.Name) and base.id == "object":
            continue
        local = [b for b in facts.bindings_of(base) if b.kind == "class"] if isinstance(base, ast.Name) else []
        base_info = facts.class_info(local[0].node) if local else None
        if base_info is None or not _plain_class(facts, base_info, depth + 1):
            return False
    return True


def _new_numbers(calls: list[TfFunctionCall], value_of: ValueOf) -> Iterator[tuple[TfFunctionCall, str, ast.expr]]:
    """Calls that give a parameter of a tf.function object a number no earlier call gave it (one that
    can be several numbers counts from its first call): a new trace each. A number given again reuses
    its trace, so `f(x, 209)` after `f(x, 389)` and `f(x, 209)` is no new finding."""
    seen: dict[tuple[int, str], set[object]] = {}
    for tf_call in calls:
        for parameter, argument in tf_call.arguments.items():
            found = value_of(tf_call, parameter, argument)
            if not found:
                continue
            earlier = seen.setdefault((id(tf_call.identity), parameter), set())
            new = set(found) - earlier
            if new and (earlier or len(new) > 1):
                yield tf_call, parameter, argument
            earlier.update(found)


def _number_for(facts: FileFacts) -> ValueOf:
    """The Python numbers an argument is, for a parameter the function only uses as a tensor (else None):
    a literal, or a parameter of the eager helper making the call, as the literals its callers give it."""
    memo: dict[tuple[int, str, int], tuple[object, ...]] = {}

    def number(tf_call: TfFunctionCall, parameter: str, argument: ast.expr) -> tuple[object, ...] | None:
        value = _number_literal(argument)
        found = (value,) if value is not None else _helper_numbers(facts, argument, tf_call.caller, memo)
        if not found or not _only_tensor_uses(facts, tf_call.function, parameter):
            return None
        return found
    return number


def _helper_numbers(facts: FileFacts, argument: ast.expr, helper: FunctionInfo | None,
                    memo: dict[tuple[int, str, int], tuple[object, ...]], depth: int = 0) -> tuple[object, ...]:
    """`def plot(idx): ig(x, idx)` with `plot(555)` and `plot(780)`: (555, 780), the literal numbers the
    callers of the eager helper give the parameter (its literal default where a call leaves it out),
    followed through a second helper that passes its own parameter on; once per (helper, parameter)."""
    if helper is None or facts.is_graph_function(helper) \
            or not (isinstance(argument, ast.Name) and facts.is_parameter(argument, helper)) \
            or len(facts.bindings_of(argument)) != 1:
        return ()
    key = (id(helper), argument.id, depth)
    if key in memo:
        return memo[key]
    memo[key] = ()  # a helper that reaches itself again adds nothing
    found: list[object] = []
    for call, caller in facts.callers(helper):
        if facts.in_graph_code(call) or any(isinstance(a, ast.Starred) for a in call.args) \
                or any(k.arg is None for k in call.keywords):
            continue
        given = _argument_for(helper, call, argument.id)
        value = _number_literal(given if given is not None else helper.default_of(argument.id))
        if value is not None:
            found.append(value)
        elif given is not None and depth < 1:
            found.extend(_helper_numbers(facts, given, caller, memo, depth + 1))
    memo[key] = tuple(found)
    return memo[key]


def _number_literal(expr: ast.expr | None) -> object | None:
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        inner = _number_literal(expr.operand)
        return -inner if isinstance(inner, (int, float)) else None  # type: ignore[operator]
    if isinstance(expr, ast.Constant) and type(expr.value) in (int, float):
        return expr.value
    return None


def _only_tensor_uses(facts: FileFacts, function: FunctionInfo, parameter: str, depth: int = 0) -> bool:
    """The parameter is given to a TensorFlow op and never needs its Python value (range, if, layer sizes).

    A tensor's index (`probs[:, class_idx]`) takes a tensor as well; a function of this file it is passed
    to (`compute_gradients(..., class_idx)`) is followed, two calls deep, and must use it the same way.
    """
    tensor_use = False
    for use in _parameter_uses(facts, function, parameter):
        given, parent = use, facts.parent(use)
        while isinstance(parent, (ast.UnaryOp, ast.BinOp)):  # `tf.exp(-rate)`: the op still gets it
            given, parent = parent, facts.parent(parent)
        if isinstance(parent, ast.keyword):
            parent = facts.parent(parent)
        if isinstance(parent, ast.Call) and use is not parent.func:
            passed_on = _passed_to_local(facts, parent, given, depth)
            if passed_on is not None:
                if not passed_on:
                    return False
                tensor_use = True
                continue
            qualified = facts.resolve(parent.func) or ""
            if qualified == "tensorflow.print" or facts.kinds(parent) & {kinds.TENSOR, kinds.TENSOR_ARRAY}:
                tensor_use = tensor_use or qualified != "tensorflow.print"
                continue
            if qualified != "builtins.print":
                return False
        elif _tensor_index(facts, given, parent):
            tensor_use = True
        elif isinstance(parent, (ast.If, ast.While, ast.IfExp, ast.Subscript, ast.Compare, ast.BoolOp)):
            return False
    return tensor_use


def _tensor_index(facts: FileFacts, given: ast.AST, parent: ast.AST | None) -> bool:
    """`probs[:, i]`, `x[i + 1]`: an index into a tensor, which a tensor serves as well as a Python int."""
    while isinstance(parent, (ast.Tuple, ast.Slice)):
        given, parent = parent, facts.parent(parent)
    return isinstance(parent, ast.Subscript) and parent.slice is given and facts.surely_tensor(parent.value)


def _passed_to_local(facts: FileFacts, call: ast.Call, given: ast.AST, depth: int) -> bool | None:
    """For an argument of a call of a function of this file: whether that function, too, only uses the
    parameter it binds as a tensor (None: not such a call)."""
    callee = facts.called_function(call)
    if callee is None or depth >= 2:
        return None
    for parameter in callee.params:
        if _argument_for(callee, call, parameter) is given:
            return _only_tensor_uses(facts, callee, parameter, depth + 1)
    return None
