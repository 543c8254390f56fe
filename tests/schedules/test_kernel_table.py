"""`kernel_table`: what the build records of each kernel for `tfcheck bench --profile`."""

from __future__ import annotations

from tvm import relax

from tfcheck.compiler.schedules import apply_default_schedules, kernel_table

from ..isa import named_target
from .test_operators import module, rand


def test_each_kernel_has_its_rule_buffers_and_multiply_adds() -> None:
    """A 3x3 convolution's multiply-adds are its output times its window (a block keeps its domain
    however it was tiled); a max pooling has none to count."""
    w = rand(3, 3, 8, 16)

    def emit(bb, x):
        y = bb.emit(relax.op.nn.conv2d(x, relax.const(w), padding=1, data_layout="NHWC", kernel_layout="HWIO"))
        return relax.op.nn.max_pool2d(y, 2, 2, layout="NHWC")

    table = kernel_table(apply_default_schedules(module([(1, 12, 12, 8)], emit), named_target("znver3")))
    by_kind = {("conv2d" if "conv2d" in entry["kernel"] else "pool"): entry for entry in table}
    assert by_kind["conv2d"]["rule"] == "schedule_contraction"
    assert by_kind["conv2d"]["multiply_adds"] == 12 * 12 * 16 * 3 * 3 * 8
    assert by_kind["conv2d"]["buffers"].split()[0] == "1x12x12x8"
    assert by_kind["pool"]["multiply_adds"] is None and by_kind["pool"]["rule"] == "schedule_contraction"


def test_a_kernel_whose_outermost_block_is_not_root_is_listed() -> None:
    """TOPI's non-max suppression names its outermost block `get_valid_counts`: the table (written by
    every CPU build) must list it, not fail the build (the coverage sweep's NMS did, at f1fcef5)."""
    def emit(bb, x):
        return bb.emit(relax.op.vision.get_valid_counts(x, score_threshold=0.0))[0]

    table = kernel_table(apply_default_schedules(module([(1, 50, 4)], emit), named_target("znver3")))
    assert any("valid_counts" in entry["kernel"] for entry in table)
