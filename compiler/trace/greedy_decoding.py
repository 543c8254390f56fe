"""`tf.nn.ctc_greedy_decoder` (`CTCGreedyDecoder`) as ops TFLite has builtins for, before conversion.

OCR and speech models decode their per-step class scores greedily: Keras' `ctc_decode`
(`tf.keras.backend.ctc_decode`, keras-ocr's `Recognizer.prediction_model`, issue 42) calls
`tf.nn.ctc_greedy_decoder` and densifies its sparse result. TFLite has no builtin for the op, so the
conversion failed naming it. TensorFlow's kernel (tensorflow/core/util/ctc/ctc_decoder.h) is simple:
for each batch element, over its first `sequence_length` steps, take the best class (the first
maximum); keep it unless it is the blank or, with `merge_repeated`, the class of the step before;
the log probability is minus the sum of the best scores. Its four outputs are the kept classes'
[batch, position] indices (batch-major, in time order), the classes, the dense shape [batch, most
kept] and the log probabilities [batch, 1]. The same computation in builtins (ARG_MAX, CUMSUM,
WHERE, GATHER_ND, ...) replaces the node: its indices have as many rows as the data keep, which the
importer follows as a size of its own (`frontend/true_indices.py`).

The replacement is traced as a tf.function by the caller's TensorFlow (this module imports none:
`bridge.py` passes it in), and its nodes are copied in under the decoder's name; the decoder
becomes an IdentityN of the four results, so its consumers read `decoder:0` to `decoder:3` as before.
Float32 scores with a known number of classes only; any other decoder is left to the conversion's
error.
"""

from __future__ import annotations

from typing import Any

from tfcheck.compiler.trace.graph_nodes import become, with_rewrites

_OP = "CTCGreedyDecoder"
_FLOAT32 = 1
_INT64 = 9


def greedy_decoders_as_builtins(graph_def: Any, graph: Any, tf: Any) -> Any:
    """A copy of `graph_def` (the GraphDef of `graph`) with each float32 CTCGreedyDecoder of a
    known number of classes replaced (see the module); `graph_def` itself when there is none."""
    plans = {}
    for index, node in enumerate(graph_def.node):
        if node.op != _OP or node.attr["T"].type != _FLOAT32:
            continue
        operation = graph.get_operation_by_name(node.name)
        scores, lengths = operation.inputs[0], operation.inputs[1]
        if scores.shape.rank != 3 or scores.shape[2] is None:
            continue
        classes = int(scores.shape[2])
        blank = int(node.attr["blank_index"].i) if "blank_index" in node.attr else -1
        plans[index] = _decoder_graph(tf, scores.shape, lengths.dtype, classes + blank if blank < 0 else blank,
                                      node.attr["merge_repeated"].b)
    return with_rewrites(graph_def, plans, _splice)


def _decoder_graph(tf: Any, scores_shape: Any, lengths_dtype: Any, blank: int, merge_repeated: bool) -> Any:
    """The greedy decoding traced as a concrete function over TensorFlow's builtins (the module)."""

    @tf.function(input_signature=[tf.TensorSpec(scores_shape, tf.float32), tf.TensorSpec([None], lengths_dtype)])
    def decode(scores: Any, lengths: Any) -> Any:
        best = tf.argmax(scores, axis=2)  # [steps, batch], int64, the first maximum as TensorFlow's kernel
        steps = tf.shape(scores)[0]
        counted = tf.range(steps)[:, None] < tf.cast(lengths, tf.int32)[None, :]
        log_probability = -tf.reduce_sum(tf.where(counted, tf.reduce_max(scores, axis=2), 0.0), axis=0)[:, None]
        kept = counted & tf.not_equal(best, blank)
        if merge_repeated:
            kept &= tf.concat([tf.ones_like(best[:1], tf.bool), tf.not_equal(best[1:], best[:-1])], axis=0)
        kept, best = tf.transpose(kept), tf.transpose(best)
        where = tf.where(kept)  # [count, 2]: batch, step
        ones = tf.cast(kept, tf.int64)
        positions = tf.gather_nd(tf.cumsum(ones, axis=1) - 1, where)
        indices = tf.stack([where[:, 0], positions], axis=1)
        shape = tf.stack([tf.cast(tf.shape(scores)[1], tf.int64), tf.reduce_max(tf.reduce_sum(ones, axis=1))])
        return indices, tf.gather_nd(best, where), shape, log_probability

    concrete = decode.get_concrete_function()
    inputs = [tensor.name.split(":")[0] for tensor in concrete.inputs]
    return concrete.graph.as_graph_def(), inputs, [tensor.name for tensor in concrete.outputs]


def _splice(graph_def: Any, node: Any, plan: Any, taken: set[str]) -> None:
    """Copy the plan's nodes in under `<decoder>/greedy/`, its placeholders read as the decoder's
    inputs, and turn the decoder into an IdentityN of its four outputs."""
    subgraph, placeholders, outputs = plan
    prefix = f"{node.name}/greedy"
    bound = dict(zip(placeholders, node.input[:2]))

    def renamed(name: str) -> str:
        control, bare = ("^", name[1:]) if name.startswith("^") else ("", name)
        op, _, port = bare.partition(":")
        if op in bound:
            return control + bound[op] + (f":{port}" if port and port != "0" else "")
        return f"{control}{prefix}/{op}" + (f":{port}" if port else "")

    for inner in subgraph.node:
        if inner.name in bound:
            continue
        added = graph_def.node.add()
        added.CopyFrom(inner)
        added.name = f"{prefix}/{inner.name}"
        taken.add(added.name)
        added.ClearField("input")
        added.input.extend(renamed(name) for name in inner.input)
    become(node, "IdentityN", [renamed(name) for name in outputs])
    node.attr["T"].list.type.extend([_INT64, _INT64, _INT64, _FLOAT32])
