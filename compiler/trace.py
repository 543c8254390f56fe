"""Child process: import the user's module, trace one annotated function, freeze, convert to TFLite.

Run as `python -m tfcheck.compiler.trace request.json` (see `compiler/child.py`). For every shape
entry of the function it writes, into `work_dir/variant-<i>/`:

- `model.tflite`: the frozen graph converted with TFLite builtin ops only (TVM cannot import Flex);
- `io.npz`: generated inputs (`input_<j>`) and TensorFlow's outputs for them (`output_<k>`), which
  the compile step uses to verify the artifact;

and reports, per variant, the input/output specs, the output structure, the frozen graph's SHA-256
(the cache key's main part), the fingerprints and the TFLite operators.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
from pathlib import Path
from typing import Any

import numpy as np

from tfcheck.compiler.artifact import cache_key, entry_problem
from tfcheck.compiler.child import EventWriter, StepError, child_main
from tfcheck.compiler.fastkey import ReadRecorder
from tfcheck.compiler.messages import TracedVariant, TraceRequest, TraceResult
from tfcheck.compiler.tf_side import (freeze, generate_inputs, import_tensorflow, load_function,
                                      reference_outputs, to_tflite)


def trace_function(request: TraceRequest, events: EventWriter) -> TraceResult:
    """Import, trace every shape entry, and report what the parent needs for the cache key (and,
    unless in a dry run, for the fast key: what the import and the trace read)."""
    recorder = None
    if request.cache_dir is not None:
        recorder = ReadRecorder([Path(request.root), Path.cwd()], [Path(request.work_dir), Path(request.cache_dir)])
        recorder.start()
    source = request.path or request.module
    events.stage("import", doing="importing TensorFlow", before=f"importing {source}")
    tf = import_tensorflow()

    from tfcheck.fingerprint import source_fingerprint

    events.stage("import", doing=f"importing {source}", before=f"tracing {request.label}")
    tf_function, options = load_function(request.root, request.module, request.qualname)
    entries = options.get("shapes") or request.config_shapes or None
    signature = _flat_signature(tf_function, entries)
    shapes = _shape_entries(signature, entries, request.label)
    work_dir = Path(request.work_dir)
    variants = [
        _trace_variant(tf, tf_function, signature, entry, work_dir / f"variant-{index}", events, request)
        for index, entry in enumerate(shapes)
    ]
    python_function = tf_function.python_function
    return TraceResult(
        name=options.get("name") or request.qualname,
        qualname=f"{python_function.__module__}.{python_function.__qualname__}",
        versions=request.key.versions_with(tf.__version__),
        source_fingerprint=source_fingerprint(tf_function),
        variants=variants,
        inputs=recorder.inputs() if recorder is not None else None,
    )


def _flat_signature(tf_function: Any, entries: list[Any] | None) -> list[Any]:
    """The input_signature as a flat list of TensorSpecs, or a message saying how to add one."""
    import tensorflow as tf

    signature = tf_function.input_signature
    if signature is None:
        raise StepError(signature_hint(_tensor_parameters(tf_function.python_function), entries))
    flat = tf.nest.flatten(signature)
    if len(flat) != len(signature) or not all(isinstance(s, tf.TensorSpec) for s in flat):
        raise StepError("only a flat list of tf.TensorSpec is supported as input_signature")
    return flat


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


def _shape_entries(signature: list[Any], entries: list[Any] | None, label: str) -> list[list[list[int]]]:
    """One list of concrete input shapes per artifact.

    Without entries the signature's own shapes are used and must be fully known; with entries each
    must give one shape per input, compatible with the signature.
    """
    if not entries:
        unknown = [f"{_input_label(spec, i)} {_shape_text(spec.shape)}"
                   for i, spec in enumerate(signature) if not spec.shape.is_fully_defined()]
        if unknown:
            raise StepError(
                f"input {', '.join(unknown)} has unknown dimensions; list the concrete shapes to compile "
                f"for, one artifact each: {entries_example([spec.shape.as_list() for spec in signature], label)}")
        return [[spec.shape.as_list() for spec in signature]]
    return [_check_entry(signature, entry) for entry in entries]


def entries_example(shapes: list[list[int | None]], label: str) -> str:
    """Both spellings of shape entries for these signature shapes, unknown dimensions as 1 and 8:
    the decorator's (a bare shape for a one-input function) and the config's (always nested)."""
    entries = [[[size if dim is None else dim for dim in shape] for shape in shapes] for size in (1, 8)]
    decorated = ", ".join(repr(tuple(entry[0])) if len(entry) == 1 else repr(tuple(map(tuple, entry)))
                          for entry in entries)
    return (f"@tfcheck.aot(shapes=[{decorated}]) or, in pyproject.toml, [tool.tfcheck.build] "
            f'shapes = {{ "{label}" = {entries} }}')


def _check_entry(signature: list[Any], entry: Any) -> list[list[int]]:
    """Validate one shape entry against the signature (count, rank, known dimensions)."""
    shapes = [list(shape) for shape in entry]
    if len(shapes) != len(signature):
        raise StepError(f"shape entry {entry!r} has {len(shapes)} shapes for "
                        f"{len(signature)} inputs")
    for index, (spec, shape) in enumerate(zip(signature, shapes)):
        if any(dim is None for dim in shape) or not spec.shape.is_compatible_with(shape):
            raise StepError(f"shape {tuple(shape)} for {_input_label(spec, index)} must be "
                            f"concrete and compatible with the signature's {_shape_text(spec.shape)}")
    return shapes


def _input_label(spec: Any, index: int) -> str:
    return repr(spec.name) if spec.name else f"#{index}"


def _shape_text(shape: Any) -> str:
    return "(" + ", ".join("None" if dim is None else str(dim) for dim in shape.as_list()) + ")"


def _trace_variant(tf: Any, tf_function: Any, signature: list[Any], shapes: list[list[int]],
                   variant_dir: Path, events: EventWriter, request: TraceRequest) -> TracedVariant:
    """Concrete function -> frozen graph -> cache key; then, unless the cache holds the artifact,
    TFLite flatbuffer and reference inputs/outputs."""
    from tfcheck.fingerprint import captures_fingerprint

    events.stage("trace", doing=f"tracing {request.label} for input shapes {shapes}")
    names = _input_names(tf_function, signature)
    specs = [tf.TensorSpec(shape, spec.dtype, name=name) for spec, shape, name in zip(signature, shapes, names)]
    concrete = _specialize(tf, tf_function, signature, specs).get_concrete_function()
    frozen = freeze(concrete)
    graph_bytes = canonical_graph_bytes(frozen.graph.as_graph_def(), [t.name.split(":")[0] for t in frozen.inputs])
    inputs = [{"name": n, "shape": s, "dtype": spec.dtype.name} for n, s, spec in zip(names, shapes, signature)]
    graph_sha256 = hashlib.sha256(graph_bytes).hexdigest()
    key = cache_key(graph_sha256, inputs, request.key.target, request.key.compile_options,
                    request.key.versions_with(tf.__version__))
    described = TracedVariant(str(variant_dir), inputs, graph_sha256, captures_fingerprint(concrete), key)
    # Checked here, right after freezing, because converting, running TensorFlow for reference
    # outputs and compiling are all unnecessary for a function that has not changed.
    if request.cache_dir is not None and entry_problem(Path(request.cache_dir) / key) is None:
        return dataclasses.replace(described, cached=True)
    events.stage("convert", doing=f"converting {request.label} to TFLite for input shapes {shapes}")
    flatbuffer = to_tflite(frozen)
    variant_dir.mkdir(parents=True, exist_ok=True)
    (variant_dir / "model.tflite").write_bytes(flatbuffer)
    arrays = generate_inputs(inputs)
    outputs = reference_outputs(concrete, arrays)
    np.savez(variant_dir / "io.npz", **{f"input_{i}": a for i, a in enumerate(arrays)},
             **{f"output_{i}": a for i, a in enumerate(outputs)})
    return dataclasses.replace(
        described,
        outputs=[{"name": f"output_{i}", "shape": list(a.shape), "dtype": str(a.dtype)} for i, a in enumerate(outputs)],
        output_structure=_output_structure(tf, concrete.structured_outputs),
        operators=tflite_operators(flatbuffer),
    )


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


def _specialize(tf: Any, tf_function: Any, signature: list[Any], specs: list[Any]) -> Any:
    """The tf.function to trace for these concrete shapes.

    A tf.function with an input_signature always traces that signature, so unknown dimensions
    would stay unknown (and TVM would import them as 1); for a shape entry that fills them in, the
    same Python function is wrapped again with the concrete signature.
    """
    if all(spec.shape == concrete.shape for spec, concrete in zip(signature, specs)):
        return tf_function
    return tf.function(tf_function.python_function, input_signature=specs)


def _input_names(tf_function: Any, signature: list[Any]) -> list[str]:
    """A spec's own name, else the Python parameter's name, else `input_<i>`."""
    parameters = list(inspect.signature(tf_function.python_function).parameters)
    return [spec.name or (parameters[i] if i < len(parameters) else f"input_{i}")
            for i, spec in enumerate(signature)]


def _output_structure(tf: Any, structured: Any) -> dict[str, Any]:
    """`tensor`, `tuple` (with length) or `dict` (keys in flattening order, i.e. sorted)."""
    if isinstance(structured, tf.Tensor):
        return {"kind": "tensor"}
    if isinstance(structured, (tuple, list)) and all(isinstance(t, tf.Tensor) for t in structured):
        return {"kind": "tuple", "length": len(structured)}
    if isinstance(structured, dict) and all(isinstance(t, tf.Tensor) for t in structured.values()):
        return {"kind": "dict", "keys": sorted(structured)}
    raise StepError(f"returns {type(structured).__name__}: an artifact can return a tensor, "
                    "a flat tuple of tensors or a flat dict of tensors")


def tflite_operators(flatbuffer: bytes) -> list[dict[str, Any]]:
    """Every TFLite operator of every subgraph, counted, with one output tensor name as an example
    (the name carries the TensorFlow node it came from, e.g. `model/conv1/Conv2D`)."""
    import tflite
    from tflite.BuiltinOperator import BuiltinOperator

    names = {code: name for name, code in vars(BuiltinOperator).items() if name.isupper()}
    model = tflite.Model.GetRootAsModel(flatbuffer, 0)
    counts: dict[str, dict[str, Any]] = {}
    for s in range(model.SubgraphsLength()):
        subgraph = model.Subgraphs(s)
        for o in range(subgraph.OperatorsLength()):
            operator = subgraph.Operators(o)
            name = _op_name(model.OperatorCodes(operator.OpcodeIndex()), names)
            outputs = operator.OutputsAsNumpy() if operator.OutputsLength() else []
            tensor = subgraph.Tensors(int(outputs[0])).Name().decode() if len(outputs) else ""
            entry = counts.setdefault(name, {"op": name, "count": 0, "example": tensor})
            entry["count"] += 1
    return sorted(counts.values(), key=lambda e: (-e["count"], e["op"]))


def _op_name(code: Any, names: dict[int, str]) -> str:
    """The builtin's name; custom ops as `CUSTOM:<name>`."""
    builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    name = names.get(builtin, f"BUILTIN_{builtin}")
    if name == "CUSTOM":
        return f"CUSTOM:{code.CustomCode().decode()}"
    return name


if __name__ == "__main__":
    child_main(trace_function, TraceRequest)
