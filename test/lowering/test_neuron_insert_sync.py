"""neuron-insert-sync's dependence analysis, checked against brute force and against the race checker.

The overlap search must never miss a common byte (a missed one is a race on hardware) and should find no
common byte where there is none (a spurious one is a wait that costs time). Random loop nests of DMAs and
copies with affine, non-affine and register-bounded loop offsets are synchronised and then run by the
simulator with its race checker, which proves every conflicting pair of instances ordered.
"""

from __future__ import annotations

import itertools
import random

import pytest
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr
from xdsl.parser import Parser

from neuron_mlir.backend_trn.translate import build_program
from neuron_mlir.ir.context import make_context
from neuron_mlir.lowering.neuron_insert_sync import NeuronInsertSyncPass, _solvable
from neuron_mlir.runtime.simulator import run_program


def _brute_force(terms: list[tuple[int, int, int]], low: int, high: int) -> bool:
    ranges = [range(lo, hi + 1) for _, lo, hi in terms]
    return any(
        low <= sum(c * t for (c, _, _), t in zip(terms, values, strict=True)) <= high
        for values in itertools.product(*ranges)
    )


@pytest.mark.parametrize("seed", range(300))
def test_overlap_search_is_exact_on_small_systems(seed: int) -> None:
    rng = random.Random(seed)
    terms = []
    for _ in range(rng.randint(0, 3)):
        lo = rng.randint(-3, 3)
        terms.append((rng.choice([-1, 1]) * rng.randint(0, 40), lo, lo + rng.randint(0, 4)))
    low = rng.randint(-60, 60)
    high = low + rng.randint(0, 6)
    # at most 5**3 candidates: within the search budget, so the answer is exact, not merely safe
    assert _solvable(terms, low, high) == _brute_force(terms, low, high)


def test_overlap_search_answers_conflict_when_out_of_budget() -> None:
    # coprime coefficients over wide ranges: too many candidates to try, so "conflict" (safe)
    assert _solvable([(1000003, 0, 10_000), (999983, -10_000, 0), (7, 0, 3)], 5, 5)


def test_tile_interleaving_is_disjoint() -> None:
    # tile (i, j) of a 256x1024 fp32 matrix against tile (i, j + 128): the rows interleave, no byte is common
    row, column = 4096, 4
    terms = [(row, 0, 127), (column, 0, 127), (-row, 0, 127), (-column, 0, 127)]
    constant = 128 * column
    assert not _solvable(terms, 1 - 4 - constant, 4 - 1 - constant)
    assert _solvable(terms, 1 - 4 - 100 * column, 4 - 1 - 100 * column)


_HBM_ROWS, _HBM_COLUMNS = 24, 16
_SBUF_PARTITIONS, _SBUF_ROW = 64, 64


def _offset(rng: random.Random, loops: list[tuple[str, int, int]], lines: list[str], name: str, limit: int) -> str:
    """An index value in [0, limit] computed from the loop inductions (affine, or now and then not)."""
    value = f"%{name}_c"
    lines.append(f"{value} = arith.constant 0 : index")
    reach = 0
    for induction, _, upper in loops:
        coefficient = rng.choice([0, 0, 1, 2, 3, 4, 8, 16])
        if coefficient == 0 or reach + coefficient * (upper - 1) > limit:
            continue
        reach += coefficient * (upper - 1)
        scaled = f"%{name}_{induction[1:]}"
        lines.append(f"{scaled}_k = arith.constant {coefficient} : index")
        lines.append(f"{scaled} = arith.muli {induction}, {scaled}_k : index")
        lines.append(f"{scaled}_s = arith.addi {value}, {scaled} : index")
        value = f"{scaled}_s"
    if loops and rng.random() < 0.15:  # not affine: a remainder
        lines.append(f"%{name}_m = arith.constant {limit + 1} : index")
        lines.append(f"%{name}_r = arith.remsi {value}, %{name}_m : index")
        value = f"%{name}_r"
        reach = limit
    shift = rng.randint(0, limit - reach)
    lines.append(f"%{name}_b = arith.constant {shift} : index")
    lines.append(f"%{name} = arith.addi {value}, %{name}_b : index")
    return f"%{name}"


def _random_program(seed: int) -> str:
    rng = random.Random(seed)
    lines: list[str] = []
    hbm = f"memref<{_HBM_ROWS}x{_HBM_COLUMNS}xf32, #mem<hbm>>"
    sbuf = f"memref<{_SBUF_PARTITIONS}x{_SBUF_ROW}xf32, #mem<sbuf>>"
    lines.append(f"%s0 = neuron.alloc {{address = 0 : i64}} : {sbuf}")
    lines.append(f"%s1 = neuron.alloc {{address = {rng.choice([0, 128, 256])} : i64}} : {sbuf}")
    lines.append(
        f"neuron.memset vector dst %s0[0:{_SBUF_PARTITIONS}, 0, [[1, {_SBUF_ROW}]]] {{value = 1.0 : f64}} : {sbuf}"
    )
    loops: list[tuple[str, int, int]] = []  # (induction, lower, upper) of the open loops
    closing: list[str] = []
    counter = itertools.count()
    for _ in range(rng.randint(4, 12)):
        action = rng.random()
        if action < 0.2 and len(loops) < 2:
            trips = rng.choice([1, 2, 3, 4])
            induction = f"%i{next(counter)}"
            lines.append(f"{induction}_ub = arith.constant {trips} : index")
            upper = f"{induction}_ub"
            if loops and rng.random() < 0.3:  # a bound computed from the outer induction: not a constant
                lines.append(f"{induction}_ub2 = arith.addi {loops[-1][0]}, {upper} : index")
                upper = f"{induction}_ub2"
                trips += loops[-1][2] - 1
            lines.append(f"scf.for {induction} = %zero to {upper} step %one {{")
            loops.append((induction, 0, trips))
            closing.append("}")
            continue
        if action < 0.3 and loops:
            loops.pop()
            lines.append(closing.pop())
            continue
        n = next(counter)
        rows, columns = rng.randint(1, 8), rng.randint(1, 8)
        kind = rng.random()
        # compute engines start at a multiple of 32 partitions; DMAs anywhere
        p0 = rng.choice([0, 32]) if kind >= 0.7 or rng.random() < 0.5 else rng.randint(0, _SBUF_PARTITIONS - rows)
        on_chip = rng.choice(["%s0", "%s1"])
        chip_offset = _offset(rng, loops, lines, f"c{n}", _SBUF_ROW - columns)
        chip = f"{on_chip}[{p0}:{p0 + rows}, {chip_offset} + 0, [[1, {columns}]]]"
        if kind < 0.7:
            hbm_offset = _offset(rng, loops, lines, f"h{n}", (_HBM_ROWS - rows) * _HBM_COLUMNS + _HBM_COLUMNS - columns)
            memory = f"%y[{hbm_offset} + 0, [[{_HBM_COLUMNS}, {rows}], [1, {columns}]]]"
            queue = rng.randint(0, 3)
            if kind < 0.35:
                lines.append(f"neuron.dma_copy dma dst {chip}, src {memory} {{queue = {queue} : i64}} : {sbuf}, {hbm}")
            else:
                lines.append(f"neuron.dma_copy dma dst {memory}, src {chip} {{queue = {queue} : i64}} : {hbm}, {sbuf}")
        else:
            other = rng.choice(["%s0", "%s1"])
            second = _offset(rng, loops, lines, f"d{n}", _SBUF_ROW - columns)
            engine = rng.choice(["vector", "scalar", "gpsimd"])
            lines.append(
                f"neuron.tensor_copy {engine} dst {other}[{p0}:{p0 + rows}, {second} + 0, [[1, {columns}]]], "
                f"src {chip} : {sbuf}, {sbuf}"
            )
    lines += reversed(closing)
    body = "\n    ".join(lines)
    return f"""
builtin.module {{
  func.func @main(%y: {hbm}) {{
    %zero = arith.constant 0 : index
    %one = arith.constant 1 : index
    {body}
    func.return
  }}
}}
"""


@pytest.mark.parametrize("seed", range(400))
def test_random_loop_nests_have_no_race(seed: int) -> None:
    import numpy as np

    ctx = make_context()
    module = Parser(ctx, _random_program(seed)).parse_module()
    module.verify()
    NeuronInsertSyncPass().apply(ctx, module)
    program = build_program(module, "main")
    data = np.random.default_rng(seed).standard_normal((_HBM_ROWS, _HBM_COLUMNS)).astype(np.float32)
    run_program(program, [data], check_races=True)  # raises RaceError on an unordered conflicting pair


def _waits(module: object) -> list[tuple[int, tuple[int, ...]]]:
    from neuron_mlir.ir.dialects.neuron import InstructionOp

    found = []
    for op in module.walk():  # type: ignore[attr-defined]
        if isinstance(op, InstructionOp):
            waits = op.properties.get("waits")
            number = op.properties["id"]
            assert isinstance(number, IntegerAttr)
            assert waits is None or isinstance(waits, DenseArrayBase)
            found.append((number.value.data, tuple(waits.get_values()) if waits is not None else ()))
    return found


@pytest.mark.parametrize("seed", range(150))
def test_record_index_picks_the_waits_a_full_scan_picks(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # The index only narrows which records are tested: with every query going through it (no group is small
    # enough to be scanned whole), the waits are the ones found by testing every record.
    from neuron_mlir.lowering import neuron_insert_sync

    results = []
    for scan_all in (10**9, 0):
        monkeypatch.setattr(neuron_insert_sync, "_SCAN_ALL", scan_all)
        ctx = make_context()
        module = Parser(ctx, _random_program(seed)).parse_module()
        NeuronInsertSyncPass().apply(ctx, module)
        results.append(_waits(module))
    assert results[0] == results[1]


@pytest.mark.parametrize("seed", range(50))
def test_record_index_returns_every_overlapping_record(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from neuron_mlir.lowering import neuron_insert_sync
    from neuron_mlir.lowering.neuron_insert_sync import Records, _State
    from neuron_mlir.runtime.hardware import Memory

    monkeypatch.setattr(neuron_insert_sync, "_SCAN_ALL", 0)  # every query through the index

    rng = random.Random(seed)
    state = _State()

    def footprint() -> (
        neuron_insert_sync.Footprint
    ):  # a dense or strided access of 1 to 4 byte elements somewhere in 64 KiB
        size = rng.choice([1, 2, 4])
        dims = tuple(
            sorted(((rng.randint(1, 600) * size, rng.randint(2, 40)) for _ in range(rng.randint(0, 2))), reverse=True)
        )
        key = (Memory.SBUF, None, 0, 1, rng.randint(-100, 65536), size, dims, (), True)
        return state._make(key, exact_offset=True)

    records = Records()
    kept = []
    for sequence in range(300):
        key = (("vector", 0), footprint(), (), ())
        records.set(key, (sequence, sequence))
        kept.append(key)
        if rng.random() < 0.3:
            records.remove(kept.pop(rng.randrange(len(kept))))
        query = footprint()
        expected = {k for k in kept if k[1].full_low < query.full_high and query.full_low < k[1].full_high}
        found = records.overlapping(query)
        assert expected <= set(found)
        assert len(found) == len(set(found))
        assert set(found) <= set(kept)
