"""tfcheck: find tf.function pitfalls statically, and compile annotated tf.functions ahead of time.

`import tfcheck` must stay cheap: production processes import it to load artifacts, and the linter
imports it on every pre-commit run. Heavy pieces are imported on first use through __getattr__.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "aot": ("tfcheck.aot", "aot"),
    "load": ("tfcheck.runtime", "load"),
}


def __getattr__(name: str) -> Any:
    """Import `tfcheck.aot` and `tfcheck.load` only when they are used."""
    if name not in _LAZY:
        raise AttributeError(f"module 'tfcheck' has no attribute {name!r}")
    import importlib

    module_name, attr = _LAZY[name]
    value = getattr(importlib.import_module(module_name), attr)
    globals()[name] = value
    return value
