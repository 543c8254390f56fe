"""The code-size budget of one kernel: how much code a schedule may ask LLVM to generate.

A schedule that unrolls and vectorises loops multiplies the code LLVM has to optimise by the
product of their extents. Left unchecked, one kernel can take the whole build down with it: before
the contraction rule stopped fusing broadcasts into its epilogue, EfficientNetB0's first
squeeze-and-excitation kernel asked for 25,088 unrolled copies of a sigmoid and LLVM ran past
20 minutes and 7 GB on it. The budget is on an estimate of the code, made on the scheduled TIR
before any lowering, not on wall-clock time: a time limit would make the generated library depend
on how busy the build machine was, and the cache key promises the same library for the same input.

The estimate is the number of TIR nodes (statements and expression nodes) LLVM would see once
every unrolled loop is copied out and every vectorised loop is cut into native vectors: a body
under ``T.unroll(4)`` and ``T.vectorized(32)`` with 16 lanes counts 4 x 2 times. Loops that stay
loops (serial, parallel) count once. Measured on this machine's LLVM (docs/schedules.md), a
kernel of about 400k such nodes took 6 s to compile and one of 1.4M took 42 s; the largest kernels
of the project's benchmark models are under 100k.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import tirx

# Estimated nodes after unrolling above which a schedule is refused for a simpler one.
CODE_SIZE_BUDGET = 100_000

# Fields that hold no generated code: source locations, types, and a block's signature (its
# iterators, regions and buffers), which describe the block rather than compute anything.
_SKIPPED_FIELDS = frozenset({"span", "ty", "iter_vars", "reads", "writes", "alloc_buffers", "match_buffers",
                             "annotations", "buffer", "name_hint", "dtype"})


def _fields(node: Any) -> list[Any]:
    """The values of ``node``'s reflected fields that may hold code (statements or expressions)."""
    values = []
    info = type(node).__tvm_ffi_type_info__
    while info is not None:
        values.extend(getattr(node, field.name) for field in info.fields if field.name not in _SKIPPED_FIELDS)
        info = info.parent_type_info
    return values


def _children(node: Any) -> list[Any]:
    """The statements and expressions directly under ``node``, arrays flattened."""
    children = []
    for value in _fields(node):
        items = value if isinstance(value, (tvm.ir.Array, list, tuple)) else [value]
        children.extend(item for item in items if isinstance(item, (tirx.Stmt, tvm.ir.Expr)))
    return children


class _Estimator:
    """Walks one function once; shared expression subtrees are sized once (memoised by handle)."""

    def __init__(self, lanes: int) -> None:
        self._lanes = lanes
        self._sizes: dict[int, int] = {}

    def tree_size(self, node: Any) -> int:
        """Nodes of ``node`` as a tree (as code generation walks it): shared subtrees count each time."""
        key = node.__chandle__()
        if key not in self._sizes:
            self._sizes[key] = 1 + sum(self.tree_size(child) for child in _children(node))
        return self._sizes[key]

    def unrolled_size(self, node: Any, copies: int) -> int:
        """Nodes of a statement emitted ``copies`` times, its unrolled and vectorised loops expanded."""
        if isinstance(node, tvm.ir.Expr):
            return copies * self.tree_size(node)
        if isinstance(node, tirx.For):
            copies *= self._copies(node)
        return copies + sum(self.unrolled_size(child, copies) for child in _children(node))

    def _copies(self, loop: tirx.For) -> int:
        """How many times code generation emits the body of ``loop``."""
        extent = int(loop.extent.value) if isinstance(loop.extent, tirx.IntImm) else 1
        if loop.kind == tirx.ForKind.UNROLLED:
            return extent
        if loop.kind == tirx.ForKind.VECTORIZED:
            return -(-extent // self._lanes)
        return 1


def code_size(func: tirx.PrimFunc, lanes: int) -> int:
    """Estimated TIR nodes LLVM sees for ``func``: unrolled loops copied out, vectorised loops
    counted once per native vector of ``lanes`` elements."""
    return _Estimator(lanes).unrolled_size(func.body, 1)
