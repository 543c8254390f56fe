"""What a value can be, as the engine names it: a leaf module every layer above may import.

A name can be bound to several values, so the engine answers "what can this hold?" with a set of these
kinds (tfcheck.engine.values computes it). Keeping the names here, apart from the analysis, lets the
index (class kinds) and the rules speak of kinds without importing the analysis that finds them.
"""

from __future__ import annotations

LIST, DICT, SET, TUPLE = "list", "dict", "set", "tuple"
ITERATOR, RANGE = "iterator", "range"
NDARRAY, TENSOR, VARIABLE, DATASET = "ndarray", "tensor", "variable", "dataset"
# A tf.TensorArray: not a tensor (no arithmetic, no `.numpy()`), but made of graph tensors while tracing,
# so storing one where it outlives the call leaks the trace's graph like a tensor (TFC009).
TENSOR_ARRAY = "tensor_array"
NUMBER, STRING, NONE = "number", "string", "none"
TF_FUNCTION, OPTIMIZER, MODEL, LAYER, OBJECT = "tf_function", "optimizer", "model", "layer", "object"
FUNCTION = "function"
STRATEGY = "strategy"  # a tf.distribute strategy: `strategy.run(fn)` in graph code traces `fn`
CONTAINERS = frozenset({LIST, DICT, SET})
# Methods that change a list, dict, set or deque in place.
MUTATING_METHODS = frozenset({
    "append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "add", "discard",
    "popitem", "sort", "reverse", "appendleft", "extendleft", "popleft",
})
# Values whose loops and iterators AutoGraph turns into graph operations.
GRAPH_KINDS = frozenset({TENSOR, DATASET, VARIABLE})
# Values that are TensorFlow/Keras objects, not plain Python state: assigning or reading them is the
# business of other rules (TFC004 creates variables; reading a Variable or a layer is fine).
TF_OBJECT_KINDS = frozenset({VARIABLE, MODEL, LAYER, OPTIMIZER, TF_FUNCTION, DATASET, FUNCTION, STRATEGY})
# Plain Python values: traced as constants.
PLAIN_KINDS = frozenset({NUMBER, STRING, NONE, LIST, DICT, SET, TUPLE})
