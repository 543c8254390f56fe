"""Everything the build and the benchmark do with TensorFlow, in one place.

Tracing (`compiler/trace/tracing.py`) and benchmarking (`compiler/bench/latency.py`) both load the user's
tf.function, generate inputs, freeze and convert to TFLite, and run TensorFlow for reference
outputs; doing it here once keeps what is benchmarked the same as what was built: the same seeded
weights, the same inputs, the same TFLite conversion. Only child processes import this module's
TensorFlow: it is imported inside the functions, so importing the module costs nothing.
"""

from __future__ import annotations

import gc
import hashlib
import importlib
import itertools
import os
import random
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tfcheck.compiler.process.child import StepError
from tfcheck.compiler.process.messages import TraceRequest
from tfcheck.compiler.process.weights_file import WEIGHT_INPUT
from tfcheck.compiler.trace.unrolled_rnn import MAX_UNROLLED_STEPS
from tfcheck.runtime.manifest import TensorSpec

# Seeds Python, NumPy, TensorFlow and Keras before the user's module is imported, and the inputs.
SEED = 0
# TensorFlow's switch for its oneDNN kernels (on by default on x86 Linux), read at its first import.
ONEDNN_SWITCH = "TF_ENABLE_ONEDNN_OPTS"


def import_tensorflow(onednn: bool = True) -> Any:
    """TensorFlow, with every random generator seeded, so that randomly initialised weights (and
    so the frozen graph and the cache key) are the same in every process.

    `onednn=False` (the tracing child) turns TensorFlow's oneDNN kernels off, unless the
    environment sets `ONEDNN_SWITCH` itself; only the first import in a process can. Their
    allocator keeps every buffer it ever held: ConvNeXtXLarge's module, which runs the model once
    at import, left the tracing child 1.2 GB above TensorFlow and the weights, and TFLite's
    verification run (which copies the weights it is fed) took it to 4.6 GB; with TensorFlow's
    own kernels, 3.7 GB (docs/build.md, "Memory"). The reference outputs are TensorFlow's either way.
    """
    if not onednn:
        os.environ.setdefault(ONEDNN_SWITCH, "0")
    random.seed(SEED)
    np.random.seed(SEED)
    import keras
    import tensorflow as tf

    tf.random.set_seed(SEED)
    keras.utils.set_random_seed(SEED)
    return tf


@dataclass(frozen=True)
class Traceable:
    """What the build traces: a tf.function with an input_signature, and how its artifact is named."""

    tf_function: Any
    options: dict[str, Any]  # @tfcheck.aot's (`shapes` is read here)
    name: str  # the artifact name
    qualname: str  # the manifest's, which dispatch and `tfcheck.load` match it by
    source_fingerprint: str
    argument_names: list[str] | None = None  # None: the Python function's parameters
    owner: Any = None  # a loaded SavedModel: it owns the variables its signatures capture


def load_traceable(request: TraceRequest) -> Traceable:
    """The annotated function (or method of a module-level instance) that `request` names.

    A method is named `<instance>_<method>` unless `name=` was given, and its qualified name is
    `<module>.<instance>.<method>`: the artifact belongs to that instance, not to every instance
    of the class (runtime/dispatch.py).
    """
    from tfcheck.fingerprint import source_fingerprint

    wrapper = load_attribute(request.root, request.module, request.qualname)
    tf_function, options = _unwrap(wrapper)
    python_function = tf_function.python_function
    name = options.get("name") or request.qualname
    qualname = f"{python_function.__module__}.{python_function.__qualname__}"
    if request.instance:
        method = python_function.__name__
        qualname = f"{python_function.__module__}.{request.instance}.{method}"
        name = name if getattr(wrapper, "name_given", False) else f"{request.instance}_{method}"
    return Traceable(tf_function, options, name, qualname, source_fingerprint(tf_function))


def load_saved_signature(request: TraceRequest) -> Traceable:
    """Signature `request.qualname` of the SavedModel folder `request.saved_model`, as a
    tf.function over its keyword inputs in sorted order (the order `tf.nest` flattens them)."""
    import tensorflow as tf

    folder = Path(str(request.saved_model))
    try:
        loaded = tf.saved_model.load(str(folder))
    except Exception as error:  # noqa: BLE001 - a damaged or foreign SavedModel raises anything
        raise StepError(f"loading the SavedModel {request.path} failed: {type(error).__name__}: "
                        f"{_first_lines(str(error))}") from error
    signatures = loaded.signatures
    if request.qualname not in signatures:
        raise StepError(f"the SavedModel {request.path} has no signature {request.qualname!r}; its "
                        f"signatures: {', '.join(sorted(signatures)) or '(none)'}")
    signature = signatures[request.qualname]
    args, keywords = signature.structured_input_signature
    names = sorted(keywords)
    specs = [tf.TensorSpec(keywords[n].shape, keywords[n].dtype, name=n) for n in names]

    if args:
        raise StepError(f"signature {request.qualname!r} of {request.path} takes positional inputs; "
                        "SavedModel signatures take keyword inputs")

    def call(*values: Any) -> Any:
        return signature(**dict(zip(names, values)))

    digest = hashlib.sha256((folder / "saved_model.pb").read_bytes()).hexdigest()
    return Traceable(tf.function(call, input_signature=specs), {}, request.qualname,
                     f"{request.module}.{request.qualname}", digest, names, owner=loaded)


def load_function(root: str, module_name: str, qualname: str) -> tuple[Any, dict[str, Any]]:
    """The tf.function at the (dotted) `qualname` in `module_name`, unwrapped from
    `@tfcheck.aot`, and its aot options; StepError saying what is wrong."""
    return _unwrap(load_attribute(root, module_name, qualname))


def load_attribute(root: str, module_name: str, qualname: str) -> Any:
    """`module_name` imported with `root` first on sys.path, then the attribute path `qualname`
    (`classify`, or `model.serve` for a method of a module-level instance).

    Call `import_tensorflow` first, so that the module's weights are the build's.
    """
    sys.path.insert(0, root)
    try:
        value: Any = importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001 - the user's module can raise anything
        raise StepError(f"importing {module_name} failed: {type(error).__name__}: {error}") from error
    for part in qualname.split("."):
        if not hasattr(value, part):
            raise StepError(f"{module_name} has no attribute {qualname!r} after import")
        value = getattr(value, part)
    return value


def _unwrap(wrapper: Any) -> tuple[Any, dict[str, Any]]:
    tf_function = getattr(wrapper, "tf_function", wrapper)
    if not hasattr(tf_function, "get_concrete_function"):
        raise StepError("not a tf.function: put @tf.function under @tfcheck.aot")
    return tf_function, getattr(wrapper, "aot_options", {}) or {}


# The values of a generated int input that indexes no table: small positive ints, which also serve
# as sizes, counts and steps (`tf.range(n)`, `tf.zeros([n])`), low inclusive, high exclusive.
INT_VALUES = (1, 8)


def generate_inputs(specs: Sequence[TensorSpec],
                    values: Sequence[Sequence[float] | None] | None = None) -> list[np.ndarray]:
    """Deterministic inputs for specs of concrete shapes: normal floats, random booleans, ints in
    `INT_VALUES`; or, for a spec whose entry of `values` is a range [low, high) (`input_values`),
    ints or floats drawn uniformly from it. Without TensorFlow: the benchmark's TVM children never
    load it."""
    rng = np.random.default_rng(SEED)
    arrays = []
    for index, spec in enumerate(specs):
        dtype = _numpy_dtype(spec.dtype)
        shape = list(spec.shape)
        given = values[index] if values is not None and index < len(values) else None
        if dtype.kind == "f":
            drawn = rng.standard_normal(shape) if given is None else rng.uniform(given[0], given[1], size=shape)
            arrays.append(drawn.astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.random(shape) < 0.5)
        elif dtype.kind in "iu":
            low, high = INT_VALUES if given is None else (int(given[0]), int(given[1]))
            arrays.append(rng.integers(low, high, size=shape).astype(dtype))
        else:
            raise StepError(f"input {spec.name!r} has dtype {spec.dtype}, which the build "
                            "cannot generate test inputs for")
    return arrays


# Ops whose output holds (some of) the values of their inputs at these positions (None: every
# input), which an index reaches a lookup through: Keras' Embedding casts its ids and, in Keras 3,
# selects `ids + rows` for negative ones (SelectV2); models reshape, slice and stack them.
_VALUES_PASS = {
    "Identity": (0,), "IdentityN": None, "StopGradient": (0,), "Snapshot": (0,), "Cast": (0,), "Reshape": (0,),
    "ExpandDims": (0,), "Squeeze": (0,), "Transpose": (0,), "StridedSlice": (0,), "Slice": (0,), "Tile": (0,),
    "BroadcastTo": (0,), "ReverseV2": (0,), "Pack": None, "Unpack": (0,), "ConcatV2": "all but last",
    "Split": (1,), "SplitV": (0,), "SelectV2": (1, 2), "Select": (1, 2), "GatherV2": (0,), "Gather": (0,),
}
# Lookups: op -> the position of its indices.
_LOOKUPS = {"GatherV2": 1, "Gather": 1, "ResourceGather": 1, "GatherNd": 1, "ResourceGatherNd": 1}


def index_tables(concrete: Any, count: int) -> list[int | None]:
    """For each of the first `count` inputs of `concrete` (the user's, in flattening order): the
    fewest rows of the tables it indexes (a tf.gather's or an embedding's axis, a gather_nd's
    leading axes), reached through ops that pass values on (`_VALUES_PASS`), or None for an input
    that indexes none of known size. kpe/bert-for-tf2's token type ids index a table of 2 rows,
    and the build's ints of 1 to 7 made TensorFlow itself fail (issue 42)."""
    return [_fewest_rows(tensor) if tensor.dtype.is_integer else None for tensor in concrete.inputs[:count]]


def _fewest_rows(start: Any) -> int | None:
    fewest, seen, pending = None, set(), [start]
    while pending:
        tensor = pending.pop()
        if tensor.name in seen:
            continue
        seen.add(tensor.name)
        for consumer in tensor.consumers():
            positions = [i for i, each in enumerate(consumer.inputs) if each is tensor]
            if consumer.type in _LOOKUPS and _LOOKUPS[consumer.type] in positions:
                rows = _rows(consumer)
                if rows:
                    fewest = rows if fewest is None else min(fewest, rows)
            passing = _VALUES_PASS.get(consumer.type, ())
            if passing == "all but last":
                passing = tuple(range(len(consumer.inputs) - 1))
            if passing is None or any(i in passing for i in positions):
                pending.extend(consumer.outputs)
    return fewest


def _rows(lookup: Any) -> int | None:
    """How many rows the lookup's indices may address: the size of the gathered axis (of each
    leading axis a gather_nd's last index dimension spans, the fewest), when known."""
    import tensorflow as tf

    shape = _table_shape(lookup)
    if shape is None or shape.rank is None:
        return None
    sizes = shape.as_list()
    batch = lookup.get_attr("batch_dims") if "batch_dims" in lookup.node_def.attr else 0
    if lookup.type.endswith("GatherNd"):
        depth = lookup.inputs[1].shape[-1] if lookup.inputs[1].shape.rank else None
        spanned = sizes[batch:batch + depth] if depth is not None else []
        return min(spanned) if spanned and None not in spanned else None
    axis = 0
    if lookup.type == "GatherV2":
        value = tf.get_static_value(lookup.inputs[2])
        if value is None:
            return None
        axis = int(value) % len(sizes) if sizes else 0
    axis = max(axis, batch) if lookup.type == "ResourceGather" else axis
    return sizes[axis] if axis < len(sizes) else None


def _table_shape(lookup: Any) -> Any:
    """The static shape of the table a lookup reads: its params' own, or for a resource the
    variable's (from the handle's shape data)."""
    params = lookup.inputs[0]
    if not lookup.type.startswith("Resource"):
        return params.shape
    from tensorflow.python.ops import handle_data_util

    import tensorflow as tf

    data = handle_data_util.get_resource_handle_data(params)
    if data is None or not data.is_set or not data.shape_and_type:
        return None
    return tf.TensorShape(data.shape_and_type[0].shape)


def _numpy_dtype(name: str) -> np.dtype:
    """NumPy's dtype for TensorFlow's dtype name (`bfloat16` is ml_dtypes', as in TensorFlow)."""
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


def freeze(concrete: Any) -> Any:
    """The concrete function with its variables as constants (TVM cannot import variable ops).

    Freezing leaves reference cycles that hold copies of every weight (1.4 GB for VGG16's 528 MB),
    which only a collection frees: nothing in them triggers one (docs/build.md, "Memory").
    Writes that store a variable's own value (tf.keras 2's batch norm updates in inference mode)
    are dropped first; where writes are left, the branches a constant predicate never takes go
    (`constant_branches.py`: a `tf.cond` on a constant expression), then any write still left is
    refused by name (`variable_writes.py`): this is TensorFlow's `convert_variables_to_constants_v2`,
    step by step, with that in between.
    """
    from tensorflow.python.framework import convert_to_constants

    from tfcheck.compiler.trace.constant_branches import without_constant_branches
    from tfcheck.compiler.trace.variable_writes import drop_unchanged_writes, variable_writes

    data = convert_to_constants._FunctionConverterDataInEager(  # noqa: SLF001 - no public step-by-step API
        func=concrete, lower_control_flow=True, aggressive_inlining=False)
    variables = set(_variable_placeholders(concrete))
    drop_unchanged_writes(data.graph_def)
    written = variable_writes(data.graph_def, variables)
    if written and without_constant_branches(data.graph_def):
        drop_unchanged_writes(data.graph_def)
        written = variable_writes(data.graph_def, variables)
    if written:
        raise StepError(_writes_message(concrete, written), op=written[0][1])
    graph_def, converted = convert_to_constants._replace_variables_by_constants(converter_data=data)  # noqa: SLF001
    frozen = convert_to_constants._construct_concrete_function(concrete, graph_def, converted)  # noqa: SLF001
    gc.collect()
    return frozen


def _variable_placeholders(concrete: Any) -> dict[str, str]:
    """The placeholder of each variable `concrete` captured -> the variable's name."""
    names = {id(variable.handle): variable.name for variable in concrete.variables}
    return {internal.name.split(":")[0]: names[id(value)] for value, internal in concrete.graph.captures
            if id(value) in names}


def _writes_message(concrete: Any, written: list[tuple[str, str, str]]) -> str:
    """Why a function that changes its variables is not built, naming them."""
    placeholders = _variable_placeholders(concrete)
    shown = ", ".join(f"{placeholders[resource]} ({op} at node '{node}')" for node, op, resource in written[:3])
    more = f" and {len(written) - 3} more" if len(written) > 3 else ""
    return (f"writes its variables: {shown}{more}. A compiled artifact holds the variables' values as "
            "constants and keeps no state from one call to the next; compute the update outside the "
            "compiled function (a Keras layer that updates statistics: call it with training=False)")


# A function whose weights are larger than this takes them as inputs (`lift_weights`) unless
# `@tfcheck.aot(weights=...)` says otherwise: below it, freezing costs little memory, and the
# converter's folding of constant weights (batch norm into the convolution) is kept (docs/build.md, "Memory").
LIFT_WEIGHTS_ABOVE = 64 * 2**20


class WeightsRefused(StepError):
    """The function cannot take its weights as inputs (a variable written, or read other than by
    ReadVariableOp): the build freezes it instead."""


@dataclass
class LiftedWeights:
    """A concrete function with its captured variables turned into inputs.

    `function` takes the user's inputs, then one float (or other dtype) input per weight, named
    `WEIGHT_INPUT<i>`; the weights' values stay in TensorFlow's variables (`handles`) and are read one
    at a time (`weight_values`): nothing holds a second copy of all of them.
    """

    function: Any
    graph_def: Any  # the function's GraphDef, without any weight value
    handles: list[Any]  # what the concrete function captured, in weight order
    dtypes: list[Any]
    shapes: list[list[int]]
    names: list[str]  # each weight's variable name, for messages

    def nbytes(self) -> int:
        """The weights' size in bytes (what freezing would copy into the graph)."""
        return sum(int(np.prod(shape, dtype=np.int64)) * dtype.size for shape, dtype in zip(self.shapes, self.dtypes))


def lift_weights(concrete: Any) -> LiftedWeights:
    """`concrete` with each captured variable replaced by an input of the variable's shape and dtype.

    Every read of a variable (a `ReadVariableOp` of the captured resource placeholder) becomes an
    Identity of the new input, in a called function too (`_lift_call_arguments`). A variable that
    anything else touches (an assignment, a gather, a loop that takes the resource, a called
    function that does more than read it) is refused with its name and the op: freezing handles it.
    """
    import tensorflow as tf

    graph_def = concrete.graph.as_graph_def()
    external = {internal.name.split(":")[0]: value for value, internal in concrete.graph.captures}
    names = {id(variable.handle): variable.name for variable in concrete.variables}
    consumers = _consumers(graph_def)
    user_inputs = [t.name.split(":")[0] for t in concrete.inputs if t.name.split(":")[0] not in external]
    lifted = type(graph_def)()
    lifted.CopyFrom(graph_def)
    del lifted.node[:]
    weights: dict[str, int] = {}
    handles, dtypes, shapes, labels = [], [], [], []
    for node in graph_def.node:
        if node.name in external and consumers.get(node.name):
            value, label = external[node.name], names.get(id(external[node.name]), node.name)
            dtype = _captured_dtype(tf, node, consumers[node.name], label, graph_def.library)
            weights[node.name] = len(handles)
            handles.append(value)
            dtypes.append(dtype)
            shapes.append(_captured_shape(tf, value, dtype))
            labels.append(label)
            _add_weight_input(tf, lifted, len(handles) - 1, dtype, shapes[-1])
            calls = [reader for reader in consumers[node.name] if reader.op in CALL_OPS]
            if node.attr["dtype"].type != tf.resource.as_datatype_enum or calls:  # a tensor, or a call's argument
                _add_identity(lifted, node.name, len(handles) - 1, dtype)
        elif node.name in external:
            continue  # a capture nothing reads
        elif node.op == "ReadVariableOp" and node.input[0] in weights:
            _add_identity(lifted, node.name, weights[node.input[0]], tf.as_dtype(node.attr["dtype"].type))
        else:
            lifted.node.add().CopyFrom(node)
    for node in lifted.node:
        if node.op in CALL_OPS:
            _lift_call_arguments(tf, lifted, node, dtypes, weights)
    return LiftedWeights(_function_of(tf, lifted, user_inputs, len(handles), concrete), lifted, handles, dtypes, shapes,
                        labels)


def computes_in_float64(concrete: Any) -> bool:
    """Whether every floating-point tensor of the function is float64 (`float64_twin.py`)."""
    import tensorflow as tf

    from tfcheck.compiler.trace.float64_twin import computes_in_float64 as float64_only

    return float64_only(tf, concrete.graph.as_graph_def())


def float32_twin(lifted: LiftedWeights, concrete: Any) -> LiftedWeights:
    """The lifted float64 function as its float32 twin (`float64_twin.py`): the same inputs but in
    float32, with the float64 constants that float32 would round as weights after the others.
    The weights' values stay float64: the importer binds them to the twin read as float64."""
    import tensorflow as tf

    from tfcheck.compiler.trace.float64_twin import twin_graph

    graph_def, constants = twin_graph(tf, lifted.graph_def)
    handles, dtypes, shapes, names = list(lifted.handles), list(lifted.dtypes), list(lifted.shapes), list(lifted.names)
    for name, value in constants:
        handles.append(tf.constant(value))
        dtypes.append(tf.float64)
        shapes.append(list(value.shape))
        names.append(f"constant {name}")
        _add_weight_input(tf, graph_def, len(handles) - 1, tf.float32, shapes[-1])
        _add_identity(graph_def, name, len(handles) - 1, tf.float32)
    user_inputs = [t.name.split(":")[0] for t in lifted.function.inputs][:len(lifted.function.inputs) - len(lifted.handles)]
    return LiftedWeights(_function_of(tf, graph_def, user_inputs, len(handles), concrete), graph_def, handles, dtypes,
                         shapes, names)


def _consumers(graph_def: Any) -> dict[str, list[Any]]:
    """Node name -> the nodes that take one of its outputs (or run after it)."""
    found: dict[str, list[Any]] = {}
    for node in graph_def.node:
        for name in node.input:
            found.setdefault(name.lstrip("^").split(":")[0], []).append(node)
    return found


# Ops that call a function of the graph's library with their inputs as its arguments. Keras runs
# grouped convolutions (ConvNeXt's depthwise ones) through an XLA-compiled function that takes the
# variable itself, which TensorFlow's inliner leaves alone.
CALL_OPS = ("StatefulPartitionedCall", "PartitionedCall")


def _captured_dtype(tf: Any, node: Any, readers: list[Any], label: str, library: Any) -> Any:
    """The dtype of the weight a captured placeholder stands for: a variable's (read only by
    ReadVariableOp, here or as the argument of a called function, all of one dtype), or a captured
    tensor's own."""
    if node.attr["dtype"].type != tf.resource.as_datatype_enum:
        return tf.as_dtype(node.attr["dtype"].type)
    dtypes: set[int] = set()
    for reader in readers:
        read = _argument_reads(reader, node.name, library) if reader.op in CALL_OPS else (
            [reader] if reader.op == "ReadVariableOp" else None)
        if read is None:
            raise WeightsRefused(f"variable {label!r} is used by {reader.op} node {reader.name!r}, not "
                                 "only read by ReadVariableOp: its value cannot be an input of the function")
        dtypes.update(each.attr["dtype"].type for each in read)
    if len(dtypes) != 1:
        raise WeightsRefused(f"variable {label!r} is read as {len(dtypes)} different dtypes")
    return tf.as_dtype(dtypes.pop())


def _argument_reads(call: Any, placeholder: str, library: Any) -> list[Any] | None:
    """The ReadVariableOp nodes through which `call`'s function reads the argument(s) that
    `placeholder` feeds, or None when it does anything else with them (or the function is not
    in `library`)."""
    function = _library_function(call, library)
    if function is None:
        return None
    positions = [i for i, name in enumerate(call.input) if name.split(":")[0] == placeholder]
    arguments = {function.signature.input_arg[i].name for i in positions}
    users = [node for node in function.node_def if any(name.split(":")[0] in arguments for name in node.input)]
    return users if users and all(node.op == "ReadVariableOp" for node in users) else None


def _library_function(call: Any, library: Any) -> Any:
    name = call.attr["f"].func.name
    return next((function for function in library.function if function.signature.name == name), None)


def _lift_call_arguments(tf: Any, graph_def: Any, call: Any, dtypes: list[Any], index: dict[str, int]) -> None:
    """Make `call`'s function take each lifted weight it was given as a variable as a value:
    its argument's type becomes the weight's dtype and its reads become Identities. The function
    gets a name of its own (TensorFlow keeps the original under its name)."""
    function = _library_function(call, graph_def.library)
    for position, name in enumerate(call.input):
        if name.split(":")[0] not in index or call.attr["Tin"].list.type[position] != tf.resource.as_datatype_enum:
            continue
        if not function.signature.name.endswith(LIFTED_SUFFIX):
            _rename_function(graph_def, function)
        dtype = dtypes[index[name.split(":")[0]]].as_datatype_enum
        call.attr["Tin"].list.type[position] = dtype
        argument = function.signature.input_arg[position]
        argument.type = dtype
        for node in function.node_def:
            if node.op == "ReadVariableOp" and node.input[0].split(":")[0] == argument.name:
                node.op = "Identity"
                del node.attr["dtype"]
                node.attr["T"].type = dtype
                _rename_output(function, node.name, "value", "output")
        read_only = call.attr["_read_only_resource_inputs"].list.i
        if position in read_only:
            read_only.remove(position)


LIFTED_SUFFIX = "_tfcheck_lifted"


def _rename_function(graph_def: Any, function: Any) -> None:
    """Give `function` a name of its own, and every call of it in `graph_def` that name (refused
    when another function of the library calls it too: that call would keep the old name)."""
    old = function.signature.name
    if any(node.attr["f"].func.name == old for each in graph_def.library.function for node in each.node_def
           if node.op in CALL_OPS):
        raise WeightsRefused(f"function {old!r} takes a variable and is called from another function")
    function.signature.name = old + LIFTED_SUFFIX
    for node in graph_def.node:
        if node.op in CALL_OPS and node.attr["f"].func.name == old:
            node.attr["f"].func.name = function.signature.name


def _rename_output(function: Any, node: str, old: str, new: str) -> None:
    """Point every reference to `node`'s output `old` (`node:old:0`) in `function` at `new`."""
    before, after = f"{node}:{old}:", f"{node}:{new}:"
    for each in function.node_def:
        for i, name in enumerate(each.input):
            if name.startswith(before):
                each.input[i] = after + name[len(before):]
    for key, value in function.ret.items():
        if value.startswith(before):
            function.ret[key] = after + value[len(before):]


def _captured_shape(tf: Any, value: Any, dtype: Any) -> list[int]:
    if value.dtype != tf.resource:
        return value.shape.as_list()
    return tf.raw_ops.ReadVariableOp(resource=value, dtype=dtype).shape.as_list()


def _add_weight_input(tf: Any, graph_def: Any, index: int, dtype: Any, shape: list[int]) -> None:
    placeholder = graph_def.node.add()
    placeholder.name, placeholder.op = f"{WEIGHT_INPUT}{index}", "Placeholder"
    placeholder.attr["dtype"].type = dtype.as_datatype_enum
    placeholder.attr["shape"].shape.CopyFrom(tf.TensorShape(shape).as_proto())


def _add_identity(graph_def: Any, name: str, index: int, dtype: Any) -> None:
    """Node `name` (a read of weight `index`) as an Identity of the weight's input."""
    identity = graph_def.node.add()
    identity.name, identity.op = name, "Identity"
    identity.input.append(f"{WEIGHT_INPUT}{index}")
    identity.attr["T"].type = dtype.as_datatype_enum


def _function_of(tf: Any, graph_def: Any, user_inputs: list[str], weights: int, concrete: Any) -> Any:
    """A concrete function of `graph_def` from the user's inputs and the weights' inputs to
    `concrete`'s outputs."""
    wrapped = tf.compat.v1.wrap_function(lambda: tf.graph_util.import_graph_def(graph_def, name=""), [])
    graph = wrapped.graph
    feeds = [graph.get_tensor_by_name(f"{name}:0") for name in user_inputs]
    feeds += [graph.get_tensor_by_name(f"{WEIGHT_INPUT}{i}:0") for i in range(weights)]
    return wrapped.prune(feeds, [graph.get_tensor_by_name(t.name) for t in concrete.outputs])


def weight_values(lifted: LiftedWeights) -> Iterator[np.ndarray]:
    """Each weight's value, read from its variable when asked for: one at a time in memory."""
    import tensorflow as tf

    for handle, dtype in zip(lifted.handles, lifted.dtypes):
        value = handle if handle.dtype != tf.resource else tf.raw_ops.ReadVariableOp(resource=handle, dtype=dtype)
        yield value.numpy()


def _already_frozen_converter(frozen: Any) -> Any:
    """`tf.lite.TFLiteConverter` for a function `freeze` returned, which it does not freeze again.

    The converter freezes whatever function it is given, although ours has no variables left:
    for VGG16 that second pass took 60 s and 4 GB, for the same GraphDef (the flatbuffer is
    byte-for-byte the same: tests/compiler/test_tf_side_memory.py). The GraphDef it converts has
    the ops TFLite has no builtin for rewritten into ones it has (`_rewritten_for_tflite`).
    """
    import tensorflow as tf

    class AlreadyFrozen(tf.lite.TFLiteConverter):
        def _freeze_concrete_function(self) -> tuple[Any, list[Any], list[Any], Any]:
            inputs = [tensor for tensor in frozen.inputs if tensor.dtype != tf.resource]
            return _rewritten_for_tflite(frozen.graph), inputs, frozen.outputs, frozen

    return AlreadyFrozen.from_concrete_functions([frozen])


def _rewritten_for_tflite(graph: Any) -> Any:
    """`graph`'s GraphDef with the rewrites before conversion applied (docs/build.md, "Rewrites
    before conversion"): 3-D poolings as 2-D ones (`pooling3d.py`), `tf.image.extract_patches` as
    reshapes or a convolution (`image_patches.py`), integer clips kept as MINIMUM and MAXIMUM
    (`integer_clips.py`), integer outer products as broadcast multiplies (`outer_products.py`),
    non-max suppressions padded by hand as padded suppressions (`padded_selections.py`), CTC greedy
    decoders as the builtins of their computation (`greedy_decoding.py`, which traces it with this
    module's TensorFlow)."""
    import tensorflow as tf

    from tfcheck.compiler.trace.greedy_decoding import greedy_decoders_as_builtins
    from tfcheck.compiler.trace.image_patches import patches_as_builtins
    from tfcheck.compiler.trace.integer_clips import clips_as_min_max
    from tfcheck.compiler.trace.outer_products import outer_products_as_multiplies
    from tfcheck.compiler.trace.padded_selections import padded_suppressions
    from tfcheck.compiler.trace.pooling3d import pools_as_2d

    rewritten = patches_as_builtins(pools_as_2d(graph.as_graph_def(), graph), graph)
    rewritten = padded_suppressions(clips_as_min_max(outer_products_as_multiplies(rewritten, graph)))
    return greedy_decoders_as_builtins(rewritten, graph, tf)


# The converter's words when a TensorList (a tf.TensorArray) has elements of unknown shape, and ours.
_UNSIZED_TENSOR_LIST = "requires element_shape to be static"
_UNSIZED_TENSOR_LIST_MESSAGE = (
    "loops over a tf.TensorArray (a Keras RNN layer: LSTM, GRU, SimpleRNN; or one written in a "
    "tf.while_loop) whose elements have a dimension of unknown size: an unknown batch of the "
    "input_signature, or elements whose size changes from one write to the next. TensorFlow's converter "
    "turns TensorList ops into TFLite builtins only for elements of one known shape; give the "
    "input_signature's dimensions sizes (a Keras RNN layer over a known number of time steps (up to "
    f"{MAX_UNROLLED_STEPS}) is traced unrolled and takes any batch, but for the backward half of a "
    "Bidirectional with return_sequences over masked steps), or compute that loop outside the compiled function")


def to_tflite(frozen: Any) -> bytes:
    """Convert a frozen function with builtin ops only (TVM cannot import Flex ops); a TF op
    without a builtin is named in the error."""
    import tensorflow as tf

    converter = _already_frozen_converter(frozen)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    try:
        return converter.convert()
    except Exception as error:  # noqa: BLE001 - ConverterError and friends, with MLIR text
        text = str(error)
        ops = sorted(set(re.findall(r"'tf\.(\w+)' op", text)))
        if _UNSIZED_TENSOR_LIST in text:
            raise StepError(_UNSIZED_TENSOR_LIST_MESSAGE, op=", ".join(ops) or None) from error
        if ops:
            dtypes = _op_dtypes(text)
            refused = DtypeRefused if all(_dtype_bound(dtypes.get(op)) for op in ops) else StepError
            raise refused(_refusal(ops, dtypes, _float64_inputs(frozen)), op=", ".join(ops)) from error
        raise StepError(f"TFLite conversion failed: {_conversion_hint(text)}{_first_lines(text)}") from error


class DtypeRefused(StepError):
    """The converter refused ops only for their dtype (float64, an int32 Relu6): known sizes would
    not help, so a symbolic build does not fall back to, or suggest, shape entries."""


def _dtype_bound(dtypes: set[str] | None) -> bool:
    """Whether ops seen on these dtypes were refused for them (none of them float32)."""
    return bool(dtypes) and "float32" not in dtypes


def _refusal(ops: list[str], dtypes: dict[str, set[str]], float64_inputs: list[str]) -> str:
    """Why the converter refused `ops`, by the dtypes it saw them on (`_op_dtypes`): ops that
    TFLite's builtins lack whatever the dtype; float64 ops, which are builtins in float32 (a model
    built after `tf.keras.backend.set_floatx('float64')`: marload/DeepRL-TensorFlow2's PPO read
    "uses TensorFlow ops BiasAdd, MatMul, Relu ... cannot express" without the word float64); and
    ops on other dtypes (an int32 Relu6), each with what to write instead."""
    float64 = [op for op in ops if "float64" in dtypes.get(op, ()) and "float32" not in dtypes[op]]
    other = [op for op in ops if op not in float64 and dtypes.get(op) and not dtypes[op] & {"float32", "float64"}]
    general = [op for op in ops if op not in float64 and op not in other]
    parts = []
    if general:
        parts.append(f"uses TensorFlow op{'s' if len(general) > 1 else ''} {', '.join(general)}, which TFLite builtins "
                     f"(and so TVM's importer) cannot express; {_unrewritten_hint(general)}compute it outside the "
                     "compiled function or replace it with supported ops")
    if float64:
        given = (f" (input{'s' if len(float64_inputs) > 1 else ''} {', '.join(map(repr, float64_inputs))} "
                 f"{'are' if len(float64_inputs) > 1 else 'is'} float64)") if float64_inputs else ""
        parts.append(
            f"computes TensorFlow op{'s' if len(float64) > 1 else ''} {', '.join(float64)} in float64{given}, and "
            "TFLite's builtins (and so TVM's importer) have no float64 kernels: tfcheck converts a function computed "
            "wholly in float64 as a float32 twin read back as float64, with its weights as inputs, but not one that "
            "mixes float64 with other float dtypes or whose weights are frozen (weights=\"constants\"). "
            + FLOAT64_ADVICE)
    for op in other:
        kinds = ", ".join(sorted(dtypes[op]))
        parts.append(f"uses TensorFlow op {op} on {kinds} tensors, which TFLite builtins (and so TVM's importer) "
                     f"{_FLOAT_ONLY[op] if op in _FLOAT_ONLY else 'cannot express, at least not for ' + kinds}; "
                     f"{_INTEGER_HINTS.get(op, '')}{_unrewritten_hint([op])}cast to float32 before it "
                     "(tf.cast(x, tf.float32)) and back after")
    return "; it also ".join(parts)


# What to write instead of a float64 model that cannot be converted.
FLOAT64_ADVICE = (
    "Build the model in float32: call tf.keras.backend.set_floatx('float32') instead of 'float64' before its layers "
    "are made (where layers exist already, tf.keras.mixed_precision.set_global_policy('float32') too: Keras 3 fixes "
    "its default dtype when the first layer is made), or give its layers dtype='float32'; declare the "
    "input_signature's tensors tf.float32, and cast what comes from float64 code with tf.cast(x, tf.float32)")
# TensorFlow ops that are TFLite builtins for float32 tensors only (and quantized ones), by the
# builtin's name, for the refusal of one on integers.
_FLOAT_ONLY = {op: f"have only for float32 tensors ({builtin})" for op, builtin in {
    "Relu6": "RELU6", "Elu": "ELU", "LeakyRelu": "LEAKY_RELU", "Tanh": "TANH", "Sigmoid": "LOGISTIC",
    "Softmax": "SOFTMAX", "Exp": "EXP", "Log": "LOG", "Sqrt": "SQRT", "Rsqrt": "RSQRT"}.items()}
# Where an op on integers comes from when the user never wrote it.
_INTEGER_HINTS = {
    "Relu6": ("TensorFlow's converter makes one Relu6 of an integer clip to [0, 6] (tf.clip_by_value(x, 0, 6), "
              "tf.minimum(tf.maximum(x, 0), 6)); tfcheck keeps such clips as MINIMUM and MAXIMUM outside loops, "
              "so this one is in a loop's body or is tf.nn.relu6 itself: "),
}
# MLIR's element types in the converter's error, as TensorFlow names the dtypes.
_MLIR_DTYPES = {"f64": "float64", "f32": "float32", "f16": "float16", "bf16": "bfloat16", "i1": "bool", "i8": "int8",
                "i16": "int16", "i32": "int32", "i64": "int64", "ui8": "uint8", "ui16": "uint16", "ui32": "uint32",
                "ui64": "uint64"}


def _op_dtypes(text: str) -> dict[str, set[str]]:
    """Each op the converter's error details (`\ttf.MatMul(tensor<1x3xf64>, tensor<2x3xf64>) ->
    (tensor<1x2xf64>) : {...}`), with the dtypes of its operands and results."""
    found: dict[str, set[str]] = {}
    for op, types in re.findall(r"^\s*tf\.(\w+)\((.*)$", text, re.MULTILINE):
        found.setdefault(op, set()).update(
            _MLIR_DTYPES.get(kind, kind) for kind in re.findall(r"tensor<(?:[\d?*]+x)*([a-z]+\d+)", types))
    return found


def _float64_inputs(frozen: Any) -> list[str]:
    """The names of the function's own float64 inputs (not its weights, when they are inputs)."""
    return [tensor.name.split(":")[0] for tensor in frozen.inputs
            if tensor.dtype.name == "float64" and not tensor.name.startswith(WEIGHT_INPUT)]


def _unrewritten_hint(ops: list[str]) -> str:
    """For an op that a rewrite before conversion takes in other forms, which forms (first: the
    general advice follows)."""
    from tfcheck.compiler.trace.image_patches import LIMITS

    return "".join(f"{LIMITS[op]}; or " for op in ops if op in LIMITS)


# TensorFlow calls whose implementation the converter cannot take, found by the node names in its
# error, with the form of the same computation that converts (the coverage sweep builds both).
_CONVERSION_HINTS = {
    "non_max_suppression_padded": (
        "tf.image.non_max_suppression_padded(..., pad_to_max_output_size=True) runs TensorFlow's "
        "batched suppression loop, which TFLite cannot convert. For one image's boxes, "
        "tf.raw_ops.NonMaxSuppressionV4(boxes=..., scores=..., max_output_size=..., iou_threshold=..., "
        "score_threshold=..., pad_to_max_output_size=True) returns the same padded indices and count, "
        "and converts (TFLite NON_MAX_SUPPRESSION_V4)"),
}


def _conversion_hint(message: str) -> str:
    """What to write instead, when the failed conversion came from a call `_CONVERSION_HINTS` knows
    (first: the converter's own text follows)."""
    return "".join(f"{hint}.\nThe converter said: " for node, hint in _CONVERSION_HINTS.items() if node in message)


def tflite_runner(flatbuffer: bytes, arrays: list[np.ndarray],
                  threads: int | None = None) -> Callable[[], list[np.ndarray]]:
    """A call that runs the flatbuffer with TFLite's default interpreter (XNNPACK) on `arrays`.

    Inputs and outputs are in the subgraph's order, the order TVM's importer gives the compiled
    function's parameters and results.
    """
    interpreter = _interpreter(flatbuffer, arrays, threads)
    inputs, outputs = interpreter.get_input_details(), interpreter.get_output_details()

    def run() -> list[np.ndarray]:
        for detail, array in zip(inputs, arrays):
            interpreter.set_tensor(detail["index"], array)
        interpreter.invoke()
        return [interpreter.get_tensor(detail["index"]) for detail in outputs]

    return run


def _interpreter(flatbuffer: bytes, arrays: list[np.ndarray], threads: int | None, xnnpack: bool = True) -> Any:
    """TFLite's interpreter for the flatbuffer (with its default XNNPACK delegate, or its builtin
    kernels alone), its first inputs resized to `arrays`' shapes (a symbolic build's model, run at
    one size) and its tensors allocated."""
    import tensorflow as tf

    resolver = tf.lite.experimental.OpResolverType
    interpreter = tf.lite.Interpreter(
        model_content=flatbuffer, num_threads=threads,
        experimental_op_resolver_type=resolver.AUTO if xnnpack else resolver.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    for detail, array in zip(interpreter.get_input_details(), arrays):
        if tuple(detail["shape"]) != array.shape:
            interpreter.resize_tensor_input(detail["index"], array.shape)
    interpreter.allocate_tensors()
    return interpreter


def tflite_outputs(flatbuffer: bytes, arrays: list[np.ndarray],
                   weights: Iterable[np.ndarray] | None = None) -> list[np.ndarray] | None:
    """TFLite's outputs for `arrays` (and, for a model that takes its weights as inputs, the
    `weights` after them, each set as it comes: the interpreter keeps its own copy), or None when
    its interpreter cannot run the model.

    A second float32 implementation of the same graph: how far its outputs lie from TensorFlow's
    is how far float32 rounding alone moves them, which verification allows (compiler/build/verify.py).
    Given `weights`, it runs TFLite's builtin kernels without XNNPACK: XNNPACK packs weights that
    are inputs into a copy of its own on every run (a second copy of every convolution filter:
    docs/build.md, "Memory"), and the builtin kernels' rounding is as valid an allowance.
    """
    try:
        interpreter = _interpreter(flatbuffer, arrays, None, xnnpack=weights is None)
        details = iter(interpreter.get_input_details())
        for detail, array in zip(details, itertools.chain(arrays, weights or ())):
            interpreter.set_tensor(detail["index"], array)
        interpreter.invoke()
        return [np.array(interpreter.get_tensor(detail["index"])) for detail in interpreter.get_output_details()]
    except Exception:  # noqa: BLE001 - any interpreter failure only means no second opinion
        return None


def error_summary(error: BaseException) -> str:
    """`InvalidArgumentError: Computed output size would be negative: -1 [input_size: 1, ...]`:
    the error's type and its last line of substance, without the Python traceback and node lines
    that TensorFlow's runtime errors carry ("Graph execution error: Detected at node ...")."""
    text = getattr(error, "message", None) or str(error)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    kept = [line for line in lines if not line.startswith(_TRACEBACK_LINES)]
    last, name = kept[-1] if kept else text.strip(), type(error).__name__
    return last if last.startswith(f"{name}: ") else f"{name}: {last}"  # AutoGraph's errors repeat their type


# The lines of a TensorFlow runtime error that say where, not what.
_TRACEBACK_LINES = ("File ", "[[", "Detected at node", "Graph execution error", "Traceback")


def _first_lines(text: str, count: int = 6) -> str:
    return "\n".join([line for line in text.splitlines() if line.strip()][:count])


def flat_outputs(outputs: Any) -> list[np.ndarray]:
    """Outputs (any tf.nest structure) as NumPy arrays in TensorFlow's flattening order (a
    dict's values by sorted key), the order of an artifact's outputs."""
    import tensorflow as tf

    return [np.asarray(value) for value in tf.nest.flatten(outputs)]


def call_flat(function: Any, inputs: list[Any]) -> Any:
    """Call a concrete function (or a tf.function with an input_signature) with its inputs in
    flattening order, nested as its signature nests them."""
    import tensorflow as tf

    signature = getattr(function, "structured_input_signature", None)
    if signature is None:
        return function(*tf.nest.pack_sequence_as(list(function.input_signature), list(inputs)))
    args, kwargs = tf.nest.pack_sequence_as(signature, list(inputs))
    return function(*args, **kwargs)


def reference_outputs(concrete: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """TensorFlow's outputs for `inputs`, flattened in the concrete function's output order."""
    import tensorflow as tf

    return flat_outputs(call_flat(concrete, [tf.constant(a) for a in inputs]))
