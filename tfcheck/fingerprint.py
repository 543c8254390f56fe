"""Fingerprints that tell whether a compiled artifact still matches the live tf.function.

The build writes both fingerprints into the manifest (in its tracing child process); dispatch
recomputes them in the serving process and falls back to TensorFlow when either differs, so an
artifact is never run after the function's source or its captured variable values changed.

Both functions take TensorFlow objects but this module imports nothing heavy: it is imported by
`tfcheck.aot` dispatch, which must stay cheap, and it works on the objects it is handed.
"""

from __future__ import annotations

import hashlib
import inspect
import marshal
import textwrap
from collections.abc import Iterable
from typing import Any


def source_fingerprint(tf_function: Any) -> str:
    """SHA-256 of the source text of the Python function behind `tf_function`.

    The source is dedented so that moving a function into a class or block does not count as a
    change. Functions without retrievable source (defined in a REPL or with `exec`) are
    fingerprinted by their compiled code object instead, which is stable for identical code.
    """
    function = _python_function(tf_function)
    try:
        text = textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        code = getattr(function, "__code__", None)
        if code is None:
            raise TypeError(
                f"cannot fingerprint {function!r}: it has neither source text nor a code object"
            ) from None
        return hashlib.sha256(b"code:" + marshal.dumps(code)).hexdigest()
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def captures_fingerprint(concrete_function: Any) -> str:
    """SHA-256 over the variables `concrete_function` captures: dtype, shape and value bytes.

    `concrete_function.variables` comes back in a different order for two traces of the same
    function, and Keras uniquifies variable names per model instance (`dense` vs `dense_1`), so
    neither order nor names are reproducible between the build process and a serving process.
    Each variable is therefore digested on its own (dtype, shape, bytes) and the sorted digests
    are hashed: any changed value changes the fingerprint, and a rebuilt identical model does not.
    """
    return values_fingerprint(variable.numpy() for variable in concrete_function.variables)


def values_fingerprint(values: Iterable[Any]) -> str:
    """Order-independent SHA-256 over NumPy-like arrays (see `captures_fingerprint` for why)."""
    digests = sorted(_array_digest(value) for value in values)
    total = hashlib.sha256()
    for digest in digests:
        total.update(digest)
    return total.hexdigest()


def _array_digest(value: Any) -> bytes:
    """Digest of one array's dtype, shape and C-ordered bytes."""
    digest = hashlib.sha256()
    digest.update(str(value.dtype).encode("ascii"))
    digest.update(repr(tuple(value.shape)).encode("ascii"))
    digest.update(value.tobytes(order="C"))
    return digest.digest()


def _python_function(tf_function: Any) -> Any:
    """The plain Python callable behind a tf.function (or a tfcheck.aot wrapper of one)."""
    function = getattr(tf_function, "tf_function", tf_function)
    function = getattr(function, "python_function", function)
    function = inspect.unwrap(function)
    if not inspect.isroutine(function) and callable(function):
        # tf.function(some_callable_object): the code that runs is its class's __call__.
        function = type(function).__call__
    return function
