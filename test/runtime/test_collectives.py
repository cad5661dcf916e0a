"""Collectives between simulated cores (runtime/collectives.py): the in-process group of N ranks, programs whose
collective instructions exchange through it, the collective queue's overlap with compute, and the cost model
against hand-computed ring and tree formulas."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from neuron_mlir.runtime import collectives
from neuron_mlir.runtime.builder import ProgramBuilder
from neuron_mlir.runtime.collectives import CollectiveError, InProcessGroup
from neuron_mlir.runtime.hardware import TRN1, TRN2, Engine
from neuron_mlir.runtime.program import Instruction
from neuron_mlir.runtime.simulator import run_program


def _on_ranks(world: int, work, timeout: float = 60.0) -> list:
    """`work(rank)` on `world` threads, each with its rank's transport injected; results (or exceptions) by rank."""
    group = InProcessGroup(world, timeout=timeout)
    results: list = [None] * world

    def run(rank: int) -> None:
        with collectives.using(group.endpoint(rank)):
            try:
                results[rank] = work(rank)
            except Exception as error:  # reported per rank, as a process group reports it
                results[rank] = error

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(world)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_in_process_group_computes_every_collective():
    world = 4
    data = [np.arange(8, dtype=np.float32) + 10 * rank for rank in range(world)]
    everyone = (0, 1, 2, 3)

    def work(rank: int) -> dict[str, np.ndarray]:
        mine = data[rank]
        return {
            "sum": collectives.run("all_reduce", mine, everyone, "sum"),
            "avg": collectives.run("all_reduce", mine, everyone, "avg"),
            "max": collectives.run("all_reduce", mine, everyone, "max"),
            "gather": collectives.run("all_gather", mine, everyone),
            "scatter": collectives.run("reduce_scatter", mine, everyone, "sum"),
            "swap": collectives.run("all_to_all", mine, everyone),
            "pairs": collectives.execute("all_reduce", mine, ((0, 2), (1, 3)), "product"),
            "broadcast": collectives.run("broadcast", mine, everyone, root=2),
            "pair broadcast": collectives.execute("broadcast", mine, ((0, 2), (1, 3)), root=1),
        }

    results = _on_ranks(world, work)
    total = np.sum(data, axis=0)
    for rank, got in enumerate(results):
        np.testing.assert_array_equal(got["sum"], total)
        np.testing.assert_array_equal(got["avg"], total / world)
        np.testing.assert_array_equal(got["max"], data[-1])
        np.testing.assert_array_equal(got["gather"], np.concatenate(data))
        np.testing.assert_array_equal(got["scatter"], total[2 * rank : 2 * rank + 2])
        np.testing.assert_array_equal(got["swap"], np.concatenate([d[2 * rank : 2 * rank + 2] for d in data]))
        np.testing.assert_array_equal(got["pairs"], data[rank % 2] * data[rank % 2 + 2])
        np.testing.assert_array_equal(got["broadcast"], data[2])
        np.testing.assert_array_equal(got["pair broadcast"], data[rank % 2 + 2])  # the second rank of its pair


@pytest.mark.parametrize("world", [2, 4])
def test_ranks_that_disagree_fail_naming_the_collective(world):
    everyone = tuple(range(world))

    def work(rank: int) -> np.ndarray:
        return collectives.run("all_gather", np.zeros(3 + rank, np.float32), everyone, name="all_gather (line 7)")

    results = _on_ranks(world, work)
    for error in results:
        assert isinstance(error, CollectiveError)
        assert "all_gather (line 7)" in str(error)
        assert "same count and dtype" in str(error)


@pytest.mark.parametrize("world", [2, 4])
def test_a_missing_rank_times_out_instead_of_hanging(world):
    everyone, last = tuple(range(world)), world - 1

    def work(rank: int) -> np.ndarray | None:
        if rank == last:
            return None  # never joins the collective
        return collectives.run("all_reduce", np.ones(2, np.float32), everyone)

    results = _on_ranks(world, work, timeout=0.5)
    for error in results[:last]:
        assert isinstance(error, CollectiveError)
        assert "timed out" in str(error)
        assert f"[{last}]" in str(error)


def test_a_group_of_many_ranks_needs_a_transport():
    with pytest.raises(CollectiveError, match="no transport"):
        collectives.execute("all_reduce", np.ones(2, np.float32), ((0, 1),))
    alone = collectives.execute("all_gather", np.arange(3, dtype=np.float32), ((0,),))
    np.testing.assert_array_equal(alone, np.arange(3, dtype=np.float32))


def _allreduce_beside_compute(kb: int):
    """all_reduce of x (HBM) on the collective queue; independently, y goes through SBUF and VectorE."""
    b = ProgramBuilder("trn2")
    elements = kb * 256
    x, y = b.input("x", (elements,), "f32"), b.input("y", (128, 512), "f32")
    reduced, doubled = b.output("reduced", (elements,), "f32"), b.output("doubled", (128, 512), "f32")
    tile = b.sbuf("tile", (128, 512), "f32")
    groups = ((0, 1),)
    b.inst("all_reduce", Engine.COLLECTIVE, {"src": b.ap(x), "dst": b.ap(reduced)}, {"replica_groups": groups}, id=0)
    b.dma(b.ap(tile), b.ap(y), queue=0, id=1)
    b.inst("tensor_scalar", Engine.VECTOR, {"src": b.ap(tile), "dst": b.ap(tile)}, {"op0": "multiply", "scalar0": 2.0},
           waits=[1], id=2)  # fmt: skip
    b.dma(b.ap(doubled), b.ap(tile), queue=1, waits=[2], id=3)
    return b.build()


def test_a_compiled_collective_exchanges_and_overlaps_independent_work():
    program = _allreduce_beside_compute(kb=64)
    xs = [np.random.default_rng(rank).standard_normal(64 * 256).astype(np.float32) for rank in range(2)]
    ys = [np.full((128, 512), rank + 1, np.float32) for rank in range(2)]
    results = _on_ranks(2, lambda rank: run_program(program, [xs[rank], ys[rank]]))
    for rank, (outputs, profile) in enumerate(results):
        np.testing.assert_array_equal(outputs[0], xs[0] + xs[1])
        np.testing.assert_array_equal(outputs[1], ys[rank] * 2)
        collective = profile.busy_ns["collective"]
        message = 64 * 256 * 4
        assert collective == pytest.approx(collectives.collective_ns("all_reduce", message, (0, 1), TRN2))
        # the collective queue runs beside the DMA queues and VectorE: the run is shorter than the sum
        others = sum(ns for queue, ns in profile.busy_ns.items() if queue != "collective")
        assert profile.total_ns < collective + others
        assert collective <= profile.total_ns
        trace = profile.chrome_trace()
        assert any(e.get("args", {}).get("name") == "Collectives" for e in trace["traceEvents"])


def test_a_collective_survives_the_bundle():
    from neuron_mlir.runtime import bundle

    program = _allreduce_beside_compute(kb=1)
    back = bundle.read_bundle(bundle.encode_bundle(program))  # validated as it is read
    assert bundle.programs_equal(program, back)
    (collective,) = [node for node in back.body if isinstance(node, Instruction) and node.opcode == "all_reduce"]
    assert collective.engine is Engine.COLLECTIVE
    assert collective.attrs["replica_groups"] == ((0, 1),)


def test_ring_and_tree_times_follow_their_formulas():
    # trn2: a core's NeuronLink share is 1280 GB/s / 8 cores = 160 B/ns, a step 2 us
    link = collectives.link_for((0, 1, 2, 3), TRN2)
    assert (link.name, link.bytes_per_ns, link.step_ns) == ("neuronlink", 160.0, 2000.0)
    s, n = 64 * 2**20, 4
    assert collectives.ring_ns("all_reduce", s, n, link) == pytest.approx(2 * 3 * (2000 + s / (4 * 160)))
    assert collectives.ring_ns("all_gather", s, n, link) == pytest.approx(3 * (2000 + s / (4 * 160)))
    assert collectives.ring_ns("reduce_scatter", s, n, link) == pytest.approx(3 * (2000 + s / (4 * 160)))
    assert collectives.ring_ns("all_to_all", s, n, link) == pytest.approx(3 * (2000 + s / (4 * 160)))
    assert collectives.tree_ns("all_reduce", s, n, link) == pytest.approx(2 * 2 * 2000 + 2 * s / 160)
    assert collectives.tree_ns("all_gather", s, n, link) == pytest.approx(2 * 2000 + 3 * s / (4 * 160))
    assert collectives.tree_ns("all_to_all", s, n, link) == pytest.approx(2 * (2000 + s / (2 * 160)))
    assert collectives.ring_ns("broadcast", s, n, link) == pytest.approx(2 * 3 * (2000 + s / (4 * 160)))
    assert collectives.tree_ns("broadcast", s, n, link) == pytest.approx(2 * (2000 + s / 160))
    assert collectives.ring_ns("all_reduce", s, 1, link) == collectives.tree_ns("all_reduce", s, 1, link) == 0


def test_the_cost_picks_the_faster_algorithm_and_the_slower_link():
    big, small = 256 * 2**20, 4096
    ranks = tuple(range(8))
    # 8 ranks: the ring moves 14/8 S / B against the tree's 2 S / B in 14 steps against 6: the ring wins above
    # 8 * 2000 ns x 1280 B/ns / 2 = 10 MiB, the tree below
    assert collectives.collective_cost("all_reduce", big, ranks, TRN2).algorithm == "ring"
    assert collectives.collective_cost("all_reduce", small, ranks, TRN2).algorithm == "tree"
    # trn2: 128 cores an instance, so 256 ranks span two and cross EFA (400 GB/s / 128 cores = 3.125 B/ns)
    across = collectives.collective_cost("all_reduce", big, tuple(range(256)), TRN2)
    within = collectives.collective_cost("all_reduce", big, tuple(range(128)), TRN2)
    assert (within.link, across.link) == ("neuronlink", "efa")
    efa = collectives.link_for(tuple(range(256)), TRN2)
    assert efa.bytes_per_ns == pytest.approx(400 / 128)
    ring = 2 * 255 * (10_000 + big / (256 * efa.bytes_per_ns))
    tree = 2 * 8 * 10_000 + 2 * big / efa.bytes_per_ns
    # hierarchical: reduce-scatter and all-gather among the 128 cores of an instance over NeuronLink (here the tree
    # form: 7 steps against the ring's 127), then the 2 instances' blocks of big / 128 bytes over EFA (ring of 2)
    within_ring, within_tree = 127 * (2000 + big / (128 * 160)), 7 * 2000 + 127 * big / (128 * 160)
    assert within_tree < within_ring
    block = big / 128
    between = min(2 * (10_000 + block / (2 * efa.bytes_per_ns)), 2 * 10_000 + 2 * block / efa.bytes_per_ns)
    assert across.algorithm == "hierarchical"
    assert across.ns == pytest.approx(2 * within_tree + between)
    assert across.ns < tree < ring
    # all_gather across instances: the peers' blocks over EFA, then the instance's over NeuronLink
    gather = collectives.collective_cost("all_gather", big, tuple(range(256)), TRN2)
    gather_between = 10_000 + block / (2 * efa.bytes_per_ns)  # ring and tree agree for 2 ranks
    assert gather.ns == pytest.approx(gather_between + within_tree)
    # all_to_all and unequal shares of two instances (128 + 1 ranks) have no hierarchical form
    assert collectives.hierarchical_ns("all_to_all", big, tuple(range(256)), TRN2) is None
    assert collectives.hierarchical_ns("all_reduce", big, tuple(range(129)), TRN2) is None
    # trn1: 32 cores an instance; NeuronLink-v2 384 GB/s over 2 cores
    assert collectives.link_for((0, 31), TRN1).bytes_per_ns == pytest.approx(192.0)
    assert collectives.link_for((0, 32), TRN1).name == "efa"


def test_an_uneven_all_to_all_is_priced_by_the_blocks_that_cross_the_link():
    group, block = (0, 1, 2, 3), 2**20
    a, per_block = 2000.0, block / 160.0  # trn2 NeuronLink: a step, and a block's time at a core's 160 B/ns
    # equal counts are the even exchange, however written
    even = collectives.uneven_all_to_all_cost([block] * 4, [block] * 4, group, TRN2)
    expected = collectives.collective_cost("all_to_all", 4 * block, group, TRN2)
    assert (even.algorithm, even.link) == (expected.algorithm, expected.link)
    assert even.ns == pytest.approx(expected.ns)
    # one peer gets ten blocks: every send posted at once, the outgoing side carries 12 blocks (the own one stays);
    # the padded Bruck form would move 4 x 10 blocks per step
    skewed = collectives.uneven_all_to_all_cost([block, 10 * block, block, block], [block] * 4, group, TRN2)
    assert skewed.algorithm == "ring"
    assert skewed.ns == pytest.approx(3 * a + 12 * per_block)
    assert skewed.ns > collectives.collective_ns("all_to_all", 13 * block, group, TRN2)  # the even price, as before
    # which block is the rank's own the counts do not say (ranks 0, 2 or 3 here): the highest price is taken, as
    # rank 2, whose link then carries 11 blocks in
    sent, received = [8 * block, block, block, block], [8 * block, 2 * block, block, block]
    assert collectives.uneven_all_to_all_cost(sent, received, group, TRN2).ns == pytest.approx(3 * a + 11 * per_block)
    # small blocks: the padded Bruck form's two steps beat the three of the direct one
    small = collectives.uneven_all_to_all_cost([64, 256, 64, 64], [64] * 4, group, TRN2)
    assert small.algorithm == "tree"
    assert small.ns == pytest.approx(2 * (a + 4 * 256 / (2 * 160.0)))
    # the cost model prices the instruction by its split counts (elements of 4 bytes)
    from neuron_mlir.runtime import cost_model

    b = ProgramBuilder("trn2")
    counts = (block // 4, 10 * block // 4, block // 4, block // 4)
    x, y = b.input("x", (sum(counts),), "f32"), b.output("y", (block,), "f32")
    b.inst("all_to_all", Engine.COLLECTIVE, {"src": b.ap(x), "dst": b.ap(y)},
           {"replica_groups": (group,), "input_splits": counts, "output_splits": (block // 16,) * 4})  # fmt: skip
    program = b.build()
    (instruction,) = [node for node in program.body if isinstance(node, Instruction)]
    priced = cost_model.instruction_cost(instruction, program.buffers, TRN2)
    assert priced == collectives.uneven_all_to_all_cost([4 * c for c in counts], [block / 4] * 4, group, TRN2).ns


def test_a_broadcast_root_outside_its_group_is_refused():
    with pytest.raises(CollectiveError, match=r"broadcast: root 2 is no position in the group \[0, 1\]"):
        _raise_first(_on_ranks(2, lambda rank: collectives.run("broadcast", np.zeros(2, np.float32), (0, 1), root=2)))


def _raise_first(results: list) -> None:
    for result in results:
        if isinstance(result, Exception):
            raise result


def test_an_uneven_all_to_all_moves_the_counts_each_rank_names():
    # rank 0 sends 1 element to itself and 3 to rank 1; rank 1 sends 2 to rank 0 and 2 to itself
    data = [np.arange(4, dtype=np.float32), np.arange(4, dtype=np.float32) + 10]
    splits = {0: ((1, 3), (1, 2)), 1: ((2, 2), (3, 2))}
    results = _on_ranks(2, lambda rank: collectives.run("all_to_all", data[rank], (0, 1), splits=splits[rank]))
    np.testing.assert_array_equal(results[0], [0, 10, 11])
    np.testing.assert_array_equal(results[1], [1, 2, 3, 12, 13])
    # a rank expecting another count than its peer sends: both fail, naming the counts
    wrong = {0: ((1, 3), (1, 2)), 1: ((2, 2), (2, 2))}
    results = _on_ranks(2, lambda rank: collectives.run("all_to_all", data[rank], (0, 1), splits=wrong[rank]))
    for result in results:
        assert isinstance(result, CollectiveError), result
        assert "rank 0 sends 3 elements to rank 1, which expects 2" in str(result)


def test_a_collective_that_fails_names_its_source_line_on_every_rank():
    def program(elements: int):
        b = ProgramBuilder("trn2")
        x, y = b.input("x", (elements,), "f32"), b.output("y", (elements,), "f32")
        b.inst("all_reduce", Engine.COLLECTIVE, {"src": b.ap(x), "dst": b.ap(y)}, {"replica_groups": ((0, 1),)},
               location="model.py:42")  # fmt: skip
        return b.build()

    programs = [program(8), program(6)]  # the ranks disagree on the element count
    results = _on_ranks(2, lambda rank: run_program(programs[rank], [np.zeros(8 - 2 * rank, np.float32)]))
    for result in results:
        assert isinstance(result, CollectiveError), result
        assert "same count and dtype" in str(result), str(result)
        assert str(result).endswith("(at model.py:42)"), str(result)
