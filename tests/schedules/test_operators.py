"""The default schedules compute what NumPy computes, for shapes that stress the tiling.

Each case builds a small Relax module the way the TFLite importer writes it (NHWC activations,
HWIO kernels, depthwise kernels as (KH, KW, C, multiplier) with groups = C, constant weights),
runs ``apply_default_schedules`` on it, compiles it and compares with a NumPy reference. Shapes
are chosen so that extents are odd, prime, or not multiples of the vector width, batches are 1
and more, and strides, padding and dilation vary. The rule that scheduled each function is checked
too, so a case cannot pass by silently falling back.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import relax, s_tir, sym, tirx

from tfcheck.compiler.schedules import apply_default_schedules, blocks, compile_cpu
from tfcheck.compiler.schedules import cpu
from tfcheck.compiler.schedules.apply import RULE_ATTR
from tfcheck.compiler.schedules.rewrites.channel_padding import MIN_VECTORS, pad_output_channels, padded_channels
from tfcheck.compiler.schedules.rules.contraction import PARALLEL_MIN_WORK
from tfcheck.compiler.schedules.lowering.over_cores import version_parallel_loops

from ..isa import host_target, named_target, skip_unless_runnable
from . import reference

RNG = np.random.default_rng(0)
TARGET = host_target()
# Two cores whatever the host has, for the tests of which kernels run in parallel.
TWO_CORES = host_target(**{"num-cores": 2})

Emit = Callable[[relax.BlockBuilder, relax.Var], relax.Expr]


def rand(*shape: int) -> np.ndarray:
    """Standard-normal float32 data."""
    return RNG.standard_normal(shape).astype("float32")


def module(input_shapes: list[tuple[int, ...]], emit: Callable[..., relax.Expr]) -> tvm.IRModule:
    """A Relax module whose ``main`` takes float32 inputs of ``input_shapes`` and returns ``emit(bb, *inputs)``."""
    bb = relax.BlockBuilder()
    params = [relax.Var(f"x{i}", relax.TensorType(shape, "float32")) for i, shape in enumerate(input_shapes)]
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(emit(bb, *params))
        bb.emit_func_output(out)
    return bb.get()


def run(mod: tvm.IRModule, *inputs: np.ndarray, target: tvm.target.Target = TARGET) -> tuple[np.ndarray, list[str]]:
    """Schedule, compile and run ``mod``; return its output and the rules that scheduled its functions.
    Skips the test where this CPU cannot run code built for ``target``."""
    skip_unless_runnable(target)
    scheduled = apply_default_schedules(mod, target)
    rules = sorted(
        str(func.attrs[RULE_ATTR])
        for _, func in scheduled.functions_items()
        if isinstance(func, tirx.PrimFunc) and func.attrs and RULE_ATTR in func.attrs
    )
    vm = relax.VirtualMachine(tvm.compile(scheduled, target=target), tvm.cpu())
    return vm["main"](*[tvm.runtime.tensor(x) for x in inputs]).numpy(), rules


def check(actual: np.ndarray, expected: np.ndarray) -> None:
    """Float32 agreement, scaled to the size of the values."""
    np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(expected).max())))


@pytest.mark.parametrize(
    ("m", "k", "n"),
    [(32, 256, 512), (1, 2048, 1000), (7, 33, 10), (5, 17, 19), (64, 64, 48), (3, 100, 1)],
)
def test_dense_bias_relu(m: int, k: int, n: int) -> None:
    x, w, b = rand(m, k), rand(k, n), rand(n)

    def emit(bb, x_var):
        y = bb.emit(relax.op.matmul(x_var, relax.const(w)))
        return bb.emit(relax.op.nn.relu(bb.emit(relax.op.add(y, relax.const(b)))))

    actual, rules = run(module([x.shape], emit), x)
    check(actual, np.maximum(x @ w + b, 0))
    assert "schedule_contraction" in rules


@pytest.mark.parametrize(("batch", "m", "k", "n"), [(4, 128, 64, 128), (3, 9, 31, 7), (1, 1, 16, 33)])
def test_batch_matmul_of_two_activations(batch: int, m: int, k: int, n: int) -> None:
    a, b = rand(batch, m, k), rand(batch, k, n)
    actual, rules = run(module([a.shape, b.shape], lambda bb, x, y: relax.op.matmul(x, y)), a, b)
    check(actual, a @ b)
    assert rules == ["schedule_contraction"]


CONV_CASES = [
    # (input NHWC, kernel (KH, KW), out channels, strides, pads (top, left, bottom, right), dilation)
    ((1, 16, 16, 3), (3, 3), 32, (2, 2), (0, 0, 1, 1), (1, 1)),  # MobileNet stem: odd input channels
    ((8, 12, 12, 32), (3, 3), 64, (1, 1), (1, 1, 1, 1), (1, 1)),  # batch 8, 'same'
    ((1, 7, 7, 48), (1, 1), 20, (1, 1), (0, 0, 0, 0), (1, 1)),  # 1x1, prime spatial, 20 outputs
    ((1, 14, 14, 64), (1, 1), 128, (2, 2), (0, 0, 0, 0), (1, 1)),  # ResNet's 1x1 stride-2 shortcut
    ((2, 11, 13, 5), (3, 2), 17, (1, 2), (1, 0, 1, 1), (1, 1)),  # odd everything, asymmetric
    ((1, 15, 15, 8), (3, 3), 16, (1, 1), (2, 2, 2, 2), (2, 2)),  # dilation 2
    ((1, 9, 9, 4), (5, 5), 10, (3, 3), (2, 2, 2, 2), (1, 1)),  # stride 3, 5x5
]


def conv_case(shape, kernel, out, strides, pads, dilation) -> tuple[tvm.IRModule, np.ndarray, np.ndarray]:
    """A conv2d + bias + relu6 module as the importer writes it, an input, and NumPy's output."""
    x, w, b = rand(*shape), rand(*kernel, shape[-1], out), rand(out)

    def emit(bb, x_var):
        y = bb.emit(
            relax.op.nn.conv2d(
                x_var, relax.const(w), strides, pads, dilation, data_layout="NHWC", kernel_layout="HWIO"
            )
        )
        return relax.op.clip(bb.emit(relax.op.add(y, relax.const(b))), 0.0, 6.0)

    return module([shape], emit), x, np.clip(reference.conv2d_nhwc(x, w, strides, pads, dilation) + b, 0, 6)


@pytest.mark.parametrize(("shape", "kernel", "out", "strides", "pads", "dilation"), CONV_CASES)
def test_conv2d_nhwc_bias_relu6(shape, kernel, out, strides, pads, dilation) -> None:
    mod, x, expected = conv_case(shape, kernel, out, strides, pads, dilation)
    actual, rules = run(mod, x)
    check(actual, expected)
    assert "schedule_contraction" in rules


@pytest.mark.parametrize(("pads", "strides"), [((0, 0, 0, 0), (1, 1)), ((1, 1, 1, 1), (1, 1)), ((0, 0, 1, 1), (2, 2))])
def test_a_convolution_reads_its_padding_in_place(pads, strides) -> None:
    """With AVX-512's 32 registers a pad by nothing, and since issue 17 a real padding too, is read
    in place (a bound check in the micro-kernel), not a padded copy of the input written on every
    call (MobileNetV2's first convolution: 157 -> 86 us)."""
    mod, x, expected = conv_case((1, 9, 9, 16), (3, 3), 32, strides, pads, (1, 1))
    assert "pad_temp" not in _top_level_blocks(apply_default_schedules(mod, named_target("znver4")))
    check(run(mod, x)[0], expected)


@pytest.mark.usefixtures("direct_convolutions")
@pytest.mark.parametrize(("shape", "kernel", "out", "strides", "pads", "copied"), [
    ((1, 35, 35, 48), (5, 5), 64, (1, 1), (2, 2, 2, 2), True),  # InceptionV3's 5x5: 1600 per input element
    ((1, 17, 17, 64), (1, 7), 64, (1, 1), (0, 3, 0, 3), True),  # a 1x7 over its width: 448
    ((1, 224, 224, 3), (3, 3), 32, (2, 2), (0, 0, 1, 1), False),  # MobileNetV2's first: 72
    ((1, 9, 9, 16), (3, 3), 32, (2, 2), (0, 0, 1, 1), False),  # 72
])
def test_with_16_registers_a_padding_is_copied_where_each_input_element_is_used_often(
        shape, kernel, out, strides, pads, copied) -> None:
    """On a Zen 3 core the bound checks of a padding read in place cost more than a padded copy
    where each input element feeds `PADDED_COPY_MIN_REUSE` multiply-adds or more: InceptionV3's
    35x35x48 -> 64 5x5 convolution 63 against 95 GFLOP/s, ResNet's 7x7 stem 6.2 against 3.4 ms;
    MobileNetV2's first convolution, 72 per element, was faster in place (0.36 against 0.50 ms).
    Decided for the AVX2 target named, whatever the host; AVX-512 reads in place."""
    mod, x, expected = conv_case(shape, kernel, out, strides, pads, (1, 1))
    avx2 = named_target("znver3")
    assert ("pad_temp" in _top_level_blocks(apply_default_schedules(mod, avx2))) == copied
    assert "pad_temp" not in _top_level_blocks(apply_default_schedules(mod, named_target("znver4")))
    skip_unless_runnable(avx2)
    check(run(mod, x, target=avx2)[0], expected)


def _top_level_blocks(scheduled: tvm.IRModule) -> list[str]:
    """The names of the blocks directly under each scheduled function's root."""
    return [sch.get(block).name_hint for func in scheduled.functions.values() if isinstance(func, tirx.PrimFunc)
            for sch in [s_tir.Schedule(func)] for block in blocks.child_blocks(sch)]


DEPTHWISE_CASES = [
    # (input NHWC, kernel, multiplier, strides, pads, dilation)
    ((1, 28, 28, 192), (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1)),  # MobileNetV2 block
    ((1, 15, 15, 96), (3, 3), 1, (2, 2), (0, 0, 1, 1), (1, 1)),  # stride 2, TF 'same' padding
    ((2, 9, 9, 13), (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1)),  # 13 channels: not a vector multiple
    ((1, 10, 10, 8), (5, 5), 1, (1, 1), (4, 4, 4, 4), (2, 2)),  # dilation 2
    ((1, 8, 8, 6), (3, 3), 2, (1, 1), (1, 1, 1, 1), (1, 1)),  # channel multiplier 2
]


@pytest.mark.parametrize(("shape", "kernel", "mult", "strides", "pads", "dilation"), DEPTHWISE_CASES)
def test_depthwise_conv2d(shape, kernel, mult, strides, pads, dilation) -> None:
    channels = shape[-1]
    x, w, b = rand(*shape), rand(*kernel, channels, mult), rand(channels * mult)

    def emit(bb, x_var):
        y = bb.emit(
            relax.op.nn.conv2d(
                x_var,
                relax.const(w.reshape(*kernel, channels * mult, 1)),  # the importer's HWOI layout
                strides,
                pads,
                dilation,
                groups=channels,
                data_layout="NHWC",
                kernel_layout="HWOI",
            )
        )
        return relax.op.add(y, relax.const(b))

    actual, rules = run(module([shape], emit), x)
    check(actual, reference.depthwise_nhwc(x, w, strides, pads, dilation) + b)
    assert rules  # every function got some schedule (multiplier 2 may fall back)
    if mult == 1:
        assert "schedule_depthwise" in rules


@pytest.mark.parametrize(
    ("shape", "kernel", "strides", "pads", "kind"),
    [
        ((8, 32, 32, 32), (2, 2), (2, 2), (0, 0, 0, 0), "max"),
        ((1, 15, 15, 17), (3, 3), (2, 2), (1, 1, 1, 1), "max"),
        ((2, 7, 7, 24), (3, 3), (1, 1), (1, 1, 1, 1), "avg"),
        ((1, 13, 11, 40), (2, 3), (2, 1), (0, 1, 0, 1), "avg"),
    ],
)
def test_pooling(shape, kernel, strides, pads, kind) -> None:
    x = rand(*shape)
    op = relax.op.nn.max_pool2d if kind == "max" else relax.op.nn.avg_pool2d
    extra = {} if kind == "max" else {"count_include_pad": False}
    actual, rules = run(
        module([shape], lambda bb, v: op(v, kernel, strides, padding=pads, layout="NHWC", **extra)), x
    )
    check(actual, reference.pool_nhwc(x, kernel, strides, pads, kind))
    assert "schedule_contraction" in rules


@pytest.mark.parametrize("shape", [(8, 7, 7, 1280), (1, 5, 3, 19), (2, 1, 1, 64)])
def test_global_average_pool(shape) -> None:
    x = rand(*shape)
    actual, rules = run(module([shape], lambda bb, v: relax.op.mean(v, axis=[1, 2])), x)
    check(actual, x.mean(axis=(1, 2)))
    assert rules == ["schedule_contraction"]


@pytest.mark.parametrize("shape", [(1, 1000), (4, 128, 128), (3, 17)])
def test_softmax(shape) -> None:
    x = rand(*shape)
    actual, rules = run(module([shape], lambda bb, v: relax.op.nn.softmax(v, axis=-1)), x)
    check(actual, reference.softmax(x))
    assert rules == ["schedule_rows"]


@pytest.mark.parametrize("shape", [(1, 128, 256), (5, 33)])
def test_layer_norm(shape) -> None:
    x, gamma, beta = rand(*shape), rand(shape[-1]), rand(shape[-1])
    actual, _ = run(
        module([shape], lambda bb, v: relax.op.nn.layer_norm(v, relax.const(gamma), relax.const(beta), axes=[-1])), x
    )
    check(actual, reference.layer_norm(x, gamma, beta))


def test_elementwise_chain_large_enough_to_run_in_parallel() -> None:
    x, y = rand(2, 150, 150, 3), rand(2, 150, 150, 3)
    actual, rules = run(
        module([x.shape, y.shape], lambda bb, a, b: relax.op.sigmoid(relax.op.multiply(a, b))), x, y
    )
    check(actual, 1 / (1 + np.exp(-(x * y))))
    assert rules == ["schedule_fallback"]


def test_unrecognised_operator_still_compiles_correctly() -> None:
    """cumsum has a loop-carried scan no rule knows: it must keep working, unscheduled or by fallback."""
    x = rand(4, 37)
    actual, _ = run(module([x.shape], lambda bb, v: relax.op.cumsum(v, axis=1)), x)
    check(actual, np.cumsum(x, axis=1))


def test_imported_style_module_is_ready_for_plain_compile() -> None:
    """A fused matmul+relu keeps its schedule and packed weights through ``tvm.compile``'s own pipeline."""
    x, w = rand(16, 64), rand(64, 32)
    scheduled = apply_default_schedules(
        module([x.shape], lambda bb, v: relax.op.nn.relu(relax.op.matmul(v, relax.const(w)))), TARGET
    )
    prim_funcs = [f for _, f in scheduled.functions_items() if isinstance(f, tirx.PrimFunc)]
    assert len(prim_funcs) == 1 and prim_funcs[0].attrs[RULE_ATTR] == "schedule_contraction"
    # The constant weight was packed at build time into [N / cols, K, cols] strips.
    weight_shape = [int(d) for d in prim_funcs[0].params[1].shape]
    assert len(weight_shape) == 3 and weight_shape[1] == 64 and weight_shape[0] * weight_shape[2] == 32
    vm = relax.VirtualMachine(tvm.compile(scheduled, target=TARGET), tvm.cpu())
    check(vm["main"](tvm.runtime.tensor(x)).numpy(), np.maximum(x @ w, 0))


def test_a_weight_used_by_several_matmuls_is_packed_once() -> None:
    """An unrolled recurrent loop calls the same matmul with the same weight once per step
    (`compiler/frontend/loop_unroll.py`): the packed weight is folded once and shared, not once per call
    (50 packings took 8 s to fold for the benchmark LSTM)."""
    x, w = rand(8, 32), rand(32, 32)

    def emit(bb, v):
        for _ in range(3):
            v = bb.emit(relax.op.tanh(relax.op.matmul(v, relax.const(w))))
        return v

    scheduled = apply_default_schedules(module([x.shape], emit), TARGET)
    packed = set()
    relax.analysis.post_order_visit(scheduled["main"].body, lambda e: packed.add(e) if isinstance(
        e, tvm.ir.expr.Constant) and len(getattr(e.value, "shape", ())) == 3 else None)
    assert len(packed) == 1
    expected = x
    for _ in range(3):
        expected = np.tanh(expected @ w)
    vm = relax.VirtualMachine(tvm.compile(scheduled, target=TARGET), tvm.cpu())
    check(vm["main"](tvm.runtime.tensor(x)).numpy(), expected)


@pytest.mark.parametrize("residual", [False, True])
def test_output_channels_padded_to_whole_vectors(residual: bool) -> None:
    """A convolution whose output channels whole vectors do not divide (Xception's 728 with 16
    lanes) computes zero-padded extra channels on full-width vectors; the bias, activation and
    residual add read the real ones."""
    lanes = cpu.vector_lanes(TARGET, 32)
    channels = MIN_VECTORS * lanes + lanes // 2
    x, w, b = rand(1, 7, 7, 24), rand(1, 1, 24, channels), rand(channels)
    skip = rand(1, 7, 7, channels)

    def emit(bb, x_var):
        y = bb.emit(relax.op.nn.conv2d(x_var, relax.const(w), data_layout="NHWC", kernel_layout="HWIO"))
        y = bb.emit(relax.op.add(y, relax.const(b)))
        return relax.op.nn.relu(relax.op.add(y, relax.const(skip)) if residual else y)

    mod = module([x.shape], emit)
    wide = padded_channels(channels, lanes)
    assert wide == (MIN_VECTORS + 1) * lanes
    assert f"R.Tensor((1, 7, 7, {wide})" in pad_output_channels(mod, TARGET).script()
    expected = x.reshape(-1, 24) @ w.reshape(24, channels) + b + (skip.reshape(-1, channels) if residual else 0)
    check(run(mod, x)[0], np.maximum(expected, 0).reshape(1, 7, 7, channels))


@pytest.mark.parametrize("batch", [1, 32])
def test_narrow_dense_output_padded_to_one_vector(batch: int) -> None:
    """A dense layer of 10 outputs (a classifier's last layer), whose weights the importer passes
    through `permute_dims`, computes one full vector of columns from zero-padded weights instead
    of five 2-wide vectors with AVX-512; the bias and the result see only the real 10. With AVX2
    10 columns are more than one 8-wide vector, and a dense layer of one vector or more keeps its
    width (docs/schedules.md, "Narrow outputs"): whatever the host, the decision is the target's."""
    x, w, b = rand(batch, 64), rand(10, 64), rand(10)

    def emit(bb, x_var):
        weights = bb.emit(relax.op.permute_dims(relax.const(w), [1, 0]))
        return relax.op.add(bb.emit(relax.op.matmul(x_var, weights)), relax.const(b))

    mod = module([x.shape], emit)
    for mcpu, columns in (("znver4", 16), ("znver3", 10)):  # the columns the matmul computes
        script = pad_output_channels(mod, named_target(mcpu)).script()
        assert f"R.Tensor(({batch}, {columns}), dtype=\"float32\") = R.matmul(" in script
    actual, rules = run(mod, x)
    check(actual, x @ w.T + b)
    assert rules == ["schedule_contraction"]


@pytest.mark.parametrize(("shape", "computed"), [((197, 96), 198), ((1, 289, 96), 290), ((196, 96), 196)])
def test_a_dense_layer_over_rows_without_a_good_divisor_computes_a_few_more(shape: tuple[int, ...],
                                                                             computed: int) -> None:
    """ViT-B/16's 197 tokens are prime, so the register tiles that divide them are one row tall;
    with a zero row more, 198 are 33 tiles of 6 (AVX2) and the result is sliced back to the real
    rows, after the bias. 196 rows have tiles of 4 already (benchmarks/awkward_rows.py)."""
    x, w, b = rand(*shape), rand(96, 64), rand(64)

    def emit(bb, x_var):
        return relax.op.nn.relu(relax.op.add(bb.emit(relax.op.matmul(x_var, relax.const(w))), relax.const(b)))

    mod = module([x.shape], emit)
    for mcpu in ("znver3", "znver4"):
        script = pad_output_channels(mod, named_target(mcpu)).script()
        assert f"R.Tensor(({', '.join(map(str, (*shape[:-1][:-1], computed, 64)))}), dtype=\"float32\") = R.matmul(" \
            in script
    actual, rules = run(mod, x)
    check(actual, np.maximum(x @ w + b, 0))
    assert "schedule_contraction" in rules


def test_attentions_product_of_two_inputs_over_197_rows_computes_198() -> None:
    """`softmax(q k) v` in a ViT-B/16 block: neither operand is a constant, and the rows are the
    197 tokens; padding the left operand's rows needs no constant (benchmarks/vit_encoder.py)."""
    x, y = rand(2, 197, 16), rand(2, 16, 64)
    mod = module([x.shape, y.shape], lambda bb, x_var, y_var: relax.op.matmul(x_var, y_var))
    script = pad_output_channels(mod, named_target("znver3")).script()
    assert 'R.Tensor((2, 198, 64), dtype="float32") = R.matmul(' in script
    actual, _rules = run(mod, x, y)
    check(actual, x @ y)


def test_a_reshape_to_the_same_shape_does_not_keep_a_dense_layer_from_its_epilogue() -> None:
    """TFLite's fully connected layer on a [1, 64, 128] input imports as a matmul and a reshape to
    the shape it already has; that reshape stopped FuseOps, so the GELU (or residual add) after it
    ran as a kernel of its own over the whole output instead of in the matmul's tiles."""
    x, w = rand(1, 64, 128), rand(128, 32)

    def emit(bb, x_var):
        product = bb.emit(relax.op.matmul(x_var, relax.const(w)))
        same = bb.emit(relax.op.reshape(product, [1, 64, 32]))
        return relax.op.add(same, relax.const(np.float32(1.0)))

    mod = module([x.shape], emit)
    scheduled = apply_default_schedules(mod, TARGET)
    kernels = [gv.name_hint for gv, f in scheduled.functions_items() if isinstance(f, tirx.PrimFunc)]
    assert len(kernels) == 1 and "matmul" in kernels[0] and "add" in kernels[0], kernels
    check(run(mod, x)[0], x @ w + 1)


def test_a_reshape_over_a_length_of_any_size_fuses_with_the_slice_and_transpose_around_it() -> None:
    """An attention head split over a sequence of any length: a slice of the Q/K/V projection, a
    reshape to heads and a transpose. TVM's pattern analysis called that reshape opaque, and the
    three ran as kernels of their own (19 against 10 us at 128 tokens, where the fixed-length build
    fuses them); marked injective, they are one kernel."""
    length = tirx.Var("n", "int64")

    def emit(bb, x_var):
        head = bb.emit(relax.op.strided_slice(x_var, axes=[2], begin=[128], end=[256]))
        heads = bb.emit(relax.op.reshape(head, [1, length, 4, 32]))
        return relax.op.permute_dims(heads, [0, 2, 1, 3])

    scheduled = apply_default_schedules(module([(1, length, 384)], emit), TARGET)
    kernels = [gv.name_hint for gv, f in scheduled.functions_items() if isinstance(f, tirx.PrimFunc)]
    assert len(kernels) == 1 and "strided_slice" in kernels[0] and "transpose" in kernels[0], kernels
    vm = relax.VirtualMachine(compile_cpu(scheduled, TARGET), tvm.cpu())
    x = rand(1, 7, 384)
    check(vm["main"](tvm.runtime.tensor(x)).numpy(), x[:, :, 128:256].reshape(1, 7, 4, 32).transpose(0, 2, 1, 3))


def test_hand_written_kernel_next_to_packed_weights() -> None:
    """TOPI's ``get_valid_counts`` (what TFLite's NON_MAX_SUPPRESSION imports into) is one opaque
    block holding plain loops, which TVM's SplitLayoutRewritePreproc aborted on, failing every
    build with non-max suppression (issue 15). Next to a matmul whose weights are packed, both
    must compile and compute: the matmul from packed weights, the kernel as written."""
    x, w = rand(8, 32), rand(32, 48)
    boxes = np.concatenate([rand(1, 20, 1), rand(1, 20, 4)], axis=-1)  # [score, box], as the importer writes
    bb = relax.BlockBuilder()
    x_var = relax.Var("x", relax.TensorType(x.shape, "float32"))
    boxes_var = relax.Var("b", relax.TensorType(boxes.shape, "float32"))
    with bb.function("main", [x_var, boxes_var]):
        with bb.dataflow():
            y = bb.emit(relax.op.matmul(x_var, relax.const(w)))
            counts = bb.emit(relax.op.vision.get_valid_counts(boxes_var, 0.0, id_index=-1, score_index=0))
            out = bb.emit_output(relax.Tuple([y, relax.TupleGetItem(counts, 0)]))
        bb.emit_func_output(out)
    scheduled = apply_default_schedules(bb.get(), TARGET)
    packed = [f for _, f in scheduled.functions_items() if isinstance(f, tirx.PrimFunc) and len(f.params[1].shape) == 3]
    assert packed and packed[0].attrs[RULE_ATTR] == "schedule_contraction"
    vm = relax.VirtualMachine(tvm.compile(scheduled, target=TARGET), tvm.cpu())
    product, valid = vm["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(boxes))
    check(product.numpy(), x @ w)
    assert valid.numpy().tolist() == [int(np.count_nonzero(boxes[0, :, 0] > 0.0))]


@pytest.mark.parametrize("mcpu", ["haswell", "x86-64"])
def test_narrower_vector_targets(mcpu: str) -> None:
    """AVX2 (8 lanes, 12 accumulators) and SSE2 (4 lanes) tiles compute the same convolution."""
    target = named_target(mcpu)
    assert cpu.vector_lanes(target, 32) == {"haswell": 8, "x86-64": 4}[mcpu]
    x, w = rand(2, 9, 14, 12), rand(3, 3, 12, 40)

    def emit(bb, x_var):
        conv = relax.op.nn.conv2d(x_var, relax.const(w), 1, 1, 1, data_layout="NHWC", kernel_layout="HWIO")
        return relax.op.nn.relu(bb.emit(conv))

    actual, rules = run(module([x.shape], emit), x, target=target)
    check(actual, np.maximum(reference.conv2d_nhwc(x, w, (1, 1), (1, 1, 1, 1), (1, 1)), 0))
    assert "schedule_contraction" in rules


def _parallel_loops(stmt: tirx.Stmt, condition: tirx.PrimExpr | None = None
                    ) -> list[tuple[tirx.For, tirx.PrimExpr | None]]:
    """Each loop over the cores under ``stmt``, with the run-time condition it runs under when it is
    the parallel version of a loop (`over_cores.py`), else None."""
    if isinstance(stmt, tirx.For):
        inner = _parallel_loops(stmt.body, condition)
        return [(stmt, condition), *inner] if stmt.kind == tirx.ForKind.PARALLEL else inner
    if isinstance(stmt, tirx.SeqStmt):
        return [found for child in stmt.seq for found in _parallel_loops(child, condition)]
    if isinstance(stmt, tirx.IfThenElse):
        return [*_parallel_loops(stmt.then_case, stmt.condition),
                *([] if stmt.else_case is None else _parallel_loops(stmt.else_case, condition))]
    if isinstance(stmt, s_tir.SBlockRealize):
        return _parallel_loops(stmt.block.body, condition)
    return []


def _scheduled_kernels(scheduled: tvm.IRModule) -> dict[str, tirx.PrimFunc]:
    """The kernels a rule scheduled, by name, as compiled: with both versions of each loop split
    over the cores at run time (`over_cores.py`)."""
    return {gv.name_hint: version_parallel_loops(func, TARGET) for gv, func in scheduled.functions_items()
            if isinstance(func, tirx.PrimFunc) and func.attrs and RULE_ATTR in func.attrs}


def _parallel_kernels(scheduled: tvm.IRModule, sizes: dict[str, int] | None = None) -> dict[str, bool]:
    """Whether each scheduled kernel has a parallel loop; for one chosen at run time, whether it
    is chosen at ``sizes`` (the symbolic sizes by name; without them, never)."""
    def chosen(condition: tirx.PrimExpr | None) -> bool:
        if condition is None:
            return True
        if sizes is None:
            return False
        at = tvm_ffi.structural_map(condition, (tirx.Var, lambda var: tirx.IntImm(str(var.ty), sizes[var.name])))
        return bool(sym.Analyzer().simplify(at).value)

    return {name: any(chosen(condition) for _, condition in _parallel_loops(func.body))
            for name, func in _scheduled_kernels(scheduled).items()}


@pytest.mark.parametrize(("k", "n", "always"), [(256, 10, False), (128, 256, False), (512, 1024, True)])
def test_dense_of_a_symbolic_batch_splits_over_the_cores_from_the_batch_its_work_pays_for(
        k: int, n: int, always: bool) -> None:
    """A symbolic batch is tiled one row at a time; at batch 1 a thread-pool wake-up would cost
    more than the work of a small layer (a 256 -> 10 matmul: 3-5x slower at batch 8), so such a
    kernel chooses at run time, from the batch where its work (elements stored, the padded columns'
    included) reaches `PARALLEL_MIN_WORK` multiply-adds (`over_cores.py`). Columns that give several
    tiles and enough work at batch 1 are split at every batch."""
    w = rand(k, n)
    batch = tirx.Var("batch", "int64")
    bb = relax.BlockBuilder()
    x_var = relax.Var("x", relax.TensorType([batch, k], "float32"))
    with bb.function("main", [x_var]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.matmul(x_var, relax.const(w)))
        bb.emit_func_output(out)
    target = TWO_CORES
    scheduled = apply_default_schedules(bb.get(), target)
    assert set(_parallel_kernels(scheduled).values()) == {always}
    from_batch = next(rows for rows in range(1, 4096) if all(_parallel_kernels(scheduled, {"batch": rows}).values()))
    work_from = PARALLEL_MIN_WORK / (k * n)
    assert from_batch == 1 if always else work_from / 2 <= from_batch <= math.ceil(work_from)
    vm = relax.VirtualMachine(tvm.compile(scheduled, target=target), tvm.cpu())
    for rows in (1, 8, 13, from_batch, from_batch + 3):
        x = rand(rows, k)
        check(vm["main"](tvm.runtime.tensor(x)).numpy(), x @ w)


@pytest.mark.parametrize(("batch", "parallel"), [(1, False), (8, True)])
def test_contraction_splits_over_the_cores_only_when_its_work_pays_for_it(batch: int, parallel: bool) -> None:
    """The token model's attention projections, [batch, 32, 64] x [64, 64]: at batch 1 (131k
    multiply-adds, about 2 us) a parallel loop over its 8 tiles took 1.7-4.6 us against 1.5 us
    serially, and under a loaded machine 20-30 ms a call, waiting for a descheduled worker
    (docs/benchmarks.md). At batch 8 the work pays for the thread pool."""
    w = rand(64, 64)
    mod = module([(batch, 32, 64)], lambda bb, x_var: relax.op.matmul(x_var, relax.const(w)))
    scheduled = apply_default_schedules(mod, TWO_CORES)
    assert set(_parallel_kernels(scheduled).values()) == {parallel}


@pytest.mark.parametrize(("shape", "parallel"), [((8, 32, 32, 32), True), ((4, 16, 16, 32), False)])
def test_pooling_splits_over_the_cores_by_the_bytes_it_reads(shape: tuple[int, ...], parallel: bool) -> None:
    """The benchmark CNN's 2x2 max pooling reads 1 MB in 262k iterations, under `PARALLEL_MIN_WORK`:
    it ran serially, 59 us alone against 39 split over the cores, and in the model it read half of
    its input from the other core's cache. From 512 KiB read a kernel runs over the cores whatever
    its multiply-adds (docs/schedules.md, "Pooling and means over the cores"); 128 KB stays serial."""
    pool = module([shape], lambda bb, v: relax.op.nn.max_pool2d(v, (2, 2), (2, 2), layout="NHWC"))
    assert set(_parallel_kernels(apply_default_schedules(pool, TWO_CORES)).values()) == {parallel}


@pytest.mark.parametrize(("shape", "parallel"), [((8, 16, 16, 64), True), ((1, 7, 7, 1280), False)])
def test_a_mean_splits_over_the_cores_by_the_bytes_it_reads(shape: tuple[int, ...], parallel: bool) -> None:
    """The benchmark CNN's global average pooling (512 KB, 131k iterations) runs over the cores;
    MobileNetV2's (245 KB), which lost 0.5-1.5 us split, stays serial."""
    mean = module([shape], lambda bb, v: relax.op.mean(v, axis=[1, 2]))
    assert set(_parallel_kernels(apply_default_schedules(mean, TWO_CORES)).values()) == {parallel}


@pytest.mark.parametrize(("k", "n", "parallel"), [(256, 1024, True), (128, 256, False)])
def test_a_gemv_splits_over_the_cores_by_the_weights_it_reads(k: int, n: int, parallel: bool) -> None:
    """At batch 1 a 256 -> 1024 matmul does 262k multiply-adds, under `PARALLEL_MIN_WORK`, but reads
    1 MB of weights: 20-22 us serially against 15 split. 128 KB of weights stay on one core."""
    w = rand(k, n)
    gemv = module([(1, k)], lambda bb, x_var: relax.op.matmul(x_var, relax.const(w)))
    assert set(_parallel_kernels(apply_default_schedules(gemv, TWO_CORES)).values()) == {parallel}


def test_elementwise_of_a_symbolic_batch_runs_in_parallel_as_at_batch_1() -> None:
    """A clip over [batch, 56, 56, 32] (MobileNetV2's activations) has 100k elements at batch 1,
    where the static build splits it over the cores: the symbolic one must too (it ran serially,
    its work counted as 0)."""
    batch = tirx.Var("batch", "int64")
    mod = module([(batch, 56, 56, 32)], lambda bb, x_var: relax.op.clip(relax.op.add(x_var, x_var), 0.0, 6.0))
    scheduled = apply_default_schedules(mod, TWO_CORES)
    assert set(_parallel_kernels(scheduled).values()) == {True}
    vm = relax.VirtualMachine(tvm.compile(scheduled, target=TWO_CORES), tvm.cpu())
    x = rand(2, 56, 56, 32)
    check(vm["main"](tvm.runtime.tensor(x)).numpy(), np.clip(x + x, 0.0, 6.0))


def test_kernels_of_a_symbolic_module_keep_their_buffers_apart() -> None:
    """With the Relax VM's `shape_func` (not `tirx.noalias`) in the same LLVM module, TVM tagged every
    kernel's loads and stores as possibly aliased ("tvm-alias" TBAA), and LLVM kept the register
    tile's accumulators in memory: MobileNetV2's 1x1 convolutions ran 2-3x slower in the symbolic
    artifact than in the static one. `compile_cpu` marks the shape function."""
    batch = tirx.Var("batch", "int64")
    w = rand(64, 96)
    mod = module([(batch, 14, 14, 64)],
                 lambda bb, x_var: relax.op.nn.relu(bb.emit(relax.op.matmul(x_var, relax.const(w)))))
    scheduled = apply_default_schedules(mod, TARGET)
    executable = compile_cpu(scheduled, TARGET)
    library = executable.mod if hasattr(executable, "mod") else executable
    assert "tvm-alias" not in "".join(module.inspect_source("ll") for module in library.imports)
    x = rand(3, 14, 14, 64)
    out = relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    check(out, np.maximum(x @ w, 0))


def _parallel_loop_names(scheduled: tvm.IRModule) -> list[str]:
    """The variable of each parallel loop of the scheduled kernels (a fused loop is named after
    the loops it fused, outermost first)."""
    return [line.split()[1] for _, func in scheduled.functions_items() if isinstance(func, tirx.PrimFunc)
            for line in func.script().splitlines() if "T.parallel(" in line]


@pytest.mark.parametrize(("mcpu", "size", "kernel", "channels", "filters", "rows_first"), [
    ("emeraldrapids", 14, 3, 32, 64, True),  # 72 KiB of weights, 49 KiB of output: small weights
    ("emeraldrapids", 32, 1, 512, 512, True),  # 1 MiB of weights, half its 2 MiB L2; 2 MiB of output
    ("znver3", 32, 1, 512, 512, False),  # the same, four times half of Zen 3's 512 KiB L2
    ("emeraldrapids", 14, 3, 512, 512, False),  # ResNet50's last stage: 9 MiB of weights, 392 KiB of output
    ("emeraldrapids", 64, 3, 256, 256, False),  # AdaIN's VGG19: 2.3 MiB of weights; 4 MiB of output
])
def test_parallel_tiles_take_the_rows_outside_unless_the_weights_outweigh_the_output(
        mcpu: str, size: int, kernel: int, channels: int, filters: int, rows_first: bool) -> None:
    """Each core computes whole rows of the output, so the next kernel finds its input in its own
    core's cache, unless the weights are larger than the output and than SMALL_WEIGHTS, or than half
    of a core's L2: then each core reads only its share of them (`contraction._rows_first`)."""
    target = named_target(mcpu)
    skip_unless_runnable(target)
    x, w = rand(1, size, size, channels), rand(kernel, kernel, channels, filters)
    pad = kernel // 2
    mod = module([x.shape], lambda bb, x_var: relax.op.nn.conv2d(
        x_var, relax.const(w), padding=(pad, pad, pad, pad), data_layout="NHWC", kernel_layout="HWIO"))
    scheduled = apply_default_schedules(mod, target)
    (loop,) = _parallel_loop_names(scheduled)
    assert loop.startswith("nn_yy_") == rows_first and loop.startswith("ff_") != rows_first
    vm = relax.VirtualMachine(tvm.compile(scheduled, target=target), tvm.cpu())
    check(vm["main"](tvm.runtime.tensor(x)).numpy(), reference.conv2d_nhwc(x, w, (1, 1), (pad,) * 4, (1, 1)))


@pytest.mark.parametrize(("smallest", "always"), [(None, False), (32, True)])
def test_a_convolution_over_images_of_any_size_is_split_as_at_its_smallest_size(
        smallest: int | None, always: bool) -> None:
    """A 3x3 convolution of 64 channels over images of symbolic height and width: its work is
    estimated at the smallest size the build's `dims=` allow (`tir_var_lower_bound`), 32x32 here,
    where it is split over the cores with each core on whole rows (small weights; AdaIN's ran on
    one core at 256x256: 31 ms against 16). With no minimum the sizes count as 1 there, and the
    kernel chooses at run time (`over_cores.py`): serial at 2x2, split at 33x29."""
    height, width = tirx.Var("h", "int64"), tirx.Var("w", "int64")
    w = rand(3, 3, 64, 64)
    mod = module([(1, height, width, 64)], lambda bb, x_var: relax.op.nn.conv2d(
        x_var, relax.const(w), padding=(1, 1, 1, 1), data_layout="NHWC", kernel_layout="HWIO"))
    if smallest is not None:
        mod["main"] = mod["main"].with_attr("tir_var_lower_bound", {"h": smallest, "w": smallest})
    scheduled = apply_default_schedules(mod, TWO_CORES)
    assert set(_parallel_kernels(scheduled).values()) == {always}
    assert set(_parallel_kernels(scheduled, {"h": 2, "w": 2}).values()) == {always}
    assert set(_parallel_kernels(scheduled, {"h": 33, "w": 29}).values()) == {True}
    assert all(loop.startswith("nn_yy_") for loop in _parallel_loop_names(scheduled))
    vm = relax.VirtualMachine(compile_cpu(scheduled, TWO_CORES), tvm.cpu())
    for size in [(33, 29), (8, 45)]:
        x = rand(1, *size, 64)
        check(vm["main"](tvm.runtime.tensor(x)).numpy(), reference.conv2d_nhwc(x, w, (1, 1), (1,) * 4, (1, 1)))


def test_a_reduction_over_a_length_of_any_size_gets_the_micro_kernel() -> None:
    """Attention's second matmul over a sequence of unknown length, ``softmax(q k^T) @ v``, reduces
    over that length: the contraction rule runs the reduction whole inside each tile, so it takes a
    symbolic one (the fallback's kernel took 1 ms at length 128, 25x the static build's)."""
    length = tirx.Var("length", "int64")
    mod = module([(1, 4, length, length), (1, 4, length, 32)], lambda bb, a, b: relax.op.matmul(a, b))
    scheduled = apply_default_schedules(mod, TARGET)
    assert [str(func.attrs[RULE_ATTR]) for _, func in scheduled.functions_items()
            if isinstance(func, tirx.PrimFunc) and func.attrs and RULE_ATTR in func.attrs] == ["schedule_contraction"]
    vm = relax.VirtualMachine(compile_cpu(scheduled, TARGET), tvm.cpu())
    for size in (1, 13, 40):
        a, b = rand(1, 4, size, size), rand(1, 4, size, 32)
        check(vm["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b)).numpy(), a @ b)


def test_a_max_pooling_at_stride_2_over_images_of_any_size_is_exact_at_odd_and_even_sizes() -> None:
    """ResNet50's, DenseNet121's and InceptionV3's 3x3 max pooling at stride 2 over images of any
    size: its write-back per tile took its extent from ``w - 3``, which TVM's analyzer cannot
    prove non-negative, and the build failed ("Cannot unroll non-constant loop"). Such a tile
    means the contraction rule does not fit; the fallback's kernel was as fast as the static
    build's at 113x113x64 (55 against 57 us)."""
    height, width = tirx.Var("h", "int64"), tirx.Var("w", "int64")
    mod = module([(1, height, width, 64)], lambda bb, x_var: relax.op.nn.max_pool2d(
        x_var, pool_size=(3, 3), strides=(2, 2), layout="NHWC"))
    mod["main"] = mod["main"].with_attr("tir_var_lower_bound", {"h": 18, "w": 18})
    vm = relax.VirtualMachine(compile_cpu(apply_default_schedules(mod, TWO_CORES), TWO_CORES), tvm.cpu())
    for size in [(18, 18), (19, 30), (25, 21)]:
        x = rand(1, *size, 64)
        windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(1, 2))[:, ::2, ::2]
        np.testing.assert_array_equal(vm["main"](tvm.runtime.tensor(x)).numpy(), windows.max(axis=(-2, -1)))


@pytest.mark.parametrize("size", [8, tirx.Var("h", "int64")])
def test_a_zero_padding_after_a_convolution_writes_its_border(size: int | tirx.Var) -> None:
    """MobileNetV2's `ZeroPadding2D((0, 1), (0, 1))` after a stride-2 block's expansion is fused into
    the expansion's kernel: it reads each element in place, as a crop does, but its extra row and
    column lie outside the convolution's tiles; taken for the kernel's epilogue, they were never
    written, and read whatever the memory held (MobileNetV2 for images of any size mismatched)."""
    w = rand(1, 1, 16, 96)
    mod = module([(1, size, size, 16)], lambda bb, x_var: relax.op.nn.pad(bb.emit(relax.op.clip(bb.emit(
        relax.op.nn.conv2d(x_var, relax.const(w), data_layout="NHWC", kernel_layout="HWIO")), 0.0, 6.0)),
        [0, 0, 0, 1, 0, 1, 0, 0]))
    vm = relax.VirtualMachine(compile_cpu(apply_default_schedules(mod, TARGET), TARGET), tvm.cpu())
    for _ in range(3):
        x = rand(1, 8, 8, 16)
        expected = np.pad(np.clip(x @ w[0, 0], 0, 6), [(0, 0), (0, 1), (0, 1), (0, 0)])
        check(vm["main"](tvm.runtime.tensor(x)).numpy(), expected)


def test_a_fallback_over_a_length_of_any_size_fuses_its_parallel_loops_up_to_the_length() -> None:
    """Attention's ``q k^T`` over a sequence of any length has the length as its columns, so it
    falls back; fused over both lengths, its parallel loop divided its index by the length for
    every element (1045 us at 128 tokens against 97 with the rows alone fused). The scaling after
    it (a block of its own, split over the cores from the length where its work pays) fuses up to
    the length too."""
    length = tirx.Var("length", "int64")
    mod = module([(1, 4, length, 32), (1, 4, 32, length)],
                 lambda bb, q, k: relax.op.multiply(bb.emit(relax.op.matmul(q, k)), relax.const(0.125, "float32")))
    mod["main"] = mod["main"].with_attr("tir_var_lower_bound", {"length": 16})
    scheduled = apply_default_schedules(mod, TWO_CORES)
    assert sorted(_parallel_loop_names(scheduled)) == ["ax0_ax1_ax2_fused", "i0_i1_i2_fused"]
    vm = relax.VirtualMachine(compile_cpu(scheduled, TWO_CORES), tvm.cpu())
    for size in (1, 19):
        q, k = rand(1, 4, size, 32), rand(1, 4, 32, size)
        check(vm["main"](tvm.runtime.tensor(q), tvm.runtime.tensor(k)).numpy(), (q @ k) * 0.125)
