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
    accumulators, one weight vector and a broadcast input in ``registers``, on the stack)."""
    return max(1, min(MAX_ACCUMULATORS, registers - 2))


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


def register_tile(rows_extent: int, cols_extent: int, lanes: int, registers: int) -> tuple[int, int]:
    """(rows, cols) of a register tile of accumulators for a target with ``registers`` vector registers.

    Among the tiles that divide both extents, whose accumulators, weight vectors
    (``weight_registers``) and one broadcast input fit the registers (a 7 x 4-vector AVX-512 tile
    needs 33 and spilled: MobileNetV2's 7x7x320 -> 1280 convolution took 2.3x the time of 7 x 2) and that stay
    on the stack (``MAX_ACCUMULATORS``), the one with the best ``_tile_throughput``; then the most
    accumulators, the fewest loads per step, the most rows (docs/schedules.md, "1x1 convolutions").
    """
    best, best_key = (1, vector_tile(cols_extent, lanes, 1)), None
    for rows in divisors(rows_extent):
        for vectors in range(1, MAX_VECTORS + 1):
            cols = vector_tile(cols_extent, lanes, vectors)
            width = _registers(cols, lanes)
            accumulators = rows * width
            if accumulators > MAX_ACCUMULATORS or accumulators + weight_registers(rows, width) + 1 > registers:
                continue
            key = (_tile_throughput(rows, cols, lanes), accumulators, -(rows + width), rows)
            if best_key is None or key > best_key:
                best, best_key = (rows, cols), key
    return best


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
