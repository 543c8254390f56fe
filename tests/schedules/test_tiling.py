"""Tile-size arithmetic: tiles always divide the loop, fill whole vectors when they can, fit the registers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from tfcheck.compiler.schedules.rewrites.channel_padding import padded_channels
from tfcheck.compiler.schedules.tiling import (MAX_ACCUMULATORS, broadcast_registers, column_block, depthwise_tile,
                                              divisors, max_rows, padded_cols, padded_matmul_rows, padded_rows, register_tile,
                                              row_tile, rows_for_wider_tile,
                                              vector_tile, vector_width, weight_registers)


def test_divisors() -> None:
    assert divisors(12) == [1, 2, 3, 4, 6, 12]
    assert divisors(1) == [1]
    assert divisors(49) == [1, 7, 49]


@pytest.mark.parametrize(
    ("extent", "lanes", "vectors", "expected"),
    [
        (512, 16, 2, 32),  # two whole AVX-512 vectors
        (1000, 16, 8, 40),  # no multiple of 16 divides 1000: two and a half vectors
        (10, 16, 2, 10),  # a classifier head: the whole axis
        (24, 16, 4, 24),
        (96, 8, 3, 24),  # AVX2: three vectors
        (17, 16, 2, 17),  # prime, but fits
        (37, 4, 2, 1),  # prime and wider than the tile: scalar columns
    ],
)
def test_vector_tile(extent: int, lanes: int, vectors: int, expected: int) -> None:
    assert vector_tile(extent, lanes, vectors) == expected


@pytest.mark.parametrize(("extent", "lanes", "expected"), [(32, 16, 16), (24, 16, 8), (40, 16, 8), (10, 16, 2), (17, 16, 1)])
def test_vector_width_is_a_power_of_two_dividing_the_tile(extent: int, lanes: int, expected: int) -> None:
    assert vector_width(extent, lanes) == expected


def test_row_tile_picks_largest_divisor() -> None:
    assert row_tile(112, 8) == 8
    assert row_tile(7, 8) == 7
    assert row_tile(13, 8) == 1


def test_gemv_gets_more_vectors_than_a_gemm() -> None:
    assert register_tile(1, 1024, lanes=16, registers=32) == (1, 128)
    assert register_tile(32, 1024, lanes=16, registers=32) == (4, 32)  # 8 rows: no multiple of 16 under 15 vectors
    assert register_tile(32, 96, lanes=16, registers=32) == (4, 48)
    assert register_tile(14, 256, lanes=16, registers=32) == (7, 32)
    assert register_tile(56, 256, lanes=8, registers=16) == (4, 16)  # AVX2: 24 does not divide 256


@pytest.mark.parametrize(
    ("rows", "cols", "lanes", "registers", "expected"),
    [
        (7, 1280, 16, 32, (7, 32)),  # 7 x 4 vectors + 4 weight vectors + a broadcast: 33 registers
        # AVX2: 7 rows of one vector, not one row of 8 vectors whose weights come from L2 row after
        # row (ResNet50's 7x7x512 3x3 convolution: 28% faster)
        (7, 1280, 8, 16, (7, 8)),
        (7, 160, 8, 16, (7, 8)),
        (3, 512, 8, 16, (3, 16)),  # 3 rows of 2 vectors
        (1, 1280, 8, 16, (1, 64)),  # a single row (GEMV) has no other tile: 8 vectors
        (112, 96, 16, 32, (7, 32)),  # 14 x 2 vectors would be 1792 bytes: a workspace, not the stack
        (56, 144, 16, 32, (4, 48)),  # 144 = 9 vectors: 3 per row, where 2 would not divide
        (112, 16, 16, 32, (14, 16)),  # one vector of columns: rows fill the accumulators
        (112, 96, 8, 16, (4, 24)),  # AVX2: 12 accumulators, 3 weights, a broadcast: all 16
        # AVX2, Xception's 19 columns computed as 20 and its 728 channels, 91 vectors: no tile of 2
        # to 6 vectors divides them, and 10 rows of one vector need 10 broadcasts (spilled); 5 rows
        (20, 728, 8, 16, (5, 8)),
        (20, 736, 8, 16, (5, 16)),  # at 736 channels, 5 rows of 2 vectors
        (20, 736, 16, 32, (5, 32)),  # AVX-512: the same tile of 2 vectors
        (112, 8, 8, 16, (7, 8)),  # AVX2: one vector of columns, at most 7 rows (15 registers)
    ],
)
def test_register_tile_for_pointwise_convolutions(rows: int, cols: int, lanes: int, registers: int,
                                                  expected: tuple[int, int]) -> None:
    assert register_tile(rows, cols, lanes, registers) == expected


@given(
    rows=st.integers(1, 300), cols=st.integers(1, 3000), lanes=st.sampled_from([4, 8, 16]),
    registers=st.sampled_from([16, 32]),
)
def test_register_tile_divides_and_fits(rows: int, cols: int, lanes: int, registers: int) -> None:
    tile_rows, tile_cols = register_tile(rows, cols, lanes, registers)
    assert rows % tile_rows == 0 and cols % tile_cols == 0
    vectors = tile_cols // vector_width(tile_cols, lanes)
    if (tile_rows, tile_cols) != (1, vector_tile(cols, lanes, 1)):  # the fallback when nothing fits
        assert tile_rows * vectors <= MAX_ACCUMULATORS
        needed = tile_rows * vectors + weight_registers(tile_rows, vectors) + broadcast_registers(tile_rows, vectors)
        assert needed <= registers


def test_padded_rows() -> None:
    assert padded_rows(17, 14) == 18  # InceptionV3's 17x17 maps: two tiles of 9 rows instead of 17 of one
    assert padded_rows(71, 14) == 72  # its 71x71 map: 12 rows
    assert padded_rows(73, 14) == 77  # 74 to 76 have no divisor from 7 to 14
    assert padded_rows(17, 6) == 18  # AVX2's budget: 6 rows
    for extent in (7, 14, 35, 56, 147):  # DenseNet's and ResNet's maps already divide well
        assert padded_rows(extent, 14) == extent
    assert padded_rows(1, 14) == 1 and padded_rows(3, 14) == 3  # narrower than a tile: one tile


@given(extent=st.integers(1, 400), rows=st.sampled_from([6, 14]))
def test_padded_rows_adds_at_most_a_quarter(extent: int, rows: int) -> None:
    padded = padded_rows(extent, rows)
    assert extent <= padded <= extent + extent // 4
    assert padded == extent or row_tile(padded, rows) >= rows // 2


def test_max_rows_leave_a_broadcast_register_per_row() -> None:
    assert (max_rows(16), max_rows(32)) == (7, 15)


@pytest.mark.parametrize(
    ("cols", "rows", "lanes", "registers", "expected"),
    [
        (728, 20, 8, 16, 736),  # AVX2, Xception: 92 vectors allow 5 x 2 vectors, at 1.1% more work
        (736, 20, 16, 32, 736),  # AVX-512: 46 vectors already allow 2
        (1024, 20, 8, 16, 1024),
        (72, 20, 8, 16, 72),  # 9 vectors: 4 rows of 3 vectors divide them
    ],
)
def test_padded_cols_widen_only_where_a_better_tile_pays(cols: int, rows: int, lanes: int, registers: int,
                                                         expected: int) -> None:
    assert padded_cols(cols, rows, lanes, registers) == expected


@given(cols=st.integers(1, 300).map(lambda v: v * 8), rows=st.integers(1, 80))
def test_padded_cols_add_at_most_an_eighth_in_whole_vectors(cols: int, rows: int) -> None:
    padded = padded_cols(cols, rows, 8, 16)
    assert cols <= padded <= cols + cols // 8 and padded % 8 == 0


@pytest.mark.parametrize(
    ("rows", "cols", "lanes", "registers", "expected"),
    [
        (197, 768, 8, 16, 198),  # ViT-B/16's tokens with AVX2: one-row tiles -> 33 tiles of 6 x 2 vectors
        (289, 192, 8, 16, 290),  # InceptionV3's 17x17 pixels: 58 tiles of 5 x 2
        (196, 768, 8, 16, 196),  # 7 x 4 x 7 rows: tiles of 4 already
        (7, 768, 8, 16, 7),  # a row tile of 7: no padding
        (197, 768, 16, 32, 198),  # AVX-512 too
        (197, 4, 8, 16, 197),  # narrower than a vector: too little work per input element for a copy
    ],
)
def test_padded_matmul_rows_pad_only_where_a_taller_tile_pays(rows: int, cols: int, lanes: int, registers: int,
                                                               expected: int) -> None:
    assert padded_matmul_rows(rows, cols, lanes, registers) == expected


@settings(deadline=None)
@given(rows=st.integers(1, 400), cols=st.integers(1, 64).map(lambda v: v * 8))
def test_padded_matmul_rows_add_at_most_a_quarter(rows: int, cols: int) -> None:
    assert rows <= padded_matmul_rows(rows, cols, 8, 16) <= rows + rows // 4


@pytest.mark.parametrize(
    ("tiles", "strip", "input_bytes", "l2", "expected"),
    [
        (46, 46 << 10, 1 << 20, 512 << 10, 2),  # Xception on Zen 3: 23 x 47 KB would not fit
        (64, 64 << 10, 6 << 20, 512 << 10, 4),  # 4 strips of 64 KB in half of 512 KB
        (64, 64 << 10, 6 << 20, 2 << 20, 16),  # the same on a 2 MB L2
        (16, 8 << 10, 200 << 10, 512 << 10, 1),  # the input stays in half of the L2: no block
        (7, 1 << 20, 4 << 20, 512 << 10, 1),  # one strip is more than the L2: no block
    ],
)
def test_column_blocks_fit_half_of_the_l2(tiles: int, strip: int, input_bytes: int, l2: int, expected: int) -> None:
    assert column_block(tiles, strip, input_bytes, l2) == expected


def test_padded_channels() -> None:
    assert padded_channels(728, 16) == 736  # Xception: 8-wide vectors -> 16-wide
    assert padded_channels(736, 16) == 736  # already whole vectors
    assert padded_channels(120, 16) == 120  # under 8 vectors: padding would add too much work
    assert padded_channels(728, 8) == 728  # whole AVX2 vectors
    assert padded_channels(10, 16) == 16  # a 10-class classifier: five 2-wide vectors -> one 16-wide
    assert padded_channels(3, 8) == 8  # three scalars -> one vector
    assert padded_channels(8, 16) == 8  # already one (narrower) vector


@pytest.mark.parametrize(
    ("width", "channels", "lanes", "expected"),
    [
        (112, 32, 16, (7, 16)),  # MobileNetV2's layers: 7 columns by one vector, on AVX-512
        (56, 144, 8, (7, 8)),  # and on AVX2
        (28, 24, 16, (7, 8)),  # 24 channels: 8-wide vectors
        (10, 13, 16, (5, 13)),  # 13 channels: one scalar strip of 13
        (13, 960, 16, (1, 16)),  # a prime width: one column
    ],
)
def test_depthwise_tile(width: int, channels: int, lanes: int, expected: tuple[int, int]) -> None:
    assert depthwise_tile(width, channels, lanes, budget=28) == expected


def test_rows_for_wider_tile() -> None:
    """InceptionV3's 147 columns with AVX2's 16 registers: 7 rows of one vector (7 x 2 needs 17);
    computed as 150, 6 rows of two (148 would give 4 x 2: fewer accumulators)."""
    assert register_tile(147, 64, 8, 16) == (7, 8)
    assert rows_for_wider_tile(147, 64, 8, 16) == 150 and register_tile(150, 64, 8, 16) == (6, 16)
    assert rows_for_wider_tile(147, 32, 8, 16) == 150
    assert rows_for_wider_tile(147, 64, 16, 32) == 147  # AVX-512: 7 x 2 fits
    assert rows_for_wider_tile(35, 64, 8, 16) == 35  # 5 x 2 already
    assert rows_for_wider_tile(147, 8, 8, 16) == 147  # one vector of columns: no wider tile
    assert rows_for_wider_tile(30, 13, 8, 16) == 30  # columns not in whole vectors
    assert rows_for_wider_tile(20, 728, 8, 16) == 20  # 91 vectors: only one row of 7 is wider
