"""TFC013: a tf.function created in a loop, or created and called on every call of a function."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tfcheck.engine import kinds
from tfcheck.engine.facts import FileFacts, LoopedCall
from tfcheck.engine.scopes import FunctionInfo
from tfcheck.findings import Finding, Severity
from tfcheck.rule import Rule

# Functions that run once per process, object or test (or compile on purpose): creating a tf.function in
# them and calling it is fine. Matched against the name without leading underscores.
_RUN_ONCE = ("test", "main", "setUp", "setup", "init", "build", "shutdown", "compile")
# What a local of the creating function may be and still be the same on every call: a strategy
# (`tf.distribute.get_strategy()`), a number, a string, None.
_SAME_EACH_CALL = frozenset({kinds.STRATEGY, kinds.NUMBER, kinds.STRING, kinds.NONE})


class FunctionInLoop(Rule):
    """A tf.function created where it is used again and again traces a new graph every time.

    ## What it does
    Finds `tf.function(...)` (or a def decorated with `@tf.function`) that is created inside a loop and
    called in the same loop, or created inside a function that calls it and then drops it, so every
    call of that function makes a new tf.function. Factories that return or store the tf.function,
    drivers that create it once and call it in a loop, functions that run once (`main`, `build`,
    `initialize_*`, test methods, test files) and functions nested in other functions (steps handed to
    `strategy.run`, which usually runs inside a tf.function) are fine. Creation inside graph code (at trace
    time only) is not reported.

    A driver, or a function that wraps a step over its own parameters, is reported when a loop of the
    file calls it (once per epoch, per checkpoint) with the same values for everything the step reads:
    the same model, a strategy, constants. A loop that passes a new model each time (to the step or to
    what it reads), or a function that builds its own model or metrics for the step, needs a new trace
    anyway; a loop over a few literal items traces a few times.

    ## Why is this bad
    Each `tf.function` object has its own trace cache: a new object traces again from scratch on its
    first call. Creating one per iteration (or per call) pays the full tracing cost, often much more
    than running the graph, every time, and keeps growing memory with new graphs. The code is correct
    but slow, so the severity is WARNING.

    ## Example
    ```python
    for batch in dataset:
        step = tf.function(train_step)
        step(batch)

    def predict(x):
        return tf.function(model)(x)

    def train_epoch(model, dataset):
        step = tf.function(lambda batch: model.train_step(batch))
        for batch in dataset:
            step(batch)

    for epoch in range(epochs):
        train_epoch(model, dataset)  # a new trace every epoch
    ```

    ## Use instead
    ```python
    step = tf.function(train_step)
    for batch in dataset:
        step(batch)

    predict_fn = tf.function(model)

    def predict(x):
        return predict_fn(x)

    def train_epoch(step, dataset):
        for batch in dataset:
            step(batch)

    step = tf.function(lambda batch: model.train_step(batch))
    for epoch in range(epochs):
        train_epoch(step, dataset)
    ```
    """

    code = "TFC013"
    name = "function-in-loop"
    severity = Severity.WARNING
    opt_in = True
    must_flag = (
        "import tensorflow as tf\ndef train_step(b):\n    return b\n"
        "for batch in range(10):\n    step = tf.function(train_step)\n    step(batch)\n",
        "import tensorflow as tf\ndef predict(model, x):\n    return tf.function(model)(x)\n",
        "import tensorflow as tf\ndef run(xs):\n    for x in xs:\n        @tf.function\n"
        "        def f(y):\n            return y * 2\n        f(x)\n",
        "import tensorflow as tf\nclass Runner:\n    def __call__(self, x):\n"
        "        fn = tf.function(self.impl)\n        return fn(x)\n    def impl(self, x):\n        return x\n",
        "import tensorflow as tf\ndef g(x):\n    return x\nwhile True:\n    tf.function(g)(1)\n",
        # A layer's `call` (tf-models-official 2.20.0 official/vision/modeling/layers/nn_layers.py:1053): traced
        # under `fit`, but run eagerly whenever the layer is called outside a trace, a new function each time.
        "import tensorflow as tf\nclass Conv3D(tf.keras.layers.Conv3D):\n    def call(self, inputs):\n"
        "        conv_fn = tf.function(super(Conv3D, self).call, jit_compile=True)\n        return conv_fn(inputs)\n",
        # A step wrapped on every call of an epoch function that a loop calls with the same model (tensorflow/graphics
        # 3bb6a4b tensorflow_graphics/projects/points_to_3Dobjects/train_multi_objects/train.py:407-437 and 577-579, cut down).
        "import tensorflow as tf\ndef _train_epoch(epoch, model, dataset):\n    strategy = tf.distribute.get_strategy()\n"
        "    def distributed_step(sample):\n        return strategy.run(model.train_sample, args=(sample,))\n"
        "    if FLAGS.run_graph:\n        distributed_step = tf.function(distributed_step)\n"
        "    for sample in dataset:\n        distributed_step(sample)\n"
        "def train(dataset):\n    model = get_model()\n    for epoch in range(FLAGS.num_epochs):\n"
        "        _train_epoch(epoch, model, dataset)\n",
    )
    must_not_flag = (
        # Called in a loop, but with a new model each time: the new function needs its own trace anyway.
        "import tensorflow as tf\ndef fit(model, dataset):\n    @tf.function\n    def step(x):\n        return model(x)\n"
        "    for x in dataset:\n        step(x)\nfor units in [8, 16, 32, 64, 128]:\n"
        "    fit(tf.keras.Sequential([tf.keras.layers.Dense(units)]), ds)\n",
        "import tensorflow as tf\ndef fit(model, dataset):\n    @tf.function\n    def step(x):\n        return model(x)\n"
        "    for x in dataset:\n        step(x)\nfor units in range(10):\n    model = make_model(units)\n    fit(model, ds)\n",
        # ... with a model it builds itself, and over a few splits: a bounded few traces.
        "import tensorflow as tf\ndef run(dataset):\n    model = tf.keras.Sequential([tf.keras.layers.Dense(2)])\n"
        "    step = tf.function(lambda x: model(x))\n    for x in dataset:\n        step(x)\nfor _ in range(10):\n    run(ds)\n",
        "import tensorflow as tf\ndef evaluate(model, split):\n    step = tf.function(lambda x: model(x))\n"
        "    for x in load(split):\n        step(x)\nfor split in ('val', 'test'):\n    evaluate(model, split)\n",
        # ... a new list of models handed to the tf.function (google/uncertainty-baselines 3a5e2b1 experimental/
        # shoshin/generate_bias_table_lib.py:471-566, cut down), new metrics read by the step it calls (google-research/
        # simclr tf2/run.py:348-398): hoisting the tf.function would not save the traces.
        "import tensorflow as tf\ndef calculate_tracin_values(dataset, model_checkpoints):\n    @tf.function\n"
        "    def run_self_influence(batch, checkpoints):\n        return [m(batch) for m in checkpoints]\n"
        "    for batch in dataset:\n        run_self_influence(batch, model_checkpoints)\n"
        "for model in trained_models:\n    calculate_tracin_values(ds, [model])\n",
        "import tensorflow as tf\ndef perform_evaluation(model, ds, strategy):\n"
        "    accuracy = tf.keras.metrics.Accuracy('eval/accuracy')\n    def single_step(features, labels):\n"
        "        accuracy.update_state(labels, model(features))\n    @tf.function\n    def run_single_step(iterator):\n"
        "        strategy.run(single_step, next(iterator))\n    iterator = iter(ds)\n    for i in range(100):\n"
        "        run_single_step(iterator)\n"
        "for ckpt in tf.train.checkpoints_iterator(model_dir):\n    perform_evaluation(model, ds, strategy)\n",
        # A function over each call's own parameters (tensorflow/gnn 5d7251e graph/batching_utils.py:488-530, cut down).
        "import tensorflow as tf\ndef get_constraints(ds, sample_size):\n    @tf.function\n"
        "    def get_sizes():\n        return ds.take(sample_size).reduce(0, lambda a, b: a + 1)\n"
        "    return get_sizes()\n",
        # A composite op marked for TFLite where the export traces (google/automl 6a54c87 efficientdet/tf2/postprocess.py:365).
        "import tensorflow as tf\ndef postprocess(boxes):\n    @tf.function(experimental_implements='TFLite_Detection_PostProcess')\n"
        "    def dummy_post_processing(box_encodings):\n        return tf.zeros([1])\n"
        "    return dummy_post_processing(boxes)\n",
        # keras-cv 94b0a55 benchmarks/vectorized_auto_contrast.py:131-147, cut down: one tf.function per layer.
        "import tensorflow as tf\nfor aug in [tf.keras.layers.RandomFlip, tf.keras.layers.RandomZoom]:\n"
        "    layer = aug()\n    @tf.function()\n    def apply_aug(inputs):\n        return layer(inputs)\n"
        "    for n in [10, 100]:\n        apply_aug(tf.zeros([n, 8, 8, 3]))\n",
        "import tensorflow as tf\ndef train_step(b):\n    return b\n"
        "step = tf.function(train_step)\nfor batch in range(10):\n    step(batch)\n",
        # The guide: a new Function forces retracing on purpose, at module level.
        "import tensorflow as tf\ndef f():\n    print('Tracing!')\n    tf.print('Executing')\n"
        "tf.function(f)()\ntf.function(f)()\n",
        # Factories.
        "import tensorflow as tf\ndef make(fn):\n    return tf.function(fn, jit_compile=True)\n",
        "import tensorflow as tf\ndef make(model):\n    @tf.function\n    def serve(x):\n        return model(x)\n"
        "    serve(tf.zeros([1, 3]))\n    return serve\n",
        "import tensorflow as tf\nclass T:\n    def compile(self):\n"
        "        self.train_function = tf.function(self.step)\n    def step(self, x):\n        return x\n",
        "import tensorflow as tf\nfns = []\nfor k in range(3):\n    fn = tf.function(lambda x: x * k)\n"
        "    fns.append(fn)\n    fn(1.0)\n",
        # A driver: created once per run, called in a loop.
        "import tensorflow as tf\ndef main(ds):\n    @tf.function\n    def step(b):\n        return b\n"
        "    for b in ds:\n        step(b)\n",
        # Runs once: a test method, a main function, TensorFlow's initialize_tpu_system_impl.
        "import tensorflow as tf\nclass T:\n    def test_xla(self, x):\n"
        "        fn = tf.function(lambda y: y * 2, jit_compile=True)\n        self.assertEqual(fn(x), 2)\n",
        "import tensorflow as tf\ndef initialize_tpu_system_impl(resolver):\n    @tf.function(autograph=False)\n"
        "    def _tpu_init_fn():\n        return tf.constant(1)\n    return _tpu_init_fn()\n",
        # A step function handed to strategy.run (tf-models-official's base_trainer.py).
        "import tensorflow as tf\nclass Trainer:\n    def train_step(self, iterator):\n"
        "        def step_fn(inputs):\n            fn = tf.function(self.task_step, jit_compile=True)\n"
        "            return fn(inputs)\n        self.strategy.run(step_fn, args=(next(iterator),))\n",
        # Explicit concrete functions.
        "import tensorflow as tf\ndef evaluate(m, x):\n    return m(x)\n"
        "for m in [1, 2]:\n    c = tf.function(evaluate).get_concrete_function(m, 1.0)\n",
        # Created inside graph code: only while tracing.
        "import tensorflow as tf\n@tf.function\ndef outer(x):\n    return tf.function(lambda y: y + 1)(x)\n",
        # ... also in a method reached only from graph code, through an object on `self`.
        "import tensorflow as tf\nclass Runner:\n    def run_inner(self, x):\n        inner = tf.function(lambda y: y * 2)\n"
        "        return inner(x)\nclass Net(tf.Module):\n    def __init__(self):\n        self.runner = Runner()\n"
        "    @tf.function\n    def __call__(self, x):\n        return self.runner.run_inner(x)\n",
    )

    def check(self, facts: FileFacts) -> Iterator[Finding]:
        if facts.is_test_file:
            return  # each test makes its tf.functions once, deliberately
        for creation, function in _creations(facts):
            if facts.is_graph_function(function) and not facts.keras_only(function):
                continue  # made once per trace; a layer's `call` also runs eagerly, once per call
            message = _repeated_creation(facts, creation, function)
            if message is not None:
                yield self.finding(facts, creation, message)


def _creations(facts: FileFacts) -> Iterator[tuple[ast.AST, FunctionInfo | None]]:
    """Every `tf.function(f)` call and `@tf.function` decorator, with the function the creation runs in."""
    for call, function in facts.calls:
        if call.args and facts.resolve(call.func) in facts.tf_function_names:
            yield call, function
    for info in facts.functions:
        decorator = facts.decorated_tf_function(info)
        if decorator is not None:
            yield info.node, facts.function_of(info.node)


def _repeated_creation(facts: FileFacts, creation: ast.AST, function: FunctionInfo | None) -> str | None:
    """Why this creation makes a new tf.function per use, or None when it is made once or escapes."""
    loop = facts.enclosing_loop(creation)
    uses = _uses(facts, creation, function)
    if uses is None or not uses:
        return None
    if loop is not None:
        if _varies_per_iteration(facts, creation, loop):
            return None  # each iteration wraps something else: a new trace per iteration is the point
        if any(facts.is_inside(use, loop) for use in uses):
            return ("tf.function created inside a loop and called in it: every iteration traces a new graph; "
                    "create it once, before the loop")
        return None
    if function is None or function.name.lstrip("_").startswith(_RUN_ONCE) or _is_callback(function) \
            or _marks_composite(creation):
        return None
    looped = _looped_with_same_values(facts, creation, function, uses)
    if looped is not None:
        return (f"tf.function created on every call of `{function.name}`, which a loop calls with the same values "
                f"({facts.line_name(looped.loop.lineno)}): every iteration traces a new graph; create it once, "
                f"outside `{function.name}`, and reuse it")
    if any(facts.enclosing_loop(use) is not None for use in uses) or _closes_over_call(facts, creation, function):
        return None
    return (f"tf.function created and called on every call of `{function.name}`: each call traces a new graph; "
            "create it once (at module level or in __init__) and reuse it")


def _varies_per_iteration(facts: FileFacts, creation: ast.AST, loop: ast.AST) -> bool:
    """The created function reads a name the loop binds anew on each iteration (its target, or a name
    assigned in its body): keras-cv 94b0a55's benchmarks/vectorized_*.py wrap each augmentation layer
    of a list in a tf.function of its own to time its graph mode."""
    body = creation.body if isinstance(creation, (ast.FunctionDef, ast.AsyncFunctionDef)) else creation.args
    loads = (node for part in body for node in ast.walk(part) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load))
    return any(facts.is_inside(binding.node, loop) and not facts.is_inside(binding.node, creation)
               and binding.node is not creation for name in loads for binding in facts.bindings_of(name))


def _looped_with_same_values(facts: FileFacts, creation: ast.AST, function: FunctionInfo,
                             uses: list[ast.AST]) -> LoopedCall | None:
    """A loop in eager code that calls `function` again and again (more than a few literal items) with
    the same values for everything the created tf.function reads of `function`'s scope, and for the
    parameters `function` hands it (unless tensors): each iteration makes a tf.function equal to the
    last one and traces it again (tensorflow/graphics 3bb6a4b points_to_3Dobjects/train_multi_objects/
    train.py: `_train_epoch` wraps its step once per epoch). A loop that passes a new model, or a function
    that builds new metrics for its step, needs a new trace anyway (google/uncertainty-baselines
    generate_bias_table_lib.py:512 gets `[model]` per call; google-research/simclr tf2/run.py:390)."""
    captured = _captured_names(facts, creation, function)
    passed = [argument for use in uses if isinstance(use, ast.Call) for argument in use.args
              if facts.is_parameter(argument, function)]
    for looped in facts.looped_calls(function):
        if facts.in_graph_code(looped.call) or _few_literal_items(looped.loop):
            continue
        if all(_same_each_call(facts, name, function, looped, creation) for name in captured) \
                and all(_same_each_call(facts, name, function, looped, creation, tensors_differ=True) for name in passed):
            return looped
    return None


def _captured_names(facts: FileFacts, creation: ast.AST, function: FunctionInfo) -> list[ast.Name]:
    """The reads of `function`'s parameters and locals by what the creation wraps: the body it defines,
    the expression it wraps (`tf.function(model)`), its decorator's arguments."""
    parts = _defined_body(facts, creation, function)
    if isinstance(creation, ast.Call):
        parts += [*creation.args, *(k.value for k in creation.keywords)]
    else:
        parts += list(creation.decorator_list)  # type: ignore[attr-defined]
    captured: list[ast.Name] = []
    expanded: set[ast.AST] = {creation}
    while parts:
        for node in ast.walk(parts.pop()):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and facts.binding_scope(node) is function.scope:
                captured.append(node)
                parts += _nested_def_bodies(facts, node, expanded)
    return captured


def _nested_def_bodies(facts: FileFacts, name: ast.Name, expanded: set[ast.AST]) -> list[ast.AST]:
    """The bodies of the defs of the creating function that `name` is, not expanded before: what they
    read is read by the tf.function that calls them (simclr's `run_single_step` calls `single_step`)."""
    defs = [b.node for b in facts.bindings_of(name) if b.kind == "def" and b.node not in expanded]
    expanded.update(defs)
    return [part for node in defs for part in node.body]  # type: ignore[attr-defined]


def _same_each_call(facts: FileFacts, name: ast.Name, function: FunctionInfo, looped: LoopedCall,
                    creation: ast.AST, tensors_differ: bool = False) -> bool:
    """Whether `name` holds the same thing on every call the loop makes: a parameter given an argument
    the loop does not rebind or build anew (the receiver, for `self`), a nested def, or a local that
    is a strategy or a plain constant (a model or dataset built in `function` is new on each call).
    With `tensors_differ`, a parameter passed to the tf.function may be a new tensor each time: a
    tf.function made once would not trace again for it."""
    for binding in facts.bindings_of(name):
        if binding.value is creation:
            continue  # `step = tf.function(step)`: the creation itself
        if binding.kind == "param":
            argument = looped.arguments.get(name.id)
            if argument is None and function.cls is not None and function.params[:1] == [name.id] \
                    and isinstance(looped.call.func, ast.Attribute):
                argument = looped.call.func.value
            if argument is not None and _changes_per_iteration(facts, argument, looped.loop) \
                    and not (tensors_differ and _tensor_data(facts, argument)):
                return False
        elif binding.kind not in ("def", "class", "import"):
            found = facts.kinds(binding.value) if binding.value is not None else set()
            if not found or not found <= _SAME_EACH_CALL:
                return False
    return True


def _tensor_data(facts: FileFacts, expr: ast.expr) -> bool:
    """A tensor or array: traced by shape and dtype, not by identity."""
    found = facts.kinds(expr)
    return bool(found) and found <= {kinds.TENSOR, kinds.NDARRAY, kinds.VARIABLE}


def _changes_per_iteration(facts: FileFacts, expr: ast.expr, loop: ast.AST) -> bool:
    """An argument that builds something (any call) or reads a name the loop binds."""
    return any(isinstance(node, ast.Call) or isinstance(node, ast.Name) and any(
        facts.is_inside(binding.node, loop) for binding in facts.bindings_of(node)) for node in ast.walk(expr))


def _few_literal_items(loop: ast.AST) -> bool:
    """`for split in ("val", "test")`: a few traces, bounded (TensorFlow warns from five on)."""
    return isinstance(loop, ast.For) and isinstance(loop.iter, (ast.List, ast.Tuple)) and len(loop.iter.elts) < 5


def _closes_over_call(facts: FileFacts, creation: ast.AST, function: FunctionInfo) -> bool:
    """A new function, defined in `function`, that reads `function`'s own parameters or locals: each call
    needs a function of its own (tensorflow/gnn 5d7251e graph/batching_utils.py:488 traces one over each
    call's sample size; tensorflow/federated's computations close over the models they build). Wrapping
    an existing function (`tf.function(model)`, `tf.function(self.impl)`) is not one."""
    body = _defined_body(facts, creation, function)
    return any(facts.binding_scope(node) is function.scope for part in body for node in ast.walk(part)
               if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load))


def _defined_body(facts: FileFacts, creation: ast.AST, function: FunctionInfo) -> list[ast.AST]:
    """The body of the function a creation makes when it is defined right there: the decorated def, a
    lambda, or a def of `function` passed by name; nothing for an existing function wrapped."""
    if isinstance(creation, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return list(creation.body)
    argument = creation.args[0] if isinstance(creation, ast.Call) and creation.args else None
    if isinstance(argument, ast.Lambda):
        return [argument.body]
    defined = facts.function_target(argument) if isinstance(argument, ast.Name) else []
    return [part for target in defined if target.parent is function for part in target.node.body]


def _marks_composite(creation: ast.AST) -> bool:
    """`@tf.function(experimental_implements=...)`: it marks a composite op for TFLite inside the trace that
    exports it (google/automl efficientdet/tf2/postprocess.py:365), so it is made there on purpose."""
    decorators = creation.decorator_list if isinstance(creation, (ast.FunctionDef, ast.AsyncFunctionDef)) else [creation]
    return any(isinstance(d, ast.Call) and any(k.arg == "experimental_implements" for k in d.keywords)
               for d in decorators)


def _is_callback(function: FunctionInfo) -> bool:
    """A function nested in another function: typically a step passed to `strategy.run` or a loop
    helper that runs inside a tf.function, where creating a tf.function happens once, while tracing."""
    return function.parent is not None and function.cls is None


def _uses(facts: FileFacts, creation: ast.AST, function: FunctionInfo | None) -> list[ast.AST] | None:
    """The calls of the created tf.function, or None when it escapes (returned, stored, passed on)."""
    parent = facts.parent(creation)
    if isinstance(creation, ast.Call) and isinstance(parent, ast.Call) and parent.func is creation:
        return [parent]
    name = _bound_name(facts, creation)
    if name is None:
        return None
    calls: list[ast.AST] = []
    for node in facts.loads_under(function).get(name, ()):
        if facts.is_inside(node, creation):
            continue  # `step = tf.function(step)` reads the name it rebinds
        call = facts.parent(node)
        if not (isinstance(call, ast.Call) and call.func is node) or facts.function_of(node) is not function:
            return None
        calls.append(call)
    return calls


def _bound_name(facts: FileFacts, creation: ast.AST) -> str | None:
    """The local name a creation is bound to: the decorated def's name, or `name = tf.function(...)`."""
    if isinstance(creation, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return creation.name
    parent = facts.parent(creation)
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
        return parent.targets[0].id
    return None
