"""Child process: import the user's module, trace one annotated function, freeze, convert to TFLite.

Run as `python -m tfcheck.compiler.trace.tracing request.json` (see `compiler/process/child.py`). For every shape
entry of the function it writes, into `work_dir/variant-<i>/`:

- `model.tflite`: the frozen graph converted with TFLite builtin ops only (TVM cannot import Flex);
  or, for a function whose weights are inputs (`prepare`), the weight-less graph, with the weights'
  values in `weights.npz` (`compiler/process/weights_file.py`);
- `io.npz`: generated inputs (`input_<j>`) and TensorFlow's outputs for them (`output_<k>`), which
  the compile step uses to verify the artifact, and TFLite's outputs (`tflite_output_<k>`, when its
  interpreter runs the model), which tell verification how far float32 rounding moves them (a
  symbolic build writes `io-<i>.npz` per verified size, each with the same three);

and reports, per variant, the input/output specs, the output structure, the frozen graph's SHA-256
(the cache key's main part), the fingerprints and the TFLite operators.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tfcheck.compiler.trace import symbolic
from tfcheck.compiler.cache.artifacts import ArtifactCache, cache_key
from tfcheck.compiler.process.child import EventWriter, StepError, child_main
from tfcheck.compiler.cache.fastkey import ReadRecorder
from tfcheck.compiler.process.io_file import save_io
from tfcheck.compiler.process.messages import (OperatorCount, SymbolicFailure, TracedVariant, TraceRequest,
                                               TraceResult)
from tfcheck.compiler.trace.bridge import (FLOAT64_ADVICE, INT_VALUES, LIFT_WEIGHTS_ABOVE, DtypeRefused,
                                      LiftedWeights, Traceable, WeightsRefused, computes_in_float64, error_summary,
                                      float32_twin,
                                      freeze, generate_inputs, import_tensorflow, index_tables, lift_weights,
                                      load_saved_signature,
                                      load_traceable, reference_outputs, tflite_outputs, to_tflite, weight_values)
from tfcheck.compiler.process.weights_file import WEIGHTS_FILE, save_weights
from tfcheck.compiler.trace.float64_twin import TwinRefused
from tfcheck.compiler.trace.unrolled_rnn import concrete_unrolled
from tfcheck.runtime.manifest import SymbolicDim, TensorSpec
from tfcheck.runtime.structure import leaf_paths
from tfcheck.runtime.weights import read_weights


def preload() -> None:
    """What every tracing child imports before the user's module, once for all of them in the
    fork server (`compiler/process/forkserver.py`): TensorFlow and Keras, as `trace_function` does."""
    import_tensorflow(onednn=False)


def trace_function(request: TraceRequest, events: EventWriter) -> TraceResult:
    """Import, trace every shape entry, and report what the parent needs for the cache key (and,
    unless in a dry run, for the fast key: what the import and the trace read)."""
    recorder = None
    if request.cache_dir is not None:
        recorder = ReadRecorder([Path(request.root), Path.cwd()], [Path(request.work_dir), Path(request.cache_dir)])
        recorder.start()
    source = request.path or request.module
    events.stage("import", doing="importing TensorFlow", before=f"importing {source}")
    tf = import_tensorflow(onednn=False)
    events.stage("import", doing=f"importing {source}", before=f"tracing {request.label}")
    traced = load_saved_signature(request) if request.saved_model else load_traceable(request)
    request = dataclasses.replace(request, weights=weights_mode(traced.options, request))
    entries = traced.options.get("shapes") or request.config_shapes or None
    dims = traced.options.get("dims")
    dims = request.config_dims if dims is None else dims  # `dims={}`: symbolic, every dimension unbounded
    signature = _signature(tf, traced, entries)
    arguments = _arguments(tf, signature, _argument_names(tf, traced, signature))
    given_values = _given_values(traced.options.get("values"), _leaf_names(arguments))
    work_dir = Path(request.work_dir)
    flat = tf.nest.flatten(signature)
    if request.symbolic and _is_symbolic(flat, entries, dims):
        variants = [_trace_symbolic(tf, traced.tf_function, signature, arguments, dims or {},
                                    work_dir / "variant-0", events, request, bool(entries), given_values)]
    else:
        shapes = _shape_entries(flat, _leaf_names(arguments), entries)
        variants = [
            _trace_variant(tf, traced.tf_function, signature, arguments, entry, work_dir / f"variant-{index}",
                           events, request, given_values)
            for index, entry in enumerate(shapes)
        ]
    return TraceResult(
        name=traced.name,
        qualname=traced.qualname,
        versions=request.key.versions_with(tf.__version__),
        source_fingerprint=traced.source_fingerprint,
        variants=variants,
        inputs=recorder.inputs() if recorder is not None else None,
        has_shape_entries=bool(entries),
    )


def _is_symbolic(flat: list[Any], entries: list[Any] | None, dims: dict[str, Any] | None) -> bool:
    """Whether to build one artifact with symbolic dimensions: the signature has unknown
    dimensions, and either no shape entries list concrete shapes or `dims=` (or the config's
    `dims`) bounds them as well. Shape entries alone ask for one artifact per shape (the explicit
    per-shape route); with `dims=` they are the fallback when the symbolic build fails."""
    unknown = any(not spec.shape.is_fully_defined() for spec in flat)
    return unknown and (dims is not None or not entries)


def _signature(tf: Any, traced: Traceable, entries: list[Any] | None) -> list[Any]:
    """The input_signature, one entry (a TensorSpec or a tf.nest structure of them) per
    argument, or a message saying how to add one."""
    signature = traced.tf_function.input_signature
    if signature is None:
        raise StepError(signature_hint(_tensor_parameters(traced.tf_function.python_function), entries))
    leaves = tf.nest.flatten(signature)
    if not all(isinstance(spec, tf.TensorSpec) for spec in leaves):
        others = sorted({type(spec).__name__ for spec in leaves if not isinstance(spec, tf.TensorSpec)})
        raise StepError(f"input_signature holds {', '.join(others)}: an artifact takes tf.TensorSpec "
                        "inputs, alone or nested in tuples, lists, dicts and namedtuples")
    return list(signature)


def _tensor_parameters(python_function: Any) -> list[str]:
    """The parameters that take tensors: the positional ones without a default (`training=False`
    and the like are Python options, not inputs)."""
    positional = [p for p in inspect.signature(python_function).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [p.name for p in positional if p.default is p.empty] or [p.name for p in positional]


def signature_hint(parameters: list[str], entries: list[Any] | None) -> str:
    """How to declare the missing input_signature, with the function's own parameter names and,
    when the shape entries (`shapes=` or the config) give one shape per parameter, the shapes they
    imply: a dimension that differs between entries becomes None."""
    known = bool(entries) and all(len(entry) == len(parameters) for entry in entries)
    shapes = [_common_shape([entry[i] for entry in entries]) if known else "[...]"
              for i in range(len(parameters))]
    specs = ", ".join(f"tf.TensorSpec({shape}, tf.float32, name={name!r})" for shape, name in zip(shapes, parameters))
    todo = "shapes from the shape entries; check the dtypes" if known else \
        "fill in each shape, with None for a dimension that varies, and each dtype"
    return (f"no input_signature: the build needs the shape and dtype of each input; declare them with "
            f"@tf.function(input_signature=[{specs}]) ({todo})")


def _common_shape(shapes: list[Any]) -> str:
    """`[None, 8]` for (1, 8) and (4, 8); `[...]` when the ranks differ."""
    if len({len(shape) for shape in shapes}) != 1:
        return "[...]"
    return "[" + ", ".join(str(dims[0]) if len(set(dims)) == 1 else "None" for dims in zip(*shapes)) + "]"


def _shape_entries(signature: list[Any], names: list[str], entries: list[Any] | None) -> list[list[list[int]]]:
    """One list of concrete input shapes (one per tensor, in flattening order) per artifact.

    Without entries the signature's own shapes are used (they are fully known: unknown dimensions
    without entries take the symbolic route, `_is_symbolic`); with entries each must give one
    shape per input, compatible with the signature.
    """
    if not entries:
        return [[spec.shape.as_list() for spec in signature]]
    return [_check_entry(signature, names, entry) for entry in entries]


def _check_entry(signature: list[Any], names: list[str], entry: Any) -> list[list[int]]:
    """Validate one shape entry against the signature (count, rank, known dimensions)."""
    shapes = [list(shape) for shape in entry]
    if len(shapes) != len(signature):
        raise StepError(f"shape entry {entry!r} has {len(shapes)} shapes for "
                        f"{len(signature)} inputs")
    for spec, shape, name in zip(signature, shapes, names):
        if any(dim is None for dim in shape) or not spec.shape.is_compatible_with(shape):
            raise StepError(f"shape {tuple(shape)} for {name!r} must be "
                            f"concrete and compatible with the signature's {_shape_text(spec.shape)}")
    return shapes


def _shape_text(shape: Any) -> str:
    return "(" + ", ".join("None" if dim is None else str(dim) for dim in shape.as_list()) + ")"


def _trace_variant(tf: Any, tf_function: Any, signature: list[Any], arguments: list[dict[str, Any]],
                   shapes: list[list[int]], variant_dir: Path, events: EventWriter,
                   request: TraceRequest, given_values: dict[str, tuple[float, float]]) -> TracedVariant:
    """Concrete function -> frozen graph -> cache key; then, unless the cache holds the artifact,
    TFLite flatbuffer and reference inputs/outputs."""
    from tfcheck.fingerprint import captures_fingerprint

    events.stage("trace", doing=f"tracing {request.label} for input shapes {shapes}")
    flat = tf.nest.flatten(signature)
    names = _leaf_names(arguments)
    concrete = _specialize(tf, tf_function, signature, arguments, shapes).get_concrete_function()
    inputs = [TensorSpec(n, tuple(s), spec.dtype.name) for n, s, spec in zip(names, shapes, flat)]
    values = input_values(inputs, index_tables(concrete, len(inputs)), given_values)
    output_structure = _output_structure(tf, concrete.structured_outputs)
    prepared, key, frozen_because = _prepare_and_key(concrete, request, lambda graph: cache_key(
        graph, inputs, request.key.target, request.key.compile_options, request.key.versions_with(tf.__version__),
        {"inputs": arguments, "outputs": output_structure, **({"values": values} if values else {})}))
    described = TracedVariant(str(variant_dir), inputs, prepared.graph_sha256, captures_fingerprint(concrete), key,
                              output_structure=output_structure, input_structure=arguments,
                              frozen_because=frozen_because, input_values=values)
    flatbuffer = _convert_unless_cached(prepared, key, variant_dir, events, request, inputs)
    if flatbuffer is None:
        return dataclasses.replace(described, cached=True)
    described = dataclasses.replace(described, weights=prepared.weights, float64=prepared.float64)  # 0: fell back
    arrays = generate_inputs(inputs, values)
    try:
        outputs = reference_outputs(concrete, arrays)
    except Exception as error:  # noqa: BLE001 - whatever TensorFlow raises on the generated inputs
        failure = values_failure(request.label, error_summary(error), inputs, values, request.saved_model is None)
        if failure is None:
            raise
        raise StepError(failure) from error
    second = tflite_outputs(flatbuffer, arrays, saved_weights(variant_dir, prepared.weights)) or []
    save_io(variant_dir / "io.npz", arrays, outputs, second)
    return dataclasses.replace(
        described,
        outputs=[TensorSpec(f"output_{i}", _data_sized(tuple(a.shape), tensor.shape.as_list()), str(a.dtype))
                 for i, (a, tensor) in enumerate(zip(outputs, tf.nest.flatten(concrete.structured_outputs)))],
        operators=tflite_operators(flatbuffer),
    )


def _data_sized(observed: tuple[int, ...], static: list[int | None] | None) -> tuple[int | None, ...]:
    """An output's shape over inputs of known shapes: what the reference run gave, but None where
    TensorFlow itself knows no size (`tf.boolean_mask`'s rows: the data decide them)."""
    if static is None or len(static) != len(observed):
        return observed
    return tuple(None if dim is None else size for size, dim in zip(observed, static))


def _trace_symbolic(tf: Any, tf_function: Any, signature: list[Any], arguments: list[dict[str, Any]],
                    dims: dict[str, Any], variant_dir: Path, events: EventWriter,
                    request: TraceRequest, has_shape_entries: bool,
                    given_values: dict[str, tuple[float, float]]) -> TracedVariant:
    """The signature as it is, unknown dimensions kept: one frozen graph, one TFLite flatbuffer
    (its tensors' `shape_signature` keeps -1), and reference inputs and outputs at each size of
    `symbolic.verify_sizes` (`io-<i>.npz`, with the sizes under `sizes`). An operator that the
    converter takes only at known sizes fails with what the parent needs to fall back to the
    shape entries, or to say how to write some (`StepError.symbolic`). The smallest sizes are
    those the function runs at in TensorFlow (`symbolic.runnable_bounds`), found before the cache
    key, which holds the bounds."""
    from tfcheck.fingerprint import captures_fingerprint

    events.stage("trace", doing=f"tracing {request.label} with symbolic dimensions")
    flat = tf.nest.flatten(signature)
    names = _leaf_names(arguments)
    shapes = symbolic.symbolic_shapes([spec.shape.as_list() for spec in flat], names)
    bounds = symbolic.bounds_of(shapes, dims, request.label)
    inputs = [TensorSpec(n, tuple(s), spec.dtype.name) for n, s, spec in zip(names, shapes, flat)]
    concrete = _traced_symbolic(tf_function, request, inputs, bounds, has_shape_entries)
    values = input_values(inputs, index_tables(concrete, len(inputs)), given_values)
    smallest = ", ".join(f"{name}={low}" for name, (low, _) in bounds.items())
    events.stage("trace", doing=f"running {request.label} in TensorFlow at its smallest sizes ({smallest})")
    runs = functools.partial(_error_at, concrete, inputs, values=values, request=request)
    bounds, raised = symbolic.runnable_bounds(bounds, dims, runs, request.label, request.saved_model is None)
    stepped = symbolic.size_steps(bounds, runs, request.label, request.saved_model is None)
    bounds, raised = stepped.bounds, "; ".join(filter(None, [raised, stepped.note])) or None
    steps = symbolic.verify_sizes(bounds, stepped.steps)
    output_structure = _output_structure(tf, concrete.structured_outputs)
    structures = {"inputs": arguments, "outputs": output_structure, "dims": bounds,
                  **({"steps": stepped.steps} if stepped.steps else {}), **({"values": values} if values else {})}
    prepared, key, frozen_because = _prepare_and_key(concrete, request, lambda graph: cache_key(
        graph, inputs, request.key.target, request.key.compile_options, request.key.versions_with(tf.__version__),
        structures))
    described = TracedVariant(str(variant_dir), inputs, prepared.graph_sha256, captures_fingerprint(concrete), key,
                              output_structure=output_structure, input_structure=arguments,
                              frozen_because=frozen_because, bounds_raised=raised,
                              dims=_symbolic_dims(bounds, steps, stepped.steps), input_values=values)
    fallback = SymbolicFailure(described.dims or {}, inputs, has_shape_entries)
    try:
        flatbuffer = _convert_unless_cached(prepared, key, variant_dir, events, request, inputs,
                                            _symbolic_crash(fallback, request))
    except StepError as error:
        if error.op is None or isinstance(error, DtypeRefused):  # known sizes would not help
            raise
        raise StepError(error.message, error.op, fallback) from error
    if flatbuffer is None:
        return dataclasses.replace(described, cached=True)
    described = dataclasses.replace(described, weights=prepared.weights, float64=prepared.float64)
    observed = []
    for index, sizes in enumerate(steps):
        arrays = generate_inputs(_at(inputs, sizes), values)
        outputs = _verified_outputs(concrete, arrays, request, sizes, steps, raised, _at(inputs, sizes), values)
        observed.append([list(a.shape) for a in outputs])
        second = tflite_outputs(flatbuffer, arrays, saved_weights(variant_dir, prepared.weights)) or []
        save_io(variant_dir / f"io-{index}.npz", arrays, outputs, second, sizes)
    static = [tensor.shape.as_list() for tensor in tf.nest.flatten(concrete.structured_outputs)]
    dtypes = [tensor.dtype.name for tensor in tf.nest.flatten(concrete.structured_outputs)]
    return dataclasses.replace(
        described,
        outputs=[TensorSpec(f"output_{i}", tuple(shape), dtype)
                 for i, (shape, dtype) in enumerate(zip(symbolic.output_dims(static, observed, steps), dtypes))],
        operators=tflite_operators(flatbuffer),
    )


def _traced_symbolic(tf_function: Any, request: TraceRequest, inputs: list[TensorSpec],
                     bounds: dict[str, tuple[int, int | None]], has_shape_entries: bool) -> Any:
    """The concrete function over the signature's unknown dimensions; a function that cannot be
    traced without their sizes (`x.shape[1] // 2` on None) fails naming them, with what falls back
    to the shape entries or says how to write some (`StepError.symbolic`). Keras RNN layers over a
    time dimension of known size are traced unrolled, or their loop over an unknown batch would not
    convert (`unrolled_rnn.py`)."""
    try:
        return concrete_unrolled(tf_function)
    except Exception as error:  # noqa: BLE001 - the user's code raises anything on an unknown size
        raise StepError(f"tracing {request.label} for inputs {describe_inputs(inputs)} failed: {error_summary(error)}",
                        symbolic=SymbolicFailure(_symbolic_dims(bounds, symbolic.verify_sizes(bounds)), inputs,
                                                 has_shape_entries)) from error


def _error_at(concrete: Any, inputs: list[TensorSpec], sizes: dict[str, int],
              values: list[tuple[float, float] | None] | None, request: TraceRequest) -> str | None:
    """TensorFlow's error running `concrete` on generated inputs of these sizes, in one line; None
    when it ran (`symbolic.runnable_bounds` asks). An index out of range is no matter of sizes:
    StepError saying so (`values_failure`)."""
    try:
        reference_outputs(concrete, generate_inputs(_at(inputs, sizes), values))
    except Exception as error:  # noqa: BLE001 - whatever TensorFlow raises at a size it cannot run
        failure = values_failure(request.label, error_summary(error), inputs, values, request.saved_model is None)
        if failure is not None:
            raise StepError(failure) from error
        return error_summary(error)
    return None


def _verified_outputs(concrete: Any, arrays: list[np.ndarray], request: TraceRequest, sizes: dict[str, int],
                      steps: list[dict[str, int]], raised: str | None, inputs: list[TensorSpec],
                      values: list[tuple[float, float] | None] | None) -> list[np.ndarray]:
    """TensorFlow's outputs at one of the sizes verified; a function that runs at the smallest
    sizes but not at this one (only even sizes) fails saying so, after why the smallest were raised;
    one that met an index out of range, saying that the values are at fault (`values_failure`)."""
    try:
        return reference_outputs(concrete, arrays)
    except Exception as error:  # noqa: BLE001 - whatever TensorFlow raises at a size it cannot run
        decorator = request.saved_model is None
        failure = values_failure(request.label, error_summary(error), inputs, values, decorator) or \
            symbolic.unverifiable(request.label, sizes, steps, error_summary(error), decorator)
        raise StepError("; ".join(filter(None, [raised, failure]))) from error


def _given_values(given: dict[str, tuple[float, float]] | None, names: list[str]) -> dict[str, tuple[float, float]]:
    """`values=` of @tfcheck.aot, checked against the inputs' names."""
    unknown = sorted(set(given or {}) - set(names))
    if unknown:
        raise StepError(f"values= names {', '.join(map(repr, unknown))}, which no input is called; the inputs: "
                        f"{', '.join(names)}")
    return dict(given or {})


def input_values(inputs: list[TensorSpec], tables: list[int | None],
                 given: dict[str, tuple[float, float]]) -> list[tuple[float, float] | None] | None:
    """Each input's range of test values where the build chooses one (`TracedVariant.input_values`):
    `values=`'s, else [0, rows) for int ids that index a table of that many rows; None when every
    input takes the defaults."""
    values: list[tuple[float, float] | None] = [
        tuple(given[spec.name]) if spec.name in given else (0, rows) if rows else None  # type: ignore[misc]
        for spec, rows in zip(inputs, tables)]
    return values if any(values) else None


# TensorFlow's words for an index outside its table (tf.gather, an embedding), on CPU.
_OUT_OF_RANGE = re.compile(r"indices(?:\[[^\]]*\])? = (-?\d+) is not in \[0, (\d+)\)")


def values_failure(label: str, error: str, inputs: list[TensorSpec], values: list[tuple[float, float] | None] | None,
                   decorator: bool = True) -> str | None:
    """The message when TensorFlow itself cannot run the function on the generated inputs because
    an index is out of its table's range (None for any other error): the values are at fault,
    not the sizes, and `values=` chooses them. kpe/bert-for-tf2's token type ids (a table of 2
    rows) read "raise the dims= lower bound of batch" before (issue 42)."""
    found = _OUT_OF_RANGE.search(error)
    if found is None:
        return None
    rows = int(found[2])
    chosen = [f"{spec.name} in [{low:g}, {high:g})" for spec, given in zip(inputs, values or [None] * len(inputs))
              if given is not None for low, high in [given]]
    default = [spec.name for spec, given in zip(inputs, values or [None] * len(inputs))
               if given is None and spec.dtype.startswith(("int", "uint"))]
    example = "{" + ", ".join(f'"{name}": (0, {rows})' for name in default or ["NAME"]) + "}"
    advice = (f"@tfcheck.aot(values={example})" if decorator else
              f"a SavedModel's signature takes no values= (the decorator's: values={example}), so leave it to "
              "TensorFlow or build the function it wraps")
    return (f"TensorFlow cannot run {label} on the build's generated inputs ({error}): the values are at fault, not "
            f"the sizes: an index of {found[1]} into a table of {rows} rows. The build draws an int input's values "
            "from [0, rows) where it reaches a lookup's indices (tf.gather, an embedding) through casts, reshapes, "
            "slices and selects" + (f" ({', '.join(chosen)})" if chosen else "")
            + f", and from {INT_VALUES[0]} to {INT_VALUES[1] - 1} otherwise"
            + (f" ({', '.join(default)})" if default else "")
            + f"; give the values the function takes, low included, high not: {advice}")


def _at(inputs: list[TensorSpec], sizes: dict[str, int]) -> list[TensorSpec]:
    """The symbolic inputs at these sizes."""
    shapes = symbolic.concrete([list(spec.shape) for spec in inputs], sizes)
    return [dataclasses.replace(spec, shape=tuple(shape)) for spec, shape in zip(inputs, shapes)]


def _symbolic_dims(bounds: dict[str, tuple[int, int | None]], steps: list[dict[str, int]],
                   size_steps: dict[str, int] | None = None) -> dict[str, SymbolicDim]:
    """Each dimension's bounds, the sizes it is verified at and its step, as the manifest records them."""
    return {name: SymbolicDim(low, high, tuple(sorted({step[name] for step in steps})), (size_steps or {}).get(name, 1))
            for name, (low, high) in bounds.items()}


def weights_mode(options: dict[str, Any], request: TraceRequest) -> str:
    """How the weights reach the converter: `@tfcheck.aot(weights=...)`'s choice ("auto" by
    default), unless the driver asks for "constants" (a lifted build that failed to compile)."""
    return "constants" if request.weights == "constants" else options.get("weights") or "auto"


@dataclass
class Prepared:
    """The function as the converter gets it: frozen, or with its weights as inputs (`lifted`)."""

    concrete: Any
    mode: str  # "auto", "inputs" or "constants"
    function: Any
    lifted: LiftedWeights | None
    graph_sha256: str  # the cache key's main part: the graph and, when lifted, every weight's bytes
    float64: bool = False  # `function` is a float64 function's float32 twin (`float64_twin.py`)

    @property
    def weights(self) -> int:
        """How many weight inputs the converted model takes after the user's (0: frozen)."""
        return len(self.lifted.handles) if self.lifted is not None else 0

    def fall_back(self) -> None:
        """Freeze instead (the key stays: it identifies the function and its weights either way)."""
        self.function, self.lifted = freeze(self.concrete), None


def prepare(concrete: Any, mode: str) -> Prepared:
    """The concrete function frozen, or with its weights as inputs: always with `mode` "inputs"
    (a function that cannot be is refused, naming the variable), never with "constants", and with
    "auto" when the weights are over `LIFT_WEIGHTS_ABOVE` and the function can be.

    Freezing copies every weight into a GraphDef, and the converter's MLIR copies them again:
    VGG16's 528 MB of weights took the tracing child to 8.8 GB. Lifted, the converter sees a graph
    without a single weight value, and the weights go to the compile child in a file.

    A function computed in float64 is lifted whatever the mode but "constants", and converted as
    its float32 twin (`float64_twin.py`): frozen, its weights would be rounded to float32.
    """
    if mode != "constants" and computes_in_float64(concrete):
        return _float64_prepared(concrete)
    if mode == "inputs" or (mode == "auto" and _captured_bytes(concrete) > LIFT_WEIGHTS_ABOVE):
        try:
            lifted = lift_weights(concrete)
        except WeightsRefused:
            if mode == "inputs":
                raise
        else:
            return Prepared(concrete, mode, lifted.function, lifted, lifted_graph_sha256(lifted))
    frozen = freeze(concrete)
    return Prepared(concrete, mode, frozen, None, frozen_graph_sha256(frozen))


def _float64_prepared(concrete: Any) -> Prepared:
    """The float64 function with its weights as inputs, as its float32 twin; one that cannot be
    lifted or twinned fails with why, and with the converter's advice for float64 models."""
    try:
        twin = float32_twin(lift_weights(concrete), concrete)
    except (WeightsRefused, TwinRefused) as error:
        raise DtypeRefused(f"computes in float64, which TFLite's builtins lack; tfcheck converts such a function "
                           f"as a float32 twin read back as float64, with its weights as inputs, but {error}. "
                           f"{FLOAT64_ADVICE}") from error
    return Prepared(concrete, "inputs", twin.function, twin, lifted_graph_sha256(twin), float64=True)


def _prepare_and_key(concrete: Any, request: TraceRequest,
                     key_of: Callable[[str], str]) -> tuple[Prepared, str, str | None]:
    """`prepare` and the cache key (`key_of` the graph's SHA-256); frozen at once, with the reason,
    when an earlier build of this very key with the weights as inputs failed and its frozen build
    succeeded (`ArtifactCache.keep_lifted_failure`): converting and compiling it again would fail
    the same way."""
    prepared = prepare(concrete, request.weights)
    key = key_of(prepared.graph_sha256)
    failure = None
    cache = _cache(request)
    if prepared.lifted is not None and cache is not None:
        failure = cache.lifted_failure(key)
    if failure is None:
        return prepared, key, None
    prepared = prepare(concrete, "constants")
    return prepared, key_of(prepared.graph_sha256), failure


def _cache(request: TraceRequest) -> ArtifactCache | None:
    """The artifact cache the driver named; None in a dry run, which reports the operators and so
    never stops at a cached artifact."""
    return ArtifactCache(Path(request.cache_dir)) if request.cache_dir is not None else None


def _captured_bytes(concrete: Any) -> int:
    """The size of the variables the function captures, without reading them."""
    return sum(int(np.prod(v.shape.as_list(), dtype=np.int64)) * v.dtype.size for v in concrete.variables)


def lifted_graph_sha256(lifted: LiftedWeights) -> str:
    """The SHA-256 of the weight-less graph and of every weight's dtype, shape and bytes, read one
    weight at a time (the same key role as `frozen_graph_sha256`, without a frozen copy)."""
    inputs = [tensor.name.split(":")[0] for tensor in lifted.function.inputs]
    digest = hashlib.sha256(b"tfcheck lifted weights\0")
    digest.update(hashlib.sha256(canonical_graph_bytes(lifted.graph_def, inputs)).digest())
    for value in weight_values(lifted):
        digest.update(f"{value.dtype.str}{list(value.shape)}\0".encode())
        digest.update(np.ascontiguousarray(value).view(np.uint8).reshape(-1).data)
    return digest.hexdigest()


def saved_weights(variant_dir: Path, count: int) -> Iterator[np.ndarray] | None:
    """The weights the conversion step saved, one at a time, as TFLite's interpreter takes them:
    after the user's inputs; None for a frozen function (`tflite_outputs` then runs XNNPACK)."""
    return read_weights(variant_dir / WEIGHTS_FILE, count) if count else None


def _convert_unless_cached(prepared: Prepared, key: str, variant_dir: Path, events: EventWriter,
                           request: TraceRequest, inputs: list[TensorSpec],
                           symbolic: SymbolicCrash | None = None) -> bytes | None:
    """None when the cache holds `key`: checked right after freezing, because converting, running
    TensorFlow for reference outputs and compiling are all unnecessary for a function that has not
    changed. Else the TFLite flatbuffer, written to `variant_dir/model.tflite`, and, when the
    weights are inputs, their values to `variant_dir/weights.npz` (`WEIGHTS_FILE`).

    A function whose lifted form the converter refuses (an op that needs a constant operand) is
    converted frozen instead (`prepared` then says 0 weights); one the user asked to lift is not.
    The converter is native code that can crash the process: each conversion's stage names the
    function and its inputs and says what to try then (`crash_advice`, or for a symbolic graph
    `symbolic`'s advice and fallback).
    """
    cache = _cache(request)
    if cache is not None and cache.entry_problem(key) is None:
        return None
    variant_dir.mkdir(parents=True, exist_ok=True)
    (variant_dir / WEIGHTS_FILE).unlink(missing_ok=True)
    try:
        flatbuffer = _converted(prepared, events, request, inputs, symbolic)
    except StepError:
        if prepared.lifted is None or prepared.mode == "inputs":
            raise
        prepared.fall_back()
        flatbuffer = _converted(prepared, events, request, inputs, symbolic)
    (variant_dir / "model.tflite").write_bytes(flatbuffer)
    if prepared.lifted is not None:
        save_weights(weight_values(prepared.lifted), variant_dir / WEIGHTS_FILE)
    return flatbuffer


@dataclass(frozen=True)
class SymbolicCrash:
    """What a crash of the converter on a symbolic graph tells the user, and what the driver then
    falls back to (only where shape entries exist to fall back to)."""

    advice: str
    fallback: SymbolicFailure | None


def _symbolic_crash(failure: SymbolicFailure, request: TraceRequest) -> SymbolicCrash:
    """Known sizes: the shape entries, built instead by the driver where there are some, else how
    to write them (at the sizes the function was found to run at)."""
    advice = "TensorFlow's TFLite converter crashes on some graphs with dimensions of unknown size"
    if failure.has_shape_entries:
        return SymbolicCrash(advice, failure)
    example = symbolic.entries_example([list(spec.shape) for spec in failure.inputs], request.label,
                                       request.saved_model is None, failure.dims)
    return SymbolicCrash(f"{advice}: to build one artifact per size instead, list the concrete shapes: {example}", None)


def _converted(prepared: Prepared, events: EventWriter, request: TraceRequest, inputs: list[TensorSpec],
               symbolic: SymbolicCrash | None) -> bytes:
    """`to_tflite`, in a stage that says what is converted and what to try should it crash."""
    advice = symbolic.advice if symbolic is not None else crash_advice(prepared)
    events.stage("convert", doing=f"converting {request.label} to TFLite for inputs {describe_inputs(inputs)}",
                 advice=advice, symbolic=symbolic.fallback if symbolic is not None else None)
    return to_tflite(prepared.function)


def describe_inputs(inputs: list[TensorSpec]) -> str:
    """`image: float32[1, 32, image_2, 3] (image_2 of unknown size)`: each input's name, dtype and
    shape, and which of its dimensions are unknown."""
    described = ", ".join(f"{spec.name}: {spec.dtype}[{', '.join(map(str, spec.shape))}]" for spec in inputs)
    unknown = list(dict.fromkeys(dim for spec in inputs for dim in spec.shape if isinstance(dim, str)))
    if not unknown:
        return described
    return f"{described} ({', '.join(unknown)} of unknown size)"


def crash_advice(prepared: Prepared) -> str:
    """What to try when TensorFlow's converter crashes the process (a SIGSEGV in its native code)
    on a graph of known sizes: the weights frozen for a lifted one; else the crash is TensorFlow's
    own."""
    if prepared.lifted is not None:
        return ("TensorFlow's TFLite converter crashed on the graph with the weights as inputs: build it with "
                "the weights frozen into the graph, @tfcheck.aot(weights=\"constants\")")
    return ("the crash is in TensorFlow's TFLite converter, not in your code: if "
            "tf.lite.TFLiteConverter.from_concrete_functions([f.get_concrete_function()]).convert() crashes "
            "outside tfcheck too, report it to TensorFlow or try another TensorFlow version; until then "
            "@tfcheck.aot runs the tf.function")


def _leaf_names(arguments: list[dict[str, Any]]) -> list[str]:
    """Each input tensor's name, following the structure: `x`, `features['ids']`, `pair[0]`."""
    return [path for argument in arguments for path in leaf_paths(argument, argument["name"])]


def frozen_graph_sha256(frozen: Any) -> str:
    """The SHA-256 of the frozen function's canonical GraphDef (the cache key's main part).

    The serialized graph holds every weight (528 MB for VGG16): it lives only inside this call,
    not through the TFLite conversion that follows (docs/build.md, "Memory").
    """
    inputs = [tensor.name.split(":")[0] for tensor in frozen.inputs]
    return hashlib.sha256(canonical_graph_bytes(frozen.graph.as_graph_def(), inputs)).hexdigest()


def canonical_graph_bytes(graph_def: Any, inputs: list[str]) -> bytes:
    """The GraphDef serialized in a form that is the same in every process for the same function.

    Freezing control flow (an LSTM, a `tf.range` loop) emits the nodes in an order that changes
    from process to process, and leaves unreferenced placeholders (`unused_control_flow_input_N`)
    whose numbering changes too. Neither carries meaning, but both would change the cache key of
    an unchanged function on every build, so nodes (and library functions and their nodes) are
    sorted by name, placeholders that are neither an input nor used by any node are dropped, and so
    are internal attributes.
    """
    canonical = type(graph_def)()
    canonical.CopyFrom(graph_def)
    used = {name.lstrip("^").split(":")[0] for node in canonical.node for name in node.input}
    nodes = sorted((node for node in canonical.node
                    if node.op != "Placeholder" or node.name in inputs or node.name in used),
                   key=lambda node: node.name)
    for node in nodes:
        _drop_internal_attributes(node)
    del canonical.node[:]
    canonical.node.extend(nodes)
    functions = sorted(canonical.library.function, key=lambda function: function.signature.name)
    del canonical.library.function[:]
    for function in functions:
        body = sorted(function.node_def, key=lambda node: node.name)
        for node in body:
            _drop_internal_attributes(node)
        del function.node_def[:]
        function.node_def.extend(body)
        canonical.library.function.append(function)
    return canonical.SerializeToString(deterministic=True)


def _drop_internal_attributes(node: Any) -> None:
    """Remove `_`-prefixed attributes (`_has_manual_control_dependencies`, `_class`, ...): TensorFlow
    bookkeeping that does not change what the node computes and is not stable between processes."""
    for name in [name for name in node.attr if name.startswith("_")]:
        del node.attr[name]


def _specialize(tf: Any, tf_function: Any, signature: list[Any], arguments: list[dict[str, Any]],
                shapes: list[list[int]]) -> Any:
    """The tf.function to trace for these concrete shapes.

    A tf.function with an input_signature always traces that signature, so unknown dimensions
    would stay unknown (and TVM would import them as 1); for a shape entry that fills them in, the
    same Python function is wrapped again with the concrete signature (a lone tensor argument
    keeps its name, which names the graph's placeholder).
    """
    flat = tf.nest.flatten(signature)
    if all(spec.shape == shape for spec, shape in zip(flat, shapes)):
        return tf_function
    specs = iter(tf.TensorSpec(shape, spec.dtype) for spec, shape in zip(flat, shapes))
    concrete = [tf.TensorSpec(next(specs).shape, entry.dtype, name=argument["name"])
                if argument["kind"] == "tensor" else tf.nest.map_structure(lambda _: next(specs), entry)
                for entry, argument in zip(signature, arguments)]
    return tf.function(tf_function.python_function, input_signature=concrete)


def _argument_names(tf: Any, traced: Traceable, signature: list[Any]) -> list[str]:
    """Each argument's name: a lone TensorSpec's own name, else the Python parameter's name (or
    the SavedModel signature's keyword), else `input_<i>`."""
    parameters = traced.argument_names or list(inspect.signature(traced.tf_function.python_function).parameters)
    return [(entry.name if isinstance(entry, tf.TensorSpec) and entry.name else None)
            or (parameters[i] if i < len(parameters) else f"input_{i}")
            for i, entry in enumerate(signature)]


def _arguments(tf: Any, signature: list[Any], names: list[str]) -> list[dict[str, Any]]:
    """The manifest's `input_structure`: each argument's structure node with its name."""
    return [{"name": name, **_structure(tf, entry, tf.TensorSpec, f"argument {name!r}")}
            for name, entry in zip(names, signature)]


def _output_structure(tf: Any, structured: Any) -> dict[str, Any]:
    """The manifest's `output_structure` (runtime/structure.py)."""
    return _structure(tf, structured, tf.Tensor, "the function's result")


def _structure(tf: Any, value: Any, leaf: type, what: str) -> dict[str, Any]:
    """The structure node of a tf.nest structure whose leaves are `leaf`s (tensors or specs);
    containers of leaves only have no `items`, so flat structures read as they always did."""
    if isinstance(value, leaf):
        return {"kind": "tensor"}
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise StepError(f"{what} is a dict with keys {sorted(map(repr, value))}: an artifact's dict keys are strings")
        keys = sorted(value)
        return _container({"kind": "dict", "keys": keys}, [_structure(tf, value[k], leaf, what) for k in keys])
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        node = {"kind": "namedtuple", "name": type(value).__name__, "fields": list(value._fields)}
        return _container(node, [_structure(tf, item, leaf, what) for item in value])
    if isinstance(value, (tuple, list)):
        node = {"kind": "tuple" if isinstance(value, tuple) else "list", "length": len(value)}
        return _container(node, [_structure(tf, item, leaf, what) for item in value])
    raise StepError(f"{what} holds a {type(value).__name__}: an artifact takes and returns tensors, alone or "
                    "nested in tuples, lists, dicts (string keys) and namedtuples")


def _container(node: dict[str, Any], items: list[dict[str, Any]]) -> dict[str, Any]:
    return node if all(item == {"kind": "tensor"} for item in items) else {**node, "items": items}


def tflite_operators(flatbuffer: bytes) -> list[OperatorCount]:
    """Every TFLite operator of every subgraph, counted, with one output tensor name as an example
    (the name carries the TensorFlow node it came from, e.g. `model/conv1/Conv2D`)."""
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator

    names = {code: name for name, code in vars(BuiltinOperator).items() if name.isupper()}
    model = tflite.Model.GetRootAsModel(flatbuffer, 0)
    counts: collections.Counter[str] = collections.Counter()
    examples: dict[str, str] = {}  # the first output tensor's name of each operator
    for s in range(model.SubgraphsLength()):
        subgraph = model.Subgraphs(s)
        for o in range(subgraph.OperatorsLength()):
            operator = subgraph.Operators(o)
            name = _op_name(model.OperatorCodes(operator.OpcodeIndex()), names)
            outputs = operator.OutputsAsNumpy() if operator.OutputsLength() else []
            tensor = subgraph.Tensors(int(outputs[0])).Name().decode() if len(outputs) else ""
            counts[name] += 1
            examples.setdefault(name, tensor)
    return [OperatorCount(name, counts[name], examples[name]) for name in sorted(counts, key=lambda n: (-counts[n], n))]


def _op_name(code: Any, names: dict[int, str]) -> str:
    """The builtin's name; custom ops as `CUSTOM:<name>`."""
    builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    name = names.get(builtin, f"BUILTIN_{builtin}")
    if name == "CUSTOM":
        return f"CUSTOM:{code.CustomCode().decode()}"
    return name


if __name__ == "__main__":
    child_main(trace_function, TraceRequest)
