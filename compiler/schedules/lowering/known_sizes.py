"""Symbolic sizes known not to be negative: a kernel's body reads ``max(size, 0)`` bound to a name.

TVM's lowering sizes each tile's accumulator from the region the tile touches
(``CompactBufferAllocation``), starting it at ``max(0, start)`` unless its analyzer proves the start
non-negative. Nothing tells the analyzer that a symbolic size is: where a kernel's buffers use the
size ``w`` only inside expressions (``w // 2``: an image of any size after a pooling), a tile start
such as ``tile % ((w + 6) // 8) * 4`` may be negative for all it knows. The accumulators' indices
then stayed computed at run time, and LLVM kept the register tile in memory: a 3x3 convolution of
256 channels at 64x64 after a pooling took 45-68 ms, against 16-19 ms in the static build, and AdaIN
for images of any size ran 2-3x slower than at a fixed size (docs/schedules.md, "Images of any size").
The analyzer does learn from ``Bind`` statements: ``w_size = max(w, 0)``, used in place of ``w`` in
the body, is what it needs, at the cost of one ``max`` per call.
"""

from __future__ import annotations

import tvm_ffi
from tvm import s_tir, tirx

from tfcheck.compiler.schedules import blocks


def bind_sizes(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """``func`` with each symbolic size of its parameters' shapes read through a non-negative binding.

    Only the statements of the root block change: the buffers keep their shapes (the parameters'
    are the caller's), so only what the body computes learns that the sizes are not negative.
    """
    root = func.body
    sizes = sorted(blocks.shape_vars(func), key=lambda var: var.name)
    if not sizes or not isinstance(root, s_tir.SBlockRealize):
        return func
    bound = {size: tirx.Var(f"{size.name}_size", str(size.ty)) for size in sizes}
    body = tvm_ffi.structural_map(root.block.body, (tirx.Var, lambda var: bound.get(var, var)))
    binds = [tirx.Bind(bound[size], tirx.Max(size, tirx.IntImm(str(size.ty), 0))) for size in sizes]
    return func.with_body(blocks.rebuilt(root, tirx.SeqStmt([*binds, body])))
