"""The one place in `tfcheck.runtime` that touches TensorFlow: dispatch from inside a tf.function.

The runtime runs artifacts without TensorFlow (`tfcheck.load`, `tfcheck run`), and a test
(`tests/test_walls.py`) refuses a TensorFlow import anywhere else in `tfcheck/runtime/`. Dispatch
(`@tfcheck.aot`, `runtime/dispatch.py`) is the exception: its caller holds a tf.function, so
TensorFlow is already loaded, and two things need it there: the outputs go back as TensorFlow
tensors (callers see the same types whichever backend ran), and the captured variables are
compared with the values the artifact was built with. TensorFlow is imported inside the functions,
never at module level, so `import tfcheck.aot` stays cheap.
"""

from __future__ import annotations

import threading
from typing import Any

from tfcheck.fingerprint import values_fingerprint
from tfcheck.runtime.manifest import Manifest


def to_tensorflow(structure: Any, outputs: list[Any]) -> Any:
    """An artifact's outputs (in flattening order) as TensorFlow tensors nested like
    `structure`, the tf.function's own result: its dicts, tuples and namedtuple classes."""
    import tensorflow as tf

    return tf.nest.pack_sequence_as(structure, [tf.convert_to_tensor(value) for value in outputs])


class CapturesGuard:
    """Tells whether the captured variables still hold the values the artifact was built with
    (and keeps the traced function's output structure, which dispatch returns).

    The first check hashes them as the build did. Hashing on every call would cost more than
    the model, so after a match the values are copied into shadow variables, and later checks
    compare variables and shadows bit for bit in one TensorFlow call that returns one boolean;
    only a difference leads to hashing again. That call still costs TensorFlow's per-captured-
    input overhead (for MobileNetV2's 262 variables, about as much as a TensorFlow call of the
    model), so `TFCHECK_AOT_VERIFY=first-call` lets a serving process that never changes its
    weights after the first call skip it.
    """

    def __init__(self, tf_function: Any, manifest: Manifest) -> None:
        import tensorflow as tf

        specs = [tf.TensorSpec(spec.shape, tf.as_dtype(spec.dtype)) for spec in manifest.inputs]
        if tf_function.input_signature is not None:
            specs = tf.nest.pack_sequence_as(list(tf_function.input_signature), specs)
        concrete = tf_function.get_concrete_function(*specs)
        self.structured_outputs = concrete.structured_outputs  # what dispatch returns, nested so
        self._variables = list(concrete.variables)
        self._shadows = [tf.Variable(tf.zeros_like(variable), trainable=False)
                         for variable in self._variables]
        pairs = list(zip(self._variables, self._shadows))
        # Traced here, once, into a concrete function: calling a tf.function from several threads
        # before its first trace finishes traces it once per thread, and TensorFlow counts every
        # guard's traces against the same lambda, which logs its "excessive retracing" warning.
        self._same = tf.function(lambda: tf.reduce_all(
            [tf.reduce_all(tf.equal(_bits(tf, v), _bits(tf, s))) for v, s in pairs])).get_concrete_function()
        self._expected = manifest.captures_fingerprint
        self._verified = False
        self.ever_matched = False  # the values matched the build's at least once in this process
        self._lock = threading.Lock()

    def unchanged(self, trust_first_match: bool) -> bool:
        """Whether the values are the build's; `trust_first_match` (`TFCHECK_AOT_VERIFY=first-call`)
        skips the comparison once they have matched."""
        if not self._variables:
            return values_fingerprint([]) == self._expected
        if self._verified and (trust_first_match or bool(self._same())):
            return True
        with self._lock:
            values = [variable.numpy() for variable in self._variables]
            if values_fingerprint(values) != self._expected:
                self._verified = False
                return False
            for shadow, value in zip(self._shadows, values):
                shadow.assign(value)
            self._verified = True  # only after the shadows hold values that matched
            self.ever_matched = True
            return True


def _bits(tf: Any, tensor: Any) -> Any:
    """Floats as same-width integers, so that NaN equals NaN and -0.0 differs from 0.0."""
    widths = {2: tf.int16, 4: tf.int32, 8: tf.int64}
    if tensor.dtype.is_floating and tensor.dtype.size in widths:
        return tf.bitcast(tensor, widths[tensor.dtype.size])
    return tensor
