"""Pure tile-size arithmetic, kept apart from TIR so it can be tested on plain integers.

Tiles are always divisors of the loop extent: a split with a remainder leaves a predicate in the
innermost loop, which stops TVM's vectoriser and costs more than a slightly smaller tile.
"""

from __future__ import annotations

from collections.abc import Callable

# (rows, cols) of a register tile from (rows extent, cols extent, vector lanes, accumulator registers).
TileSize = Callable[[int, int, int, int], tuple[int, int]]

# Output columns per depthwise tile (docs/schedules.md, "Depthwise convolutions").
DEPTHWISE_MAX_ROWS = 7


def divisors(extent: int) -> list[int]:
    """All divisors of ``extent`` in increasing order."""
    small = [d for d in range(1, int(extent**0.5) + 1) if extent % d == 0]
    return sorted(set(small + [extent // d for d in small]))


def _alignment(value: int, lanes: int) -> int:
    """The largest power of two that divides ``value``, capped at ``lanes``: how well it fills vectors."""
    return min(value & -value, lanes)


def vector_tile(extent: int, lanes: int, max_vectors: int) -> int:
    """Width of the vectorised tile over an output axis of ``extent`` elements.

    Prefers tiles that fill whole vectors (e.g. 32 of 512 with 16 lanes), then wider tiles; 1000
    becomes 40 (two full vectors and a half), 10 stays 10.
    """
    limit = max(lanes * max_vectors, 1)
    candidates = [d for d in divisors(extent) if d <= limit]
    return max(candidates, key=lambda d: (_alignment(d, lanes), d))


def row_tile(extent: int, max_rows: int) -> int:
    """Rows of the register tile over the second output axis: the largest divisor up to ``max_rows``."""
    return max(d for d in divisors(extent) if d <= max_rows)


# Accumulator vectors a register tile may have: TVM's LowerTVMBuiltin puts a buffer under 1 KiB on
# the stack (where LLVM keeps it in registers) and allocates any larger one with
# TVMBackendAllocWorkspace, once per tile under a parallel loop. 15 AVX-512 vectors are 960 bytes.
MAX_ACCUMULATORS = 15

# Independent accumulators that keep the FMA units busy: two FMA pipes times four cycles of latency.
FMA_SLOTS = 8

# Vectors of the widest tile tried over the columns (a single row, GEMV, reads each weight once).
MAX_VECTORS = 8


def max_rows(registers: int) -> int:
    """Rows of a register tile at most (``register_tile``'s limits with one vector per row: the
    accumulators, one weight vector and a broadcast input per row in ``registers``, on the stack):
    7 with AVX2's 16 registers, 15 with AVX-512's 32."""
    return max(1, min(MAX_ACCUMULATORS, (registers - 1) // 2))


def padded_rows(extent: int, max_rows: int) -> int:
    """The extent to compute over a register tile's rows: ``extent`` itself, or the smallest extent
    up to a quarter more whose row tile is at least half of ``max_rows`` (or all of ``extent``).

    Tiles divide the extent, so a prime one (InceptionV3's 17, 71, 73 columns) gets a tile of one
    row: every weight vector loaded feeds one FMA, and the 17x17 convolutions ran at a third of
    the speed of the 14-wide ones. Computing 18 columns (9 per tile) and dropping the last one
    costs 6% more work.
    """
    wanted = min(extent, max(1, max_rows // 2))
    for candidate in range(extent, extent + extent // 4 + 1):
        if row_tile(candidate, max_rows) >= wanted:
            return candidate
    return extent


def _registers(cols: int, lanes: int) -> int:
    """Vector registers one row of ``cols`` accumulators occupies, cut as ``vector_width`` cuts it."""
    return cols // vector_width(cols, lanes)


def _tile_throughput(rows: int, cols: int, lanes: int) -> float:
    """Output elements the tile advances per cycle-ish of one reduction step: each step issues
    ``rows x vectors`` FMAs and loads ``rows`` broadcast inputs and ``vectors`` weights, two per
    cycle either way, and needs ``FMA_SLOTS`` accumulators in flight to hide the FMA latency.

    A single row reads each weight vector for one FMA, and the next row reads them all again: the
    weights of a convolution (a 3x3x512 window by 64 columns is 1.2 MB) come from the L2 cache at
    about one vector a cycle, so they count twice."""
    vectors = _registers(cols, lanes)
    return rows * cols / max(rows * vectors, rows + vectors * (2 if rows == 1 else 1), FMA_SLOTS)


def weight_registers(rows: int, vectors: int) -> int:
    """Registers the weight vectors of one reduction step hold: one per vector, reused by every
    row; a single row uses each once, straight from memory as the FMA's operand."""
    return vectors if rows > 1 else 0


def broadcast_registers(rows: int, vectors: int) -> int:
    """Registers the broadcast inputs of one reduction step hold: one, reused row after row, where
    each feeds an FMA per vector; one per row in a tile of one vector, where each feeds a single
    FMA and LLVM loads a step's broadcasts ahead of their FMAs. With AVX2's 16 registers a
    10 x 1-vector tile (12 registers by the count without them) spilled five accumulators to the
    stack inside the reduction loop and ran at 69 GFLOP/s on one core, where 5 x 2 vectors ran at
    106 (19x19x736 -> 736; docs/schedules.md, "Tiles that fit the registers")."""
    return rows if vectors == 1 else 1


def register_tile(rows_extent: int, cols_extent: int, lanes: int, registers: int) -> tuple[int, int]:
    """(rows, cols) of a register tile of accumulators for a target with ``registers`` vector registers.

    Among the tiles that divide both extents, whose accumulators, weight vectors
    (``weight_registers``) and broadcast inputs (``broadcast_registers``) fit the registers (a 7 x
    4-vector AVX-512 tile needs 33 and spilled: MobileNetV2's 7x7x320 -> 1280 convolution took 2.3x
    the time of 7 x 2) and that stay on the stack (``MAX_ACCUMULATORS``), the one with the best
    ``_tile_throughput``; then the most accumulators, the fewest loads per step, the most rows
    (docs/schedules.md, "1x1 convolutions").
    """
    best, best_key = (1, vector_tile(cols_extent, lanes, 1)), None
    for rows in divisors(rows_extent):
        for vectors in range(1, MAX_VECTORS + 1):
            cols = vector_tile(cols_extent, lanes, vectors)
            width = _registers(cols, lanes)
            accumulators = rows * width
            needed = accumulators + weight_registers(rows, width) + broadcast_registers(rows, width)
            if accumulators > MAX_ACCUMULATORS or needed > registers:
                continue
            key = (_tile_throughput(rows, cols, lanes), accumulators, -(rows + width), rows)
            if best_key is None or key > best_key:
                best, best_key = (rows, cols), key
    return best


def rows_for_wider_tile(rows_extent: int, cols_extent: int, lanes: int, registers: int) -> int:
    """The rows to compute for an output of ``rows_extent`` rows: where the register tile
    (``register_tile``) over ``rows_extent`` is one vector wide and ``cols_extent`` is two vectors
    or more, the extent up to an eighth more whose tile is wider with the most accumulators (the
    smallest such); otherwise ``rows_extent``.

    InceptionV3's 147 columns (3 x 7 x 7) allow 7 rows, but with AVX2's 16 registers not 7 rows of
    two vectors (17): the tile was 7 rows of one vector, whose every broadcast feeds a single FMA.
    On a Zen 3 core its 147x147x32 -> 64 3x3 convolution took 10.8 ms (74 GFLOP/s) so, and 8.7 ms
    (92) over 150 columns in tiles of 6 x 2 vectors, 9.0 ms over 148 in tiles of 4 x 2. (The tile
    model counts 7 against 8 there; measured, a one-vector tile runs at two thirds to four fifths
    of the speed of two.)"""
    def tile(rows: int) -> tuple[int, int]:
        rows_tile, cols = register_tile(rows, cols_extent, lanes, registers)
        return rows_tile, _registers(cols, lanes)

    def wider(rows: int) -> bool:  # rows of more than one vector (one row of many reads each weight once)
        return tile(rows)[0] > 1 and tile(rows)[1] > 1

    if cols_extent % lanes or cols_extent < 2 * lanes or tile(rows_extent)[1] > 1:
        return rows_extent
    candidates = [rows for rows in range(rows_extent + 1, rows_extent + rows_extent // 8 + 1) if wider(rows)]
    return max(candidates, key=lambda rows: (tile(rows)[0] * tile(rows)[1], -rows), default=rows_extent)


def tile_rate(rows_extent: int, cols_extent: int, lanes: int, registers: int) -> float:
    """Output elements per reduction step of the register tile ``register_tile`` chooses."""
    return _tile_throughput(*register_tile(rows_extent, cols_extent, lanes, registers), lanes)


# How much faster a wider output's register tile must advance the real columns for `padded_cols` to
# take it: the tile model is rough (a one-vector tile ran at two thirds of the speed of two
# vectors where it counts 7 against 8), so only a clear gain pays for the extra columns.
WIDER_TILE_GAIN = 9 / 8


def padded_cols(extent: int, rows_extent: int, lanes: int, registers: int) -> int:
    """The columns to compute for an output of ``extent`` columns (whole vectors) over
    ``rows_extent`` rows: ``extent``, or the multiple of ``lanes`` up to an eighth more whose
    register tile advances the real columns fastest (``tile_rate`` times the share of real
    columns), where that is at least ``WIDER_TILE_GAIN`` times as fast.

    Tiles divide the extent: Xception's 728 channels are 91 vectors of 8 with AVX2 (91 = 7 x 13),
    which allow no tile of 2 to 6 vectors, only one vector by up to 7 rows, whose every broadcast
    feeds one FMA. At 736 (92 vectors) the tile is 5 x 2 vectors, at 1.1% more work: 3.70 against
    5.64-5.73 ms on one core (docs/schedules.md, "Tiles that fit the registers")."""
    return _fastest_padding(extent, range(extent, extent + extent // 8 + 1, lanes),
                            lambda cols: tile_rate(rows_extent, cols, lanes, registers))


def padded_matmul_rows(extent: int, cols_extent: int, lanes: int, registers: int) -> int:
    """The rows to compute for a dense layer of ``extent`` rows and ``cols_extent`` columns:
    ``extent``, or the extent up to a quarter (and a tile's height) more whose register tile
    advances the real rows fastest, where that is at least ``WIDER_TILE_GAIN`` times as fast.

    Tiles divide the rows, so a row count with no divisor from 2 to 7 (ViT-B/16's 197 tokens,
    InceptionV3's 17x17 = 289 pixels flattened) gets a tile of one row, each weight vector loaded
    for one FMA: 197 x 768 -> 768 took 5.2-5.5 ms on one Zen 3 core, 196 rows 2.5-2.6 ms; 198
    rows are 33 tiles of 6 x 2 vectors (benchmarks/awkward_rows.py). The padded rows are a copy
    of the input: under one vector of columns, each input element feeds too little work to pay
    for it, and the rows stay; so do rows whose tile is already half as tall as a tile can be."""
    if cols_extent < lanes or register_tile(extent, cols_extent, lanes, registers)[0] >= max_rows(registers) // 2:
        return extent
    # Within a tile's height of the extent lies a multiple of every height a tile may have.
    last = extent + min(extent // 4, max_rows(registers) - 1)
    return _fastest_padding(extent, range(extent, last + 1), lambda rows: tile_rate(rows, cols_extent, lanes, registers))


def padded_free_rows(extent: int, cols_extent: int, lanes: int, registers: int) -> int:
    """The rows to compute for a matmul whose extra rows cost their work alone (no copy: Winograd's
    tiles, whose input transform writes the rows past the real ones as zeros): the extent up to a
    tile's height more whose register tile advances the real rows fastest, where that is at least
    ``WIDER_TILE_GAIN`` times as fast. InceptionV3's 1x7 convolutions as F(2, 7) have 153 rows
    (17 x 9 tiles), a 3-row tile of 2 AVX2 vectors over 160 columns: 154 rows take 2 x 5."""
    last = extent + max_rows(registers) - 1
    return _fastest_padding(extent, range(extent, last + 1), lambda rows: tile_rate(rows, cols_extent, lanes, registers))


def _fastest_padding(extent: int, candidates: range, rate: Callable[[int], float]) -> int:
    """The candidate extent whose tile ``rate``, times the share of it that is real, is highest,
    where that beats ``extent``'s own by ``WIDER_TILE_GAIN``; else ``extent``."""
    def useful(padded: int) -> float:
        return rate(padded) * extent / padded

    best = max(candidates, key=lambda padded: (useful(padded), -padded))
    return best if useful(best) >= WIDER_TILE_GAIN * useful(extent) else extent


def column_block(col_tiles: int, strip_bytes: int, input_bytes: int, l2_bytes: int) -> int:
    """Column tiles per cache block, when the column tiles run outside the rows: one where the
    input stays in half of a core's L2 across the column tiles; otherwise the largest divisor of
    ``col_tiles`` whose weight strips (``strip_bytes`` each) fit in half of it, so that each row
    tile of the input, read once per block instead of once per column tile, comes from beyond the
    L2 that many times less."""
    if input_bytes <= l2_bytes // 2:
        return 1
    return max(d for d in divisors(col_tiles) if d == 1 or d * strip_bytes <= l2_bytes // 2)


def depthwise_tile(rows_extent: int, cols_extent: int, lanes: int, budget: int) -> tuple[int, int]:
    """(rows, cols) of a depthwise convolution's register tile: one vector of channels, up to 7 output columns.

    A depthwise tile reuses nothing across channels, and with its 3x3 window unrolled the inputs of
    neighbouring output columns are the same loads: a tile of 7 columns keeps 7 accumulators, the 9
    inputs and the 3 weights of a window row in registers. The contraction rule's tile (14 x 2
    vectors with AVX-512) spilled: MobileNetV2's 56x56x144 layer took 155 us serially against
    42 us with 7 x 1, on AVX2 as on AVX-512 (``budget`` does not change the choice).
    """
    del budget
    return row_tile(rows_extent, DEPTHWISE_MAX_ROWS), vector_tile(cols_extent, lanes, 1)


def vector_width(extent: int, lanes: int) -> int:
    """Width of the vectors a tile of ``extent`` columns is cut into: a power of two up to ``lanes``.

    Vectors of other widths (24 or 48 floats) make LLVM shuffle element by element, which was 60x
    slower on a 1x1 convolution, so 24 becomes three 8-wide vectors and an odd extent gets 1 (scalar).
    """
    return _alignment(extent, lanes)
