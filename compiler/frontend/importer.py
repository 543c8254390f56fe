"""TFLite flatbuffer -> TVM Relax module, and which operators TVM's TFLite frontend can import.

The coverage report reads the frontend's own converter table, so it is exact for the installed
TVM and says, before anything is compiled, which operators (and so which TensorFlow nodes) would
stop the import.

The import itself runs TVM's converter through a subclass (`_converter_class`) that

- replaces the conversions of operators TVM gets wrong (docs/importer-fixes.md): SLICE with
  begin/size computed at run time (TensorFlow's TensorList writes, e.g. a GRU or LSTM with
  `return_sequences=True`), GATHER with `batch_dims`, ARG_MAX/ARG_MIN, whose int32 output
  TVM made int64, GATHER_ND and SCATTER_ND (TVM's converter gives both Relay's index layout),
  BATCH_MATMUL of operands of different ranks or with a symbolic dimension (in
  `symbolic_import.py`, which wraps the shape-computing converters), FULLY_CONNECTED over an
  input of rank above 2 without `keep_num_dims` (TVM kept its leading axes), TRANSPOSE_CONV
  (its fused activation and its output padding, both dropped);
- moves transposed convolutions (TRANSPOSE_CONV, CONV_3D_TRANSPOSE) to the channels-first
  layouts TVM can lower (`_lowerable_transposed_convolutions`);
- turns any exception raised while converting one operator into an `ImporterError` that names
  the TFLite operator, the TensorFlow node it came from (TFLite tensor names are the TensorFlow
  node names) and what the user can do about it.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from tfcheck.compiler.frontend.channel_fold import fold_channel_affine
from tfcheck.compiler.process.child import StepError
from tfcheck.compiler.frontend.tflite_values import constant_value
from tfcheck.compiler.process.weights_file import WEIGHT_INPUT, WEIGHTS_FILE
from tfcheck.compiler.process.messages import OperatorCount
from tfcheck.runtime.manifest import SymbolicDim, TensorSpec
from tfcheck.runtime.weights import read_weights


class ImporterError(StepError):
    """TVM could not import one TFLite operator; the message names it and its TensorFlow node."""


@functools.cache
def supported_tflite_ops() -> frozenset[str]:
    """Names of the TFLite builtins that `tvm.relax.frontend.tflite` converts.

    The converter fills its table in `__init__` without touching the model, so an instance made
    without one exposes the table of the installed TVM.
    """
    from tvm.relax.frontend.tflite.tflite_frontend import OperatorConverter

    return frozenset(OperatorConverter(None, None, None, None).convert_map)


def unimportable(operators: list[OperatorCount]) -> list[OperatorCount]:
    """The operators of a `tflite_operators` report that TVM cannot import (custom ops included)."""
    supported = supported_tflite_ops()
    return [entry for entry in operators if entry.op not in supported]


def import_tflite(path: Path, inputs: list[TensorSpec] | None = None,
                 dims: dict[str, SymbolicDim] | None = None, float64: bool = False) -> Any:
    """Parse the flatbuffer and import it as a Relax IRModule whose `main` takes the inputs in
    signature order and returns the outputs in the concrete function's order.

    `inputs` (the traced variant's specs) may name symbolic dimensions (`["batch", 128]`): they
    become `tir.Var`s of `main`'s parameters (`compiler/frontend/symbolic_import.py`), with their upper
    bounds from `dims`. With `float64`, the flatbuffer is a float64 function's float32 twin
    (`compiler/trace/float64_twin.py`), and every float32 tensor of it is read as float64. Raises
    `ImporterError` naming the operator and TensorFlow node when a conversion fails, and an
    `ImporterError` saying so when the importer fails outside any operator.
    """
    import tflite
    from tvm.relax.frontend.tflite import from_tflite

    from tfcheck.compiler.frontend.stepped_dims import cast_to_steps, stepped_shapes
    from tfcheck.compiler.frontend.symbolic_import import input_shapes, symbolic_int_lists, with_bounds
    from tfcheck.compiler.frontend.true_indices import has_true_indices

    try:
        model = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
        shapes = input_shapes(model, inputs or [])
        stepped = stepped_shapes(shapes, dims or {})  # a dimension with a step as a multiple of it
        with symbolic_int_lists(shapes is not None or has_true_indices(model)):
            module = from_tflite(model, shape_dict=stepped, dtype_dict=_float64_inputs(model) if float64 else None,
                                 op_converter=_float64_converter_class() if float64 else _converter_class())
        if shapes is not None:
            module = with_bounds(cast_to_steps(module, shapes, stepped), dims or {})
        return _lowered_transposed_convolutions(module) if _has_transposed_convolutions(model) else module
    except ImporterError:
        raise
    except Exception as error:  # noqa: BLE001 - any importer failure is the function's, reported the same way
        raise _named_error(None, None, error) from error


def import_variant(variant_dir: Path, inputs: list[TensorSpec] | None = None, dims: dict[str, SymbolicDim] | None = None,
                   weights: int = 0, float64: bool = False) -> Any:
    """`import_tflite` of the variant's `model.tflite`, with its `weights` weight inputs (if any)
    bound to the values of `weights.npz` as constants (`bind_weights`), and what follows a
    convolution or dense layer per channel (batch norm) folded into its weight and bias, as the
    converter folds it for frozen weights (`channel_fold.fold_channel_affine`)."""
    module = import_tflite(variant_dir / "model.tflite", inputs, dims, float64)
    if not weights:
        return module
    return fold_channel_affine(bind_weights(module, variant_dir / WEIGHTS_FILE, weights))


def bind_weights(module: Any, path: Path, count: int) -> Any:
    """`main` with its last `count` parameters (the weights, `tfcheck_weight_<i>`) computed from the
    values in `path` and bound as constants, before anything matches the kernels' patterns: the
    schedules see constant weights, as in a frozen model.

    What the converter could not fold into weights that are inputs (the transposes TFLite puts on
    convolution and dense weights, batch norm's scale and shift) is lifted out of `main`
    (`relax.transform.LiftTransformParams`), compiled once and run on the weights. `FoldConstant`
    on the bound module would do the same op by op, compiling each one apart: 10 s for VGG16's 38
    transposes, minutes for EfficientNetB5's hundreds of batch norms (docs/build.md, "Memory").

    Bound by position and checked by name: a user input may be called anything.
    """
    import tvm
    from tvm import relax

    main = module["main"]
    inputs = len(main.params) - count
    params = list(main.params)[inputs:]
    names = [str(param.name) for param in params]
    if count > len(main.params) or names != [f"{WEIGHT_INPUT}{i}" for i in range(count)]:
        raise StepError(f"the model's last {count} inputs are {names}, not the weights the tracing step lifted")
    module["main"] = main.with_attr("num_input", inputs)
    lifted = relax.transform.LiftTransformParams()(module)
    transform = lifted[TRANSFORM_PARAMS]
    machine = relax.VirtualMachine(tvm.compile(tvm.IRModule({TRANSFORM_PARAMS: transform}),
                                               target=tvm.target.Target({"kind": "llvm"})), tvm.cpu())
    try:
        weights = [tvm.runtime.tensor(value) for value in read_weights(path, count)]
    except (OSError, ValueError) as error:
        raise StepError(f"reading the weights {path.name}: {error}") from error
    values = list(machine[TRANSFORM_PARAMS](weights))
    del weights, machine
    main = lifted["main"]
    bindings = dict(zip(list(main.params)[inputs:], values))
    del lifted[TRANSFORM_PARAMS]
    lifted = relax.transform.BindParams("main", bindings)(lifted)
    del bindings, values
    return lifted


# The function `LiftTransformParams` makes of what `main` computes from its weights alone.
TRANSFORM_PARAMS = "main_transform_params"


# The layouts TVM 0.27's legalization lowers transposed convolutions for (data, kernel); the TFLite
# frontend emits NHWC/IOHW and NDHWC/DHWOI, which reach the VM unlowered and fail to compile.
TRANSPOSED_CONVOLUTION_LAYOUTS = {"relax.nn.conv2d_transpose": ["NCHW", "IOHW"],
                                  "relax.nn.conv3d_transpose": ["NCDHW", "IODHW"]}


def _has_transposed_convolutions(model: Any) -> bool:
    """Whether the TFLite model uses TRANSPOSE_CONV or CONV_3D_TRANSPOSE. The layout pass runs only
    then: its layout inference fails on some other operators' Relax forms."""
    from tflite.BuiltinOperator import BuiltinOperator

    wanted = {BuiltinOperator.TRANSPOSE_CONV, BuiltinOperator.CONV_3D_TRANSPOSE}
    codes = (model.OperatorCodes(i) for i in range(model.OperatorCodesLength()))
    return any(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) in wanted for code in codes)


def _lowered_transposed_convolutions(module: Any) -> Any:
    """Transposed convolutions as convolutions (`transposed_convolution.py`: fast, for the
    frontend's usual forms), and the rest in the layouts TVM lowers."""
    from tfcheck.compiler.frontend.transposed_convolution import as_convolutions, has_transposed_convolutions

    module = as_convolutions(module)
    return _lowerable_transposed_convolutions(module) if has_transposed_convolutions(module) else module


def _lowerable_transposed_convolutions(module: Any) -> Any:
    """Rewrite transposed convolutions into the layouts TVM lowers, with transposes around them
    (docs/importer-fixes.md); every other operator keeps its layout."""
    from tvm import relax

    return relax.transform.ConvertLayout(TRANSPOSED_CONVOLUTION_LAYOUTS)(module)


def _float64_inputs(model: Any) -> dict[str, str]:
    """The float32 twin's float32 inputs, by name, as float64 (TVM's `from_tflite` types its
    parameters from the flatbuffer, not through the converter)."""
    from tflite.TensorType import TensorType

    graph = model.Subgraphs(0)
    tensors = (graph.Tensors(graph.Inputs(i)) for i in range(graph.InputsLength()))
    return {tensor.Name().decode("utf-8"): "float64" for tensor in tensors if tensor.Type() == TensorType.FLOAT32}


@functools.cache
def _float64_converter_class() -> type:
    """`_converter_class` reading every float32 tensor as float64: constants keep their float32
    buffers (which the twin holds only where float32 is exact) and become float64 constants."""
    from tflite.TensorType import TensorType

    class Float64Converter(_converter_class()):
        def get_tensor_type_str(self, tensor_type: int) -> str:
            return "float64" if tensor_type == TensorType.FLOAT32 else super().get_tensor_type_str(tensor_type)

    return Float64Converter


@functools.cache
def _converter_class() -> type:
    """TVM's `OperatorConverter` with tfcheck's fixes and error reports (made on first use, so
    that importing this module does not import TVM). Subgraphs (WHILE bodies) are converted by
    `type(self)`, so they get the same."""
    from tvm.relax.frontend.tflite.tflite_frontend import OperatorConverter

    from tfcheck.compiler.frontend.suppression_padding import zero_padded_suppression
    from tfcheck.compiler.frontend.symbolic_import import ShapeValues
    from tfcheck.compiler.frontend.true_indices import convert_sparse_to_dense, convert_where

    class Converter(OperatorConverter):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.shape_values = ShapeValues(self)
            self.convert_map["SLICE"] = functools.partial(_convert_slice, self, super().convert_slice)
            self.convert_map["GATHER"] = functools.partial(_convert_gather, self, super().convert_gather)
            self.convert_map["CONCATENATION"] = functools.partial(
                _convert_concatenation, self, super().convert_concatenation)
            self.convert_map["GATHER_ND"] = functools.partial(_convert_gather_nd, self)
            self.convert_map["EXPAND_DIMS"] = functools.partial(_convert_expand_dims, self)
            self.convert_map["SCATTER_ND"] = functools.partial(_convert_scatter_nd, self, super().convert_scatter_nd)
            self.convert_map["TRANSPOSE_CONV"] = functools.partial(
                _convert_transpose_conv, self, super().convert_transpose_conv)
            self.convert_map["FULLY_CONNECTED"] = functools.partial(
                _convert_fully_connected, self, super().convert_fully_connected)
            self.convert_map["GELU"] = functools.partial(_convert_gelu, self, super().convert_gelu)
            self.convert_map["WHERE"] = functools.partial(convert_where, self, self.convert_map["WHERE"])
            self.convert_map["UNIQUE"] = _refuse_unique
            self.convert_map["SPARSE_TO_DENSE"] = functools.partial(convert_sparse_to_dense, self)
            for name in ("ARG_MAX", "ARG_MIN"):
                self.convert_map[name] = functools.partial(_convert_arg_min_max, self, self.convert_map[name])
            for name in ("NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5"):
                self.convert_map[name] = functools.partial(zero_padded_suppression, self, self.convert_map[name])
            self.shape_values.wrap(self.convert_map)
            self.convert_map = {name: _tracked(self, convert) for name, convert in self.convert_map.items()}
            self.current_op: Any = None

        def get_expr(self, input_tensor_idx: int) -> Any:
            """The tensor's Relax expression, or for a constant (which the expression table does not
            hold) a Relax constant of its value. TVM's converters of unary and element-wise operators
            (NEG, TILE, CAST, ...) read their input with `get_expr`, and failed on a constant with a
            `KeyError` naming it. TensorFlow's converter folds such operators of constants where the
            shapes are static; over an unknown size it leaves some: GPT-2's causal mask
            (`tf.linalg.band_part` over the run-time length: NEG of a constant)."""
            if not self.has_expr(input_tensor_idx) and input_tensor_idx >= 0:
                [tensor] = self.get_tensors([input_tensor_idx])
                if tensor.buffer is not None and tensor.buffer.DataLength():
                    return self.get_tensor_expr(tensor)
            return super().get_expr(input_tensor_idx)

        def get_tensor_shape(self, tensor_wrapper: Any) -> Any:
            """The shape of the tensor's Relax expression where TFLite's shape holds 1 for an
            unknown dimension (its `shape_signature` has -1): the symbolic one, not 1."""
            return self.shape_values.tensor_shape(tensor_wrapper) or super().get_tensor_shape(tensor_wrapper)

        def convert_op_to_relax(self) -> None:
            try:
                super().convert_op_to_relax()
            except ImporterError:
                raise  # already named, in the subgraph where it happened
            except Exception as error:  # noqa: BLE001 - any converter failure is reported the same way
                raise _named_error(self, self.current_op, error) from error

    return Converter


def _tracked(converter: Any, convert: Any) -> Any:
    """``convert`` that records which operator is being converted, for the error report (the
    failure may come from the converter or from normalising its result afterwards)."""

    def run(op: Any) -> Any:
        converter.current_op = op
        return convert(op=op)

    return run


_LEAVE_IT = "leave this function to TensorFlow (remove @tfcheck.aot)"
_WHAT_TO_DO = f"Rewrite that computation (docs/importer-fixes.md lists the forms tfcheck works around), or {_LEAVE_IT}."
# For a converter that crashed (a KeyError, TypeError, ... inside TVM's conversion) on a form that
# neither needs values at run time nor is refused on purpose: the importer's gap, not the user's code.
_IMPORTER_GAP = ("This is a gap in the importer, not a fault in the function: TVM's converter failed on a form "
                 "TensorFlow runs. Please report it (with the function; docs/importer-fixes.md lists the forms "
                 f"tfcheck works around), and {_LEAVE_IT} until it is fixed.")


def _named_error(converter: Any, op: Any, error: Exception) -> ImporterError:
    """An error naming the TFLite operator, its TensorFlow node and what the user can do."""
    if op is None:
        return ImporterError(f"TVM's TFLite importer failed outside any operator: {type(error).__name__}: {error}. "
                             f"Please report it (with the function), and {_LEAVE_IT}.")
    code = converter.get_op_code_str(op)
    outputs = [tensor.tensor.Name().decode("utf-8", "replace") for tensor in converter.get_output_tensors(op)]
    nodes = sorted({node for name in outputs for node in name.split(";") if node})
    node_text = ", ".join(f"'{node}'" for node in nodes[:3]) + (", ..." if len(nodes) > 3 else "") or "(unnamed)"
    hints = _runtime_input_hint(converter, op, error) + _data_sized_hint(code)
    # A refusal (tfcheck's or TVM's NotImplementedError says which form it does not take) or a form
    # that needs values known only at run time: the computation is what to change. Anything else
    # crashed in TVM's converter on code that is correct (GPT-2's causal mask once: NEG of a constant,
    # a KeyError): telling the user to rewrite it would blame their code for the importer's gap.
    advice = _WHAT_TO_DO if hints or isinstance(error, NotImplementedError) else _IMPORTER_GAP
    return ImporterError(
        f"TVM cannot import TFLite operator {code} from TensorFlow node {node_text}: "
        f"{type(error).__name__}: {error}.{hints} {advice}",
        op=nodes[0] if nodes else code,
    )


# TFLite operators whose output size the input values decide and that the build refuses: what
# TensorFlow code makes them. (WHERE of one input, their other one, imports: `true_indices.py`.)
_DATA_SIZED = {
    "UNIQUE": "tf.unique",
}


def _data_sized_hint(code: str) -> str:
    """For a refused operator whose output size only the data decides, what makes it and what to
    write instead."""
    made_by = _DATA_SIZED.get(code)
    if made_by is None:
        return ""
    return (f" {code} comes from {made_by}, whose output's size the input values decide; of such "
            "operations the build compiles tf.where(condition) and tf.boolean_mask, not this one. Return "
            "its input from the compiled function and compute it after the call.")


def _runtime_input_hint(converter: Any, op: Any, error: Exception) -> str:
    """When the converter failed reading an input as a constant (TVM's most common failure: a
    ``TypeError`` from ``get_tensor_value`` on an empty buffer), which inputs are computed at run time."""
    frames = []
    trace = error.__traceback__
    while trace is not None:
        frames.append(trace.tb_frame.f_code.co_name)
        trace = trace.tb_next
    if "get_tensor_value" not in frames:
        return ""
    runtime = [str(index) for index, tensor in enumerate(converter.get_input_tensors(op))
               if index > 0 and constant_value(converter, tensor) is None]
    if not runtime:
        return ""
    if len(runtime) == 1:
        return f" TVM's converter needs input {runtime[0]} of the operator to be a constant; it is computed at run time."
    return (f" TVM's converter needs inputs {' and '.join(runtime)} of the operator to be constants; they are "
            "computed at run time.")


def _producer(converter: Any, tensor_idx: int, code: str) -> Any:
    """The operator of ``converter``'s subgraph that writes tensor ``tensor_idx``, if it is a ``code``."""
    subgraph = converter.subgraph
    for index in range(subgraph.OperatorsLength()):
        op = subgraph.Operators(index)
        if tensor_idx in op.OutputsAsNumpy():
            return op if converter.get_op_code_str(op) == code else None
    return None


def _consumers(converter: Any, tensor_idx: int) -> list[Any]:
    """The operators of ``converter``'s subgraph that read tensor ``tensor_idx``."""
    subgraph = converter.subgraph
    ops = (subgraph.Operators(index) for index in range(subgraph.OperatorsLength()))
    return [op for op in ops if tensor_idx in op.InputsAsNumpy()]


def _tensor_list_write(converter: Any, op: Any) -> tuple[Any, Any, Any] | None:
    """(list, index, item) when CONCATENATION ``op`` is how TensorFlow's converter writes a
    TensorList item, ``concat([L[:i], item, L[i + 1:]], axis=0)``; None otherwise.

    The first slice starts at zero with size ``[i, -1, ...]`` and the second runs to the end
    (size all -1) from a begin computed at run time; the concatenation's static shape equals the
    list's, which leaves ``i + 1`` as the only begin TensorFlow could have run.
    """
    from tflite.ConcatenationOptions import ConcatenationOptions

    options = ConcatenationOptions()
    options.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
    inputs = converter.get_input_tensors(op)
    if len(inputs) != 3 or options.Axis() != 0:
        return None
    before, item, after = inputs
    head, tail = _producer(converter, before.tensor_idx, "SLICE"), _producer(converter, after.tensor_idx, "SLICE")
    if head is None or tail is None:
        return None
    (source, head_begin, head_size), (tail_source, _, tail_size) = (converter.get_input_tensors(head),
                                                                    converter.get_input_tensors(tail))
    begin, rest = constant_value(converter, head_begin), constant_value(converter, tail_size)
    shape = list(source.tensor.ShapeAsNumpy())
    output = converter.get_output_tensors(op)[0]
    if (tail_source.tensor_idx != source.tensor_idx or begin is None or begin.any() or rest is None
            or (rest != -1).any() or list(output.tensor.ShapeAsNumpy()) != shape
            or list(item.tensor.ShapeAsNumpy()) != [1, *shape[1:]]):
        return None
    return source, head_size, item


def _convert_slice(converter: Any, upstream: Any, op: Any) -> Any:
    """SLICE whose begin or size is computed at run time, when it is half of a TensorList write.

    TVM's converter reads begin and size as constants and fails with ``TypeError: a bytes-like
    object is required, not 'int'`` otherwise. TensorFlow writes a TensorList item
    (``TensorListSetItem``: every RNN layer with ``return_sequences=True``) as two such slices
    around the index and a concatenation; `_convert_concatenation` converts the three together,
    so the slices only stand in for the list here (their value is never read). Other dynamic
    slices would have shapes known only at run time, which the build cannot compile: they are
    refused here, where the error can name the TensorFlow node.
    """
    import tvm

    data, begin, size = converter.get_input_tensors(op)
    if constant_value(converter, begin) is not None and constant_value(converter, size) is not None:
        return upstream(op=op)
    output = converter.get_output_tensors(op)[0].tensor_idx
    consumers = _consumers(converter, output)
    if consumers and output not in converter.subgraph.OutputsAsNumpy() and all(converter.get_op_code_str(c) == "CONCATENATION" and _tensor_list_write(converter, c)
                         for c in consumers):
        return converter.get_tensor_expr(data)
    raise tvm.error.OpNotImplemented(
        "SLICE with a begin or size computed at run time gives a tensor whose shape is known only at run "
        "time; tfcheck supports it only as part of a TensorList write (tf.TensorArray.write, RNN outputs)")


def _convert_concatenation(converter: Any, upstream: Any, op: Any) -> Any:
    """A TensorList write as ``where(position == i, item, list)``: the list keeps its static shape."""
    from tvm import relax

    write = _tensor_list_write(converter, op)
    if write is None:
        return upstream(op=op)
    source, size, item = write
    shape = [int(d) for d in source.tensor.ShapeAsNumpy()]
    positions = np.arange(shape[0], dtype="int32").reshape([shape[0]] + [1] * (len(shape) - 1))
    index = relax.op.reshape(relax.op.strided_slice(relax.op.astype(converter.get_tensor_expr(size), "int32"),
                                                    axes=[0], begin=[0], end=[1]), [1] * len(shape))
    chosen = relax.op.equal(relax.const(positions, "int32"), index)
    return relax.op.where(chosen, converter.get_tensor_expr(item), converter.get_tensor_expr(source))


def _refuse_unique(op: Any) -> Any:
    """TVM converts UNIQUE to `relax.unique`, which it runs through a NumPy function registered by
    TVM's Python package (`relax.run.unique`): the build verified it, and production's runtime,
    which has no TVM, failed on its first call. Refused here, named, with `_data_sized_hint`."""
    raise NotImplementedError("TVM runs UNIQUE through a NumPy callback of its Python package, which "
                              "the artifact's runtime does not have")


def _convert_gelu(converter: Any, upstream: Any, op: Any) -> Any:
    """GELU as TFLite computes it: with `GeluOptions.approximate`, the tanh approximation
    `0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))`. TVM's converter ignores the option
    and always emits the erf form, which differs from the tanh one by up to 4.7e-4 (at |x| = 2.7).
    TensorFlow's converter fuses the tanh formula as tensorflow-addons and params_flow write it
    (`0.5 * x * (1 + tf.tanh(...))`), and `tf.nn.gelu(x, approximate=True)`, into an approximate
    GELU, so such transformers came out 2e-4 to 4e-4 of their output's scale away from TensorFlow
    (emla2805's ViT, kpe's BERT: issue 42's sweep), at any batch, fixed or not."""
    from tflite.GeluOptions import GeluOptions
    from tvm import relax

    options = GeluOptions()
    table = op.BuiltinOptions()
    if table is None or converter.is_quantized(op):
        return upstream(op)
    options.Init(table.Bytes, table.Pos)
    if not options.Approximate():
        return upstream(op)
    [data] = converter.get_input_tensors(op)
    x = converter.get_expr(data.tensor_idx)
    dtype = converter.get_tensor_type_str(data.tensor.Type())

    def const(value: float) -> Any:
        return relax.const(value, dtype)

    inner = relax.op.multiply(const(float(np.sqrt(2.0 / np.pi))),
                              relax.op.add(x, relax.op.multiply(const(0.044715),
                                                                relax.op.multiply(relax.op.multiply(x, x), x))))
    return relax.op.multiply(relax.op.multiply(const(0.5), x), relax.op.add(const(1.0), relax.op.tanh(inner)))


def _convert_arg_min_max(converter: Any, upstream: Any, op: Any) -> Any:
    """The upstream conversion, cast to the dtype of the TFLite output tensor: TVM's ARG_MAX and
    ARG_MIN always give int64, so `tf.argmax(x, output_type=tf.int32)` came out int64."""
    from tvm import relax

    [output] = converter.get_output_tensors(op)
    dtype = converter.get_tensor_type_str(output.tensor.Type())
    converted = upstream(op)
    return converted if dtype == "int64" else relax.op.astype(converted, dtype)


def _convert_transpose_conv(converter: Any, upstream: Any, op: Any) -> Any:
    """The upstream conversion to TFLite's output shape, with the operator's fused activation
    applied. TVM's TRANSPOSE_CONV ignores `TransposeConvOptions.FusedActivationFunction`, which
    TFLite's converter sets when a ReLU follows a transposed convolution (after folding a batch
    norm into it), so the ReLU was lost (keras.io's U-Net: 54816 of 76800 outputs wrong); and it
    passes no output padding (`_padded_to`)."""
    from tflite.TransposeConvOptions import TransposeConvOptions

    options = TransposeConvOptions()
    table = op.BuiltinOptions()
    options.Init(table.Bytes, table.Pos)
    wanted = converter.shape_values.value(converter.get_input_tensors(op)[0])
    with _padded_to(converter, None if wanted is None else list(wanted.reshape(-1))):
        converted = upstream(op)
    return converter.convert_fused_activation_function(converted, options.FusedActivationFunction())


@contextlib.contextmanager
def _padded_to(converter: Any, wanted: list[Any] | None) -> Iterator[None]:
    """While TVM's TRANSPOSE_CONV converts: its `conv2d_transpose` given the output padding that
    makes its result TFLite's output shape `wanted` (constant or symbolic). TVM's converter passes
    none, so a kernel smaller than its stride (`Conv2DTranspose(4, 1, strides=2)`, where TFLite's
    output is `h * 2` and the windows reach `(h - 1) * 2 + 1`) came out a row short per axis, which
    verification caught (`float32[1, 15, 15, 4] instead of float32[1, 16, 16, 4]`). The padded rows
    get no input, as in TensorFlow: only the bias."""
    from tvm import relax, sym, tirx

    original = relax.op.nn.conv2d_transpose

    def padded(data: Any, weight: Any, *args: Any, **kwargs: Any) -> Any:
        call = original(data, weight, *args, **kwargs)
        got = converter._infer_shape(converter.bb.normalize(call))  # noqa: SLF001 - the frontend's own helper
        missing = [sym.Analyzer().simplify(wanted[axis] - got[axis]) for axis in (1, 2)]
        strides = kwargs.get("strides", args[0] if args else (1, 1))
        if not all(isinstance(extra, tirx.IntImm) and 0 <= extra.value < stride
                   for extra, stride in zip(missing, strides)) or not any(extra.value for extra in missing):
            return call
        return original(data, weight, *args, output_padding=[extra.value for extra in missing], **kwargs)

    if wanted is None:
        yield
        return
    relax.op.nn.conv2d_transpose = padded
    try:
        yield
    finally:
        relax.op.nn.conv2d_transpose = original


def _convert_fully_connected(converter: Any, upstream: Any, op: Any) -> Any:
    """The upstream conversion with TFLite's rows: FULLY_CONNECTED without `keep_num_dims`
    flattens its input to `[-1, inputs]` and returns `[rows, units]`, where TVM's converter
    multiplies the input as it is and keeps its leading axes. TensorFlow's converter drops a
    `tf.reshape(x, (-1, d))` before a dense layer into that flattening, so `[1, 1, 80]` stood for
    `[1, 80]` and the next shape-sensitive operator failed (a greedy decoder's `logits[0]`: "Reshape
    expects the new shape to be convertible from the old shape"), or the output had the wrong rank."""
    from tflite.FullyConnectedOptions import FullyConnectedOptions
    from tvm import relax

    data, weight = converter.get_input_tensors(op)[:2]
    options = FullyConnectedOptions()
    table = op.BuiltinOptions()
    options.Init(table.Bytes, table.Pos)
    converted = upstream(op)
    if options.KeepNumDims() or len(converter.get_tensor_shape(data)) <= 2:
        return converted
    return relax.op.reshape(converter.bb.normalize(converted), [-1, int(weight.tensor.ShapeAsNumpy()[0])])


def _convert_expand_dims(converter: Any, op: Any) -> Any:
    """EXPAND_DIMS as Relax's `expand_dims`, whose axis range ([-rank - 1, rank]) is TensorFlow's.
    TVM's converter passes Relax a third argument it does not take (``TypeError: expand_dims()
    takes 2 positional arguments but 3 were given``). TensorFlow's converter folds EXPAND_DIMS into
    a RESHAPE where the shapes are static, so only models with an unknown dimension met it: a
    Keras `UpSampling2D` (`tf.repeat`) or any `tf.expand_dims` under an unknown batch size."""
    from tvm import relax

    data, axis = converter.get_input_tensors(op)
    value = constant_value(converter, axis)
    if value is None or value.size != 1:
        raise NotImplementedError("EXPAND_DIMS needs its axis as one constant; it is computed at run time")
    return relax.op.expand_dims(converter.get_tensor_expr(data), int(value.reshape(-1)[0]))


def _convert_gather_nd(converter: Any, op: Any) -> Any:
    """GATHER_ND with TensorFlow's index layout, which Relax's `gather_nd` shares. TVM's converter
    moves the index depth (the last axis of `indices`) first, Relay's layout: the import failed,
    or, where the shapes happened to fit, gathered the wrong elements."""
    from tvm import relax

    data, indices = converter.get_input_tensors(op)
    return relax.op.gather_nd(converter.get_tensor_expr(data),
                              relax.op.astype(converter.get_tensor_expr(indices), "int64"))


def _convert_scatter_nd(converter: Any, upstream: Any, op: Any) -> Any:
    """SCATTER_ND with a constant shape, as TensorFlow means it. TVM's converter moves the last
    axis of `indices` first (Relay's layout), but Relax's `scatter_nd` takes TensorFlow's own
    `[..., index depth]`, so every `tf.scatter_nd` failed to import; and TFLite sums updates to
    the same index, where TVM's converter kept one of them."""
    from tvm import relax

    indices, updates, shape = converter.get_input_tensors(op)
    constant_shape = constant_value(converter, shape)
    if constant_shape is None:
        return upstream(op)
    [output] = converter.get_output_tensors(op)
    zeros = relax.op.zeros([int(d) for d in constant_shape], converter.get_tensor_type_str(output.tensor.Type()))
    return relax.op.scatter_nd(zeros, converter.get_tensor_expr(indices), converter.get_tensor_expr(updates), "add")


def _convert_gather(converter: Any, upstream: Any, op: Any) -> Any:
    """GATHER with ``batch_dims > 0``, which TVM's converter ignores (it takes along ``axis`` for
    every batch: ``tf.gather(p[8, 10], i[8], batch_dims=1)`` came out ``[8, 8]`` instead of ``[8]``).

    Batched gather along ``axis`` is a plain gather on the flattened batch: index
    ``b * axis_extent + i`` into ``[batch * axis_extent, ...]``, with the axes between the batch
    axes and ``axis`` moved after it first.
    """
    from tflite.GatherOptions import GatherOptions

    options = GatherOptions()
    options.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
    batch_dims = options.BatchDims()
    if batch_dims == 0:
        return upstream(op=op)
    data, indices = converter.get_input_tensors(op)
    data_shape = [int(d) for d in data.tensor.ShapeAsNumpy()]
    indices_shape = [int(d) for d in indices.tensor.ShapeAsNumpy()]
    axis = options.Axis() % len(data_shape)
    batch_dims += len(indices_shape) if batch_dims < 0 else 0
    return _batched_take(converter.get_tensor_expr(data), converter.get_tensor_expr(indices),
                         data_shape, indices_shape, axis, batch_dims)


def _batched_take(data: Any, indices: Any, data_shape: list[int], indices_shape: list[int], axis: int,
                  batch_dims: int) -> Any:
    """``out[b..., m..., i..., p...] = data[b..., m..., indices[b..., i...], p...]`` (TensorFlow's
    gather with ``batch_dims``), from reshapes, one transpose and a `take` on axis 0."""
    from tvm import relax

    batch = int(np.prod(data_shape[:batch_dims], dtype=np.int64))
    middle = data_shape[batch_dims:axis]
    extent = data_shape[axis]
    post = data_shape[axis + 1:]
    rest = indices_shape[batch_dims:]
    # [b, m..., n, p...] -> [b, n, m..., p...] -> [b * n, m..., p...]
    order = [0, 1 + len(middle), *range(1, 1 + len(middle)), *range(2 + len(middle), 2 + len(middle) + len(post))]
    flat = relax.op.reshape(relax.op.permute_dims(relax.op.reshape(data, [batch, *middle, extent, *post]), order),
                            [batch * extent, *middle, *post])
    offsets = np.arange(batch, dtype="int64").reshape([batch] + [1] * len(rest)) * extent
    flat_indices = relax.op.add(relax.op.reshape(relax.op.astype(indices, "int64"), [batch, *rest]),
                                relax.const(offsets, "int64"))
    taken = relax.op.take(flat, flat_indices, axis=0)  # [b, i..., m..., p...]
    # -> [b, m..., i..., p...]
    moved = [0, *range(1 + len(rest), 1 + len(rest) + len(middle)), *range(1, 1 + len(rest)),
             *range(1 + len(rest) + len(middle), 1 + len(rest) + len(middle) + len(post))]
    out_shape = [*data_shape[:batch_dims], *middle, *rest, *post]
    return relax.op.reshape(relax.op.permute_dims(taken, moved), out_shape)
