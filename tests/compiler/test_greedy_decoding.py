"""`tf.nn.ctc_greedy_decoder` rewritten into builtins before conversion (`compiler/trace/greedy_decoding.py`).

The form is Keras' greedy `ctc_decode` as tf_keras writes it (tf_keras/src/backend.py, `ctc_decode`:
log of the transposed probabilities, the decoder, `tf.sparse.to_dense` to [samples, steps] with -1),
which keras-ocr's `Recognizer.prediction_model` (faustomorales/keras-ocr 9661d6f, recognition.py)
runs over its CRNN's softmax. TFLite has no builtin for `CTCGreedyDecoder`, so the build failed
naming it; and TVM converted SPARSE_TO_DENSE to `topi.sparse_to_dense`, which production's runtime
does not have. Over an unknown batch, the decoder's argmax (a value and an index reduced together,
`Bind`s in its kernel) failed to compile once its loop was versioned for the cores
(`lowering/unswitch.fresh_definitions` renamed loops and iterators, not bindings).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.compiler.production_run import build_exported, run_exported

CASES = [  # merge_repeated, blank_index (None: the last class), sequence lengths
    (True, None, [12, 12, 12]),
    (True, None, [12, 5, 0]),
    (False, None, [12, 7, 3]),
    (True, 0, [12, 12, 9]),
    (False, -2, [4, 12, 12]),
]


@pytest.mark.parametrize(("merge_repeated", "blank_index", "lengths"), CASES)
def test_the_rewrite_computes_tensorflows_decoding(merge_repeated: bool, blank_index: int | None,
                                                   lengths: list[int]) -> None:
    import tensorflow as tf

    from tfcheck.compiler.trace.greedy_decoding import greedy_decoders_as_builtins

    @tf.function(input_signature=[tf.TensorSpec([12, 3, 6], tf.float32), tf.TensorSpec([3], tf.int32)])
    def decode(scores, sequence_length):
        (decoded,), log_probability = tf.nn.ctc_greedy_decoder(scores, sequence_length, merge_repeated, blank_index)
        return decoded.indices, decoded.values, decoded.dense_shape, log_probability

    concrete = decode.get_concrete_function()
    graph_def = greedy_decoders_as_builtins(concrete.graph.as_graph_def(), concrete.graph, tf)
    assert "CTCGreedyDecoder" not in {node.op for node in graph_def.node}
    # few classes over many steps: repeats and blanks are common
    scores = np.random.default_rng(len(lengths) + sum(lengths)).standard_normal((12, 3, 6)).astype(np.float32)
    want = [t.numpy() for t in decode(scores, np.array(lengths, np.int32))]
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    with tf.compat.v1.Session(graph=graph) as session:
        got = session.run([t.name for t in concrete.outputs],
                          {concrete.inputs[0].name: scores, concrete.inputs[1].name: np.array(lengths, np.int32)})
    for name, mine, theirs in zip(("indices", "values", "shape", "log probability"), got, want):
        np.testing.assert_allclose(mine, theirs, rtol=1e-6, err_msg=name)


FUNCTIONS = '''
import tensorflow as tf
import tfcheck


@tfcheck.aot(dims={"batch": (1, 4)}, values={"probabilities": (0.0, 1.0)})
@tf.function(input_signature=[tf.TensorSpec([None, 12, 6], tf.float32)])
def decode(probabilities):
    """tf_keras' ctc_decode (greedy), over the steps as keras-ocr calls it."""
    num_samples, num_steps = tf.shape(probabilities)[0], tf.shape(probabilities)[1]
    y_pred = tf.math.log(tf.transpose(probabilities, perm=[1, 0, 2]) + 1e-7)
    input_length = tf.fill([num_samples], num_steps)
    (decoded,), _ = tf.nn.ctc_greedy_decoder(inputs=y_pred, sequence_length=input_length)
    st = tf.SparseTensor(decoded.indices, decoded.values, (tf.cast(num_samples, tf.int64), tf.cast(num_steps, tf.int64)))
    return tf.sparse.to_dense(sp_input=st, default_value=-1)
'''

# Run by the artifact's runtime alone (`production_run.run_exported`).
RUN = '''
results = {key: np.asarray(library.decode(inputs[key])) for key in inputs.files}
'''


@pytest.mark.slow
def test_kerass_greedy_ctc_decode_builds_over_any_batch_and_runs_in_production(
        project: Callable[..., Path], tmp_path: Path) -> None:
    folder = project({"ocr.py": FUNCTIONS})
    [record] = build_exported(folder / "ocr.py", tmp_path).values()
    assert record["status"] == "built" and record["verified"] is True, record["message"]

    rng = np.random.default_rng(11)
    cases = {f"batch_{batch}": rng.random((batch, 12, 6), dtype=np.float32) for batch in (1, 3)}
    got = run_exported(tmp_path, RUN, cases)

    import tensorflow as tf

    namespace: dict[str, object] = {}
    exec(compile(FUNCTIONS.replace("@tfcheck.aot(", "dict("), "ocr.py", "exec"), namespace)  # noqa: S102 - the test's own code
    for key, value in cases.items():
        np.testing.assert_array_equal(got[key], namespace["decode"](tf.constant(value)).numpy(), err_msg=key)
