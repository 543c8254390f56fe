"""The compiled `main`'s large constants as parameters, saved to the artifact's weights file.

Exporting a Relax executable serializes its constants into the library: TVM packs them into one
blob, makes an LLVM constant array of it and emits an object file (a 256 MB constant: +1.0 GB over
the executable's own copy to pack it, +0.25 GB to emit it; VGG16's compile child peaked at 3.0 GB
for 528 MB of weights there: docs/build.md, "The weights file"). For a function built with its weights as
inputs, `lift_constants` runs once every pass that reads a constant's value (binding, folding and
packing the weights: `importer.bind_weights`, `schedules.fold_packed_weights`) has run: each
constant of at least `MIN_BYTES` becomes a parameter of `main` after the user's inputs, its value
kept aside for `save_constants`, and the library holds only code. The runtime passes the same
tensors to every call (`tfcheck/runtime/weights.py`, `tvm_backend.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import tvm
from tvm import relax

from tfcheck.compiler.process.weights_file import save_weights

# Constants below this stay in the library (scalars, shapes, small biases): they cost the export
# nothing worth a parameter.
MIN_BYTES = 4096
# The name of `main`'s parameter that takes constant <i> (for reading the compiled module; the
# runtime passes them by position).
CONSTANT_PARAM = "tfcheck_constant_"


class LiftedConstants(NamedTuple):
    """`main` taking its large constants after the user's inputs, and their values in that order."""

    mod: tvm.IRModule
    values: list[Any]  # tvm.runtime.Tensor


@relax.expr_functor.mutator
class _ConstantsToParams(relax.PyExprMutator):  # type: ignore[misc]
    """Each large constant of a function replaced by a new parameter (one per distinct constant)."""

    def __init__(self, mod: tvm.IRModule, min_bytes: int) -> None:
        super().__init__(mod)
        self.min_bytes = min_bytes
        self.params: list[relax.Var] = []
        self.values: list[Any] = []
        self._by_constant: dict[Any, relax.Var] = {}

    def visit_generic_const_(self, op: relax.Expr) -> relax.Expr:  # TVM's visitor of tensor constants
        value = op.value
        if not isinstance(value, tvm.runtime.Tensor) or _nbytes(value) < self.min_bytes:
            return op  # a PrimValue, or small
        param = self._by_constant.get(op)
        if param is None:
            param = relax.Var(f"{CONSTANT_PARAM}{len(self.params)}", op.ty)
            self._by_constant[op] = param
            self.params.append(param)
            self.values.append(value)
        return param


def _nbytes(data: Any) -> int:
    """A runtime tensor's size in bytes, from its shape and dtype (no copy to NumPy); 0 for a dtype
    that is not one of NumPy's own (bfloat16, float8: the runtime reads the file with NumPy alone)."""
    dtype = np.dtype(str(data.dtype))
    if dtype.kind not in "biuf":
        return 0
    return int(np.prod(data.shape, dtype=np.int64)) * dtype.itemsize


def lift_constants(mod: tvm.IRModule, min_bytes: int = MIN_BYTES) -> LiftedConstants:
    """`mod` with `main`'s constants of at least `min_bytes` as its last parameters."""
    main = mod["main"]
    mutator = _ConstantsToParams(mod, min_bytes)
    body = mutator.visit_expr(main).body
    if not mutator.params:
        return LiftedConstants(mod, [])
    lifted = relax.Function(list(main.params) + mutator.params, body, main.ret_ty, main.is_pure, main.attrs,
                            main.span)
    # `num_input`: the parameters a caller gives per call; the rest are weights (as after `bind_weights`).
    lifted = lifted.with_attr("num_input", len(main.params))
    updated = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    updated[mod.get_global_var("main")] = lifted
    return LiftedConstants(updated, mutator.values)


def save_constants(values: list[Any], path: Path) -> int:
    """Write the lifted values to `path` (the artifact's weights file); the count written. Each is
    read in place through DLPack (`.numpy()` would copy it: VGG16's largest is 411 MB)."""
    return save_weights((np.from_dlpack(value) for value in values), path)
