"""Qualified names: what `tf.function`, `np.random.rand` or `keras.Model` refer to, in one spelling.

Users import TensorFlow in many ways (`tensorflow.compat.v2`, `tf.keras`, `tf_keras`, the internal
`def_function` module, ...). Canonicalising every resolved name here means rules compare against
one spelling and never learn the aliases themselves.
"""

from __future__ import annotations

import builtins

BUILTIN_NAMES = frozenset(dir(builtins))

# Longest prefix first. Each maps an alternative spelling onto the public one.
_PREFIX_ALIASES: tuple[tuple[str, str], ...] = (
    ("tensorflow.python.eager.polymorphic_function.polymorphic_function.", "tensorflow."),
    ("tensorflow.python.eager.def_function.", "tensorflow."),
    ("tensorflow.python.ops.script_ops.", "tensorflow."),
    ("tensorflow.python.ops.control_flow_ops.", "tensorflow."),
    ("tensorflow.python.ops.while_loop.", "tensorflow."),
    ("tensorflow.python.ops.cond.", "tensorflow."),
    ("tensorflow.python.ops.map_fn.", "tensorflow."),
    ("tensorflow.python.data.ops.dataset_ops.", "tensorflow.data."),
    ("tensorflow.compat.v2.", "tensorflow."),
    ("tensorflow.compat.v1.", "tensorflow."),
    ("tensorflow.keras.", "keras."),
    ("tf_keras.", "keras."),
    ("keras.src.", "keras."),
    ("keras.api.", "keras."),
    ("tensorflow.random.experimental.", "tensorflow.random."),
)
_EXACT_ALIASES = {
    "tensorflow.compat.v2": "tensorflow",
    "tensorflow.compat.v1": "tensorflow",
    "tensorflow.keras": "keras",
    "tf_keras": "keras",
    "tensorflow.py_func": "tensorflow.numpy_function",
    "tensorflow.data.Dataset.from_tensor_slices": "tensorflow.data.Dataset.from_tensor_slices",
}

TF_FUNCTION = "tensorflow.function"


def canonical(name: str) -> str:
    """Map an import spelling onto the canonical dotted name."""
    name = _EXACT_ALIASES.get(name, name)
    for prefix, replacement in _PREFIX_ALIASES:
        if name.startswith(prefix):
            name = replacement + name[len(prefix):]
            break
    return _EXACT_ALIASES.get(name, name)


def is_tf_name(qualified: str | None, *names: str) -> bool:
    """True when `qualified` is `tensorflow.<one of names>`."""
    return qualified is not None and qualified.startswith("tensorflow.") and qualified[11:] in names
