"""`tf.image.extract_patches` as ops TFLite has builtins for, in the frozen graph before conversion.

TFLite has no builtin for TensorFlow's `ExtractImagePatches` (a vision transformer's patch
embedding: `tf.image.extract_patches(images, sizes=[1, p, p, 1], strides=[1, p, p, 1], ...)`),
so with builtins only the conversion fails. The op is a composition of ones it has:

- non-overlapping patches (strides equal to the sizes, rates 1, 'VALID') of an image of known
  height, width and channels are blocks of the image laid side by side:

      [N, H, W, C] -crop-> [N, R*kh, Q*kw, C] -reshape-> [N*R, kh, Q, kw*C]
        -transpose (0, 2, 1, 3)-> [N*R, Q, kh, kw*C] -reshape-> [N, R, Q, kh*kw*C]

  (R = H // kh and Q = W // kw patches; the crop, which 'VALID' implies, only where they do not
  divide), exact for any dtype;
- any other float32 patches of an image with a known number of channels are a convolution with
  the patches' strides, rates (as dilations) and padding, whose kernel `[kh, kw, C, kh*kw*C]` is
  the identity: output channel `(i*kw + j)*C + c` reads row `i`, column `j`, channel `c` of the
  window, extract_patches' own order (checked against TensorFlow for 'SAME' and 'VALID', strides
  and rates of 1 to 3; each output is one input times 1 plus zeros, so exact for finite inputs).

The node keeps its name (its consumers read the last reshape, or the convolution); the batch may
be unknown (the reshapes say -1), and so may the height and width on the convolution's route. Any
other form (an unknown number of channels; overlapping patches of an integer image) is left as
it was, and the conversion's error names the op with `LIMITS`' advice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tfcheck.compiler.trace.graph_nodes import INT32, NodeMaker, become, reshape_attrs, with_rewrites

_OP = "ExtractImagePatches"
_FLOAT32 = 1  # DataType DT_FLOAT (tensorflow/core/framework/types.proto)

# What the rewrite takes, for the conversion's error when it could not take a node.
LIMITS = {
    _OP: ("tfcheck rewrites tf.image.extract_patches into TFLite builtins for float32 images whose number of "
          "channels the input_signature fixes, and for non-overlapping patches (strides equal to sizes, rates 1, "
          "padding 'VALID') of any dtype whose height, width and channels it fixes: give the channels a size in "
          "the input_signature, or cast the images first (tf.image.extract_patches(tf.cast(images, tf.float32), "
          "...))"),
}


@dataclass(frozen=True)
class _Patches:
    """One ExtractImagePatches node as the rewrite reads it: window, strides and rates over
    (height, width), its padding, its dtype and its input's [N, H, W, C] (None where unknown)."""

    sizes: tuple[int, int]
    strides: tuple[int, int]
    rates: tuple[int, int]
    padding: bytes
    dtype: int
    shape: tuple[int | None, ...]

    @property
    def as_blocks(self) -> bool:
        """Whether the patches are non-overlapping blocks of an image of known size, at least one
        patch a side (the reshape route of the module docstring)."""
        _, height, width, _ = self.shape
        return (self.strides == self.sizes and self.rates == (1, 1) and self.padding == b"VALID"
                and height is not None and width is not None
                and height >= self.sizes[0] and width >= self.sizes[1])


def patches_as_builtins(graph_def: Any, graph: Any) -> Any:
    """A copy of `graph_def` (the GraphDef of `graph`) with each ExtractImagePatches node it can
    rewrite (see the module) replaced by builtin ops; `graph_def` itself when it has none."""
    found = {index: patches for index, node in enumerate(graph_def.node)
             if node.op == _OP and (patches := _patches(node, graph)) is not None}
    return with_rewrites(graph_def, found, _rewrite)


def _patches(node: Any, graph: Any) -> _Patches | None:
    """The node as `_Patches`, or None unless one of the module's routes takes it."""
    shape = graph.get_operation_by_name(node.name).inputs[0].shape
    if shape.rank != 4 or shape[3] is None:
        return None

    def pair(name: str) -> tuple[int, int]:
        values = list(node.attr[name].list.i)
        return values[1], values[2]

    patches = _Patches(pair("ksizes"), pair("strides"), pair("rates"), node.attr["padding"].s,
                       node.attr["T"].type, tuple(shape.as_list()))
    return patches if patches.as_blocks or patches.dtype == _FLOAT32 else None


def _rewrite(graph_def: Any, node: Any, patches: _Patches, taken: set[str]) -> None:
    nodes = NodeMaker(graph_def, f"{node.name}/patches", taken)
    if patches.as_blocks:
        _as_blocks(nodes, node, patches)
    else:
        _as_convolution(nodes, node, patches)


def _as_blocks(nodes: NodeMaker, node: Any, patches: _Patches) -> None:
    """Turn `node` into the last reshape of the blocks' chain (the module docstring)."""
    (rows_in, columns_in), (_, height, width, channels) = patches.sizes, patches.shape
    rows, columns = height // rows_in, width // columns_in
    source = node.input[0]
    if (rows * rows_in, columns * columns_in) != (height, width):
        source = _cropped(nodes, source, [rows * rows_in, columns * columns_in], patches.dtype)
    blocks = nodes.reshape("blocks", source, [-1, rows_in, columns, columns_in * channels], patches.dtype)
    moved = nodes.add("side_by_side", "Transpose", [blocks, nodes.constant("order", np.array([0, 2, 1, 3], np.int32))])
    moved.attr["T"].type, moved.attr["Tperm"].type = patches.dtype, INT32
    shape = nodes.constant("shape", np.array([-1, rows, columns, rows_in * columns_in * channels], np.int32))
    become(node, "Reshape", [moved.name, shape])
    reshape_attrs(node, patches.dtype)


def _cropped(nodes: NodeMaker, source: str, size: list[int], dtype: int) -> str:
    """`source[:, :size[0], :size[1], :]`: the rows and columns that whole patches cover."""
    begin, end = np.zeros(4, np.int32), np.array([0, *size, 0], np.int32)
    crop = nodes.add("whole_patches", "StridedSlice", [
        source, nodes.constant("begin", begin), nodes.constant("end", end), nodes.constant("step", np.ones(4, np.int32))])
    crop.attr["T"].type, crop.attr["Index"].type = dtype, INT32
    crop.attr["end_mask"].i = 0b1001  # all of the batch and the channels
    for mask in ("begin_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"):
        crop.attr[mask].i = 0
    return crop.name


def _as_convolution(nodes: NodeMaker, node: Any, patches: _Patches) -> None:
    """Turn `node` into the convolution with the identity kernel (the module docstring)."""
    (rows_in, columns_in), channels = patches.sizes, patches.shape[3]
    depth = rows_in * columns_in * channels
    kernel = np.eye(depth, dtype=np.float32).reshape(rows_in, columns_in, channels, depth)
    become(node, "Conv2D", [node.input[0], nodes.constant("one_hot", kernel)])
    node.attr["T"].type, node.attr["padding"].s, node.attr["data_format"].s = _FLOAT32, patches.padding, b"NHWC"
    node.attr["strides"].list.i.extend([1, *patches.strides, 1])
    node.attr["dilations"].list.i.extend([1, *patches.rates, 1])
