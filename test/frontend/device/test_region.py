"""Deferred regions: eager ops recorded and run as one program give what running each alone gives, with views,
in-place writes and `out=` of pending results, tensors freed before the run, the flush points, the stream's time
and errors at the user's line."""

import pytest
import torch
from support import assert_close_to_torch

neuron = torch.get_device_module("neuron")


@pytest.fixture
def deferred(monkeypatch):
    from neuron_mlir.frontend.device import region

    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    monkeypatch.setenv("NEURON_MLIR_DEFER", "1")
    return region


def _warm(fn, *args):
    """`fn` run once so that its ops' programs are known (a region records only ops that have run before)."""
    fn(*args)
    neuron.synchronize()


def _assert_one_region(deferred, steps, device_input, host_input):
    """`steps` on the device, warm, runs as one region and gives what it gives on the host."""
    _warm(steps, device_input)
    runs = deferred.REGION_STATS["regions_run"]
    results = steps(device_input)
    for actual, expected in zip(results, steps(host_input), strict=True):
        assert_close_to_torch(actual.cpu(), expected)
    assert deferred.REGION_STATS["regions_run"] - runs == 1


def _ops(x, w):
    h = torch.relu(x @ w)
    h = h.reshape(2, -1)  # a reshape of a pending result: a view node in the region
    g = h.t().sum(dim=1)  # a transpose of it
    h.add_(1.0)  # in place on a pending result
    return h, g


def test_a_region_gives_the_values_of_the_ops_alone(deferred):
    x, w = torch.randn(4, 8), torch.randn(8, 6)
    dx, dw = x.to("neuron"), w.to("neuron")
    _warm(_ops, dx, dw)
    before = dict(deferred.REGION_STATS)
    h, s = _ops(dx, dw)
    assert deferred.pending_ops() > 0  # recorded, not run
    expected_h, expected_s = _ops(x, w)
    assert_close_to_torch(h.cpu(), expected_h, "in-place result of a reshape")  # .cpu() runs the region
    assert deferred.pending_ops() == 0
    assert_close_to_torch(s.cpu(), expected_s, "sum of a transpose")
    assert deferred.REGION_STATS["region_ops"] - before["region_ops"] == 4  # mm, relu, sum, add_


def test_a_recorded_ops_fresh_results_come_from_one_native_call(deferred, monkeypatch):
    """A recorded op's fresh results (a layer norm's output, mean and reciprocal deviation) are made together, in
    one native call, and hold the op's values once the region runs."""
    from neuron_mlir.frontend.device import storage

    torch.manual_seed(0)
    host = [torch.randn(4, 8), torch.randn(8), torch.randn(8)]
    device = [t.to("neuron") for t in host]

    def layer_norm(x, w, b):
        return torch.ops.aten.native_layer_norm(x, [8], w, b, 1e-5)

    _warm(layer_norm, *device)
    make = storage._fresh_tensors
    assert make is not None
    batches = []

    def counted(space, layouts, *rest):
        batches.append(len(layouts))
        return make(space, layouts, *rest)

    monkeypatch.setattr(storage, "_fresh_tensors", counted)
    runs = deferred.REGION_STATS["regions_run"]
    results = layer_norm(*device)
    assert batches == [3]
    assert deferred.pending_ops() == 1
    for actual, expected in zip(results, layer_norm(*host), strict=True):
        assert_close_to_torch(actual.cpu(), expected)
    assert deferred.REGION_STATS["regions_run"] - runs == 1


def _mixed_operands(x, y, w, z):
    """Ops whose operands take every kind of source: a new region input (with and without a kept array), the same
    input again, a pending value, a reshape, a transpose, a slice and an expand of one, a CPU scalar, a strided
    input before a new contiguous one, and pending bytes read as another dtype (which runs the region)."""
    a = x + y  # new inputs
    b = a * x  # a pending value, an input read already
    c = b.reshape(8, 4) @ w  # a reshape of a pending value, a new input
    d = c.t() + a  # a transpose
    e = b[1:] - b[:-1]  # slices
    f = e + torch.tensor(2.0)  # a CPU scalar
    g = y.t()[:4] + z  # a strided input, then a new input
    h = a[:1].expand(4, 8) * b  # an expand of a pending value
    i = h.view(torch.int32) + 1  # the pending bytes as another dtype: the region runs first
    return a, b, c, d, e, f, g, h, i


def test_native_sources_give_what_the_python_path_gives(deferred):
    """`native.sources_of` answers where `_source_of` would answer the same, and `native.record_fresh` registers
    fresh results as the Python loop does: the recorded ops' sources, the region's inputs in the same order and of
    the same types, the same flushes, and the same values."""
    from neuron_mlir.frontend.device import native

    sources_of, record_fresh = native.sources_of(), native.record_fresh()
    assert sources_of is not None
    assert record_fresh is not None
    torch.manual_seed(0)
    host = [torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 4), torch.randn(4, 4)]
    _warm(_mixed_operands, *[t.to("neuron") for t in host])
    recorded: dict[str, tuple[list[object], int, list[torch.Tensor]]] = {}
    answered: list[object] = []

    def counted(*args):
        found = sources_of(*args)
        answered.extend(s for s in found or () if s is not args[-1])
        return found

    try:
        for way, reader, registrar in (("native", counted, record_fresh), ("python", None, None)):
            deferred.use_native(reader, registrar)
            device = [t.to("neuron") for t in host]
            fresh = device[0] * 1.0  # a fresh result read whole: an array kept on its storage
            neuron.synchronize()
            device[0] = fresh
            snapshots: list[object] = []
            flushes = deferred.REGION_STATS["flushes"]
            original = deferred.flush

            def snapshot(snapshots=snapshots, original=original):
                region = deferred._region
                # id()s of blocks differ between the two runs: the input keys' other parts, by input index
                keys = sorted((index, key[1:]) for key, index in region.input_keys.items())
                # the pending values as registered: by value id, each one's place, type and source
                values = sorted(
                    (value, e.value, e.start, e.nbytes, e.dtype, tuple(e.shape), e.strides, e.source)
                    for value, (_, e) in region.stored.items()
                )
                held = sorted(len(entries) for _, entries in region.pending.values())
                ops = [(op.sources, op.values, [t.shape for t in op.targets]) for op in region.ops]
                snapshots.append((ops, list(region.input_types), keys, values, held))
                original()

            deferred.flush = snapshot
            try:
                results = _mixed_operands(*device)
                neuron.synchronize()
            finally:
                deferred.flush = original
            recorded[way] = (snapshots, deferred.REGION_STATS["flushes"] - flushes, [r.cpu() for r in results])
    finally:
        deferred.use_native(sources_of, record_fresh)
    assert answered, "the native reader answered none of the operands"
    assert recorded["native"][:2] == recorded["python"][:2]
    for native_result, python_result, expected in zip(
        recorded["native"][2], recorded["python"][2], _mixed_operands(*host), strict=True
    ):
        assert torch.equal(native_result, python_result)
        assert_close_to_torch(native_result, expected)


def test_the_same_region_again_is_found_in_the_cache(deferred):
    dx, dw = torch.randn(4, 8, device="neuron"), torch.randn(8, 6, device="neuron")
    _warm(_ops, dx, dw)
    _ops(dx, dw)
    neuron.synchronize()
    compiled = deferred.REGION_STATS["regions_compiled"]
    for _ in range(3):
        _ops(dx, dw)
        neuron.synchronize()
    assert deferred.REGION_STATS["regions_compiled"] == compiled


def test_a_transpose_of_a_square_pending_result_is_not_the_result(deferred):
    x = torch.randn(4, 4)
    dx = x.to("neuron")

    def steps(t):
        y = t + 1.0
        return y.t().sum(dim=1)  # the same bytes and shape as `y`, other strides

    _warm(steps, dx)
    assert_close_to_torch(steps(dx).cpu(), steps(x))


def test_copies_between_device_tensors_join_the_region(deferred):
    x = torch.randn(3, 5)
    dx = x.to("neuron")

    def steps(t):
        y = t * 2.0
        z = y.t().contiguous()  # a copy of a transposed pending result
        w = t.clone()  # a copy of a region input
        w.copy_(z.t())  # into a pending result, from a view of another
        return z + 1.0, w

    _warm(steps, dx)
    runs = deferred.REGION_STATS["regions_run"]
    z, w = steps(dx)
    assert deferred.pending_ops() == 5  # mul, three copies, add
    expected_z, expected_w = steps(x)
    assert_close_to_torch(z.cpu(), expected_z)
    assert_close_to_torch(w.cpu(), expected_w)
    assert deferred.REGION_STATS["regions_run"] - runs == 1


def test_results_stored_in_a_transposed_order(deferred):
    x = torch.randn(4, 6)

    def steps(t):
        y = (t + 1.0).t() * 2.0  # an elementwise op of a transpose keeps its strides: stored transposed
        z = y.sum(dim=1)  # read back at those strides
        y.t().add_(1.0)  # written through the other order: `y`'s bytes pending at two geometries
        return y.exp(), z

    _warm(steps, x.to("neuron"))
    dx = x.to("neuron")
    runs = deferred.REGION_STATS["regions_run"]
    results = steps(dx)
    for actual, expected in zip(results, steps(x), strict=True):
        assert_close_to_torch(actual.cpu(), expected)
    assert deferred.REGION_STATS["regions_run"] - runs == 2  # the read in the other order ran the first region


def test_slices_of_a_pending_result_join_the_region(deferred):
    x = torch.randn(6, 4)
    dx = x.to("neuron")

    def steps(t):
        y = t * 3.0
        return y[1:4] + 1.0, y[:, 1:3] * 2.0, y[2], y  # rows, a strided block, a row of the pending `y`

    _assert_one_region(deferred, steps, dx, x)


def test_expanded_pending_results_join_the_region(deferred):
    x = torch.randn(1, 6)
    dx = x.to("neuron")

    def steps(t):
        y = t + 1.0
        rows = y.expand(3, 6)  # rows repeated over the pending `y`: stride 0
        columns = (t * 2.0).t().expand(6, 4)  # a column repeated
        return torch.cat([rows, y]) * 2.0, columns - 1.0, y.expand(2, 3, 6).sum(dim=0)

    _assert_one_region(deferred, steps, dx, x)


def test_strided_operands_read_from_device_memory(deferred):
    """Operands of a region that are strided views of settled device memory (a transpose, every other column, a
    row of a 3-d tensor's transpose) are gathered dense as the region runs."""
    x = torch.randn(3, 6, 8)

    def steps(t):
        return t[1].t() @ t[2], t[:, :, 1::2] + 1.0, t.transpose(1, 2)[0].sum(dim=0)

    _assert_one_region(deferred, steps, x.to("neuron"), x)


def test_a_strided_operands_gather_is_kept_and_reads_the_bytes_of_each_run(deferred):
    """A strided operand's gather is kept on its storage and found by the next region that reads the same view (a
    transposed weight, step after step); it reads the bytes as they are when each region runs (an in-place update
    between the regions shows), and a resize of the storage drops it with the old block."""
    w = torch.randn(6, 4)
    dw = w.to("neuron")
    x = torch.randn(3, 6)
    dx = x.to("neuron")

    def steps(t, weight):
        return ((t @ weight) @ weight.t(),)

    _warm(steps, dx, dw)
    stored = dw.untyped_storage()
    kept = getattr(stored, deferred._GATHERS_ATTRIBUTE)
    assert len(kept) == 1
    (gather,) = [found for _, found in kept.values()]
    for update in (1.0, -2.5):
        dw.add_(update)  # in place, settled before the next region: its gather reads the new bytes
        neuron.synchronize()
        w.add_(update)
        runs = deferred.REGION_STATS["regions_run"]
        (result,) = steps(dx, dw)
        assert_close_to_torch(result.cpu(), steps(x, w)[0])
        assert deferred.REGION_STATS["regions_run"] - runs == 1
        assert [found for _, found in getattr(stored, deferred._GATHERS_ATTRIBUTE).values()] == [gather]
    stored.resize_(stored.nbytes())  # a new block with the same bytes
    assert not hasattr(stored, deferred._GATHERS_ATTRIBUTE)
    assert_close_to_torch(steps(dx, dw)[0].cpu(), steps(x, w)[0])


def test_strided_layouts_are_remembered_as_worked_out(deferred, monkeypatch):
    """The permuted view and the span of a strided operand's layout are remembered per layout, and are what working
    them out gives: transposes and permutations of dense tensors, sizes of one, repeated elements, gaps."""
    from neuron_mlir.frontend.device import storage

    monkeypatch.setattr(deferred, "_PERMUTED_VIEWS", {})
    monkeypatch.setattr(deferred, "_SPANS", {})
    base = torch.empty(4, 3, 5, 2)
    views = [
        base.permute(2, 0, 3, 1),
        base.transpose(0, 3),
        base[:, :1].permute(1, 0, 2, 3),
        base[:, :, ::2],
        base[:1, 0].expand(6, 5, 2),
        base.reshape(12, 10).t(),
        torch.empty(7, 1).t(),
    ]
    for view in views:
        shape, strides = tuple(view.shape), tuple(view.stride())
        found = deferred._permutation(shape, strides)
        expected = None
        if found is not None:
            dims, order = found
            expected = ("permute", tuple(order), tuple(dims.index(d) for d in range(len(shape))))
            assert base.new_empty(order).permute(expected[2]).stride() == strides
        assert deferred._permuted_view(shape, strides) == expected
        assert deferred._permuted_view(shape, strides) is deferred._PERMUTED_VIEWS[(shape, strides)]
        span = storage.storage_nbytes(shape, strides, 4)
        assert deferred._span_bytes(view.shape, view.stride(), 4) == span
    monkeypatch.setattr(deferred, "_PERMUTED_VIEWS", {})
    monkeypatch.setattr(deferred, "_SPANS", {})
    monkeypatch.setattr(deferred, "_LAYOUTS_KEPT", 2)  # a bounded memory: past it, it starts afresh
    for view in views:
        deferred._permuted_view(tuple(view.shape), tuple(view.stride()))
        deferred._span_bytes(view.shape, view.stride(), 4)
    assert len(deferred._PERMUTED_VIEWS) <= 2
    assert len(deferred._SPANS) <= 2


def test_an_empty_out_tensor_is_resized_into_the_region(deferred):
    x = torch.randn(5)
    dx = x.to("neuron")

    def steps(t, out):
        y = t * 2.0
        torch.arange(1, 6, out=out)  # `out` has no elements: resized to the result, as the op alone does
        return y + out, out

    _warm(steps, dx, torch.empty(0, device="neuron"))
    runs = deferred.REGION_STATS["regions_run"]
    out = torch.empty(0, device="neuron")
    allocated = neuron.memory_allocated()
    results = steps(dx, out)
    assert deferred.pending_ops() > 0
    assert out.shape == (5,)
    for actual, expected in zip(results, steps(x, torch.empty(0)), strict=True):
        assert_close_to_torch(actual.cpu(), expected)
    assert deferred.REGION_STATS["regions_run"] - runs == 1
    del results
    assert neuron.memory_allocated() - allocated == out.untyped_storage().nbytes()


def test_pending_bytes_read_as_another_dtype_run_the_region_first(deferred):
    x = torch.randn(6, 4)
    dx = x.to("neuron")

    def steps(t):
        y = t * 3.0
        return y.view(torch.int32) + 1, y

    _warm(steps, dx)
    runs = deferred.REGION_STATS["regions_run"]
    bits, whole = steps(dx)
    assert deferred.pending_ops() == 0  # the region ran before the add, which ran alone
    assert deferred.REGION_STATS["regions_run"] - runs == 1
    expected_bits, expected_whole = steps(x)
    assert torch.equal(bits.cpu(), expected_bits)
    assert_close_to_torch(whole.cpu(), expected_whole)


def test_in_place_and_out_on_region_inputs_and_results(deferred):
    x = torch.randn(5, 3)

    def steps(t, out):
        t.mul_(2.0)  # an input written in place: later reads see the new value
        torch.add(t, 1.0, out=out)
        out.sub_(t)
        t.add_(out)
        return t, out

    device_out = torch.empty(5, 3, device="neuron")
    _warm(steps, x.to("neuron"), device_out)
    device_x = x.to("neuron")
    steps(device_x, device_out)
    host_x, host_out = steps(x.clone(), torch.empty(5, 3))
    assert_close_to_torch(device_x.cpu(), host_x)
    assert_close_to_torch(device_out.cpu(), host_out)


def test_results_go_straight_into_memory_the_region_reads(deferred, monkeypatch):
    """An optimizer step's region reads the parameters and their momentum and writes both: where no output of its
    program is an input's buffer, the simulator hands the new values straight to their memory after the run (no
    array of its own in between), and they are the host's."""
    from neuron_mlir.frontend.compile_graph import CompiledGraph

    param, momentum, grad = torch.randn(6, 8), torch.randn(6, 8), torch.randn(6, 8)

    def steps(p, m, g):
        m.mul_(0.9).add_(g)
        p.add_(m, alpha=-0.1)
        return p, m

    _warm(steps, param.to("neuron"), momentum.to("neuron"), grad.to("neuron"))
    given = []
    run_arrays = CompiledGraph.run_arrays

    def spy(self, arguments, sizes=None, into=()):
        given.append(list(into))
        return run_arrays(self, arguments, sizes, into)

    monkeypatch.setattr(CompiledGraph, "run_arrays", spy)
    p, m = param.to("neuron"), momentum.to("neuron")
    steps(p, m, grad.to("neuron"))
    neuron.synchronize()
    host_p, host_m = steps(param.clone(), momentum.clone(), grad)
    assert_close_to_torch(p.cpu(), host_p)
    assert_close_to_torch(m.cpu(), host_m)
    (into,) = given
    places = {array.__array_interface__["data"][0] for array in into if array is not None}
    assert places == {p.untyped_storage().data_ptr(), m.untyped_storage().data_ptr()}


def test_a_result_freed_before_the_run_is_not_stored_and_memory_stays_exact(deferred):
    dx = torch.randn(64, 64, device="neuron")

    def steps(t):
        a = t * 2.0
        b = a + 1.0
        del a
        return b.exp()

    _warm(steps, dx)
    start = neuron.memory_allocated()
    result = steps(dx)
    # `a` and `b` died while pending: their memory is given back at once, and only the result's is held
    assert neuron.memory_allocated() - start == result.numel() * result.element_size()
    assert_close_to_torch(result.cpu(), (dx.cpu() * 2.0 + 1.0).exp())


@pytest.mark.parametrize(
    "observe",
    [
        lambda t: t.sum().item(),
        lambda t: t.tolist(),
        lambda t: repr(t),
        lambda t: neuron.synchronize(),
        lambda t: t.to("cpu"),
        lambda t: t.nonzero(),  # its size depends on the values: an op on the host
    ],
    ids=["item", "tolist", "print", "synchronize", "copy to the host", "size-dependent op"],
)
def test_observing_a_value_runs_the_region(deferred, observe):
    dx = torch.randn(3, 4, device="neuron")
    _warm(lambda t: torch.tanh(t) * 2.0, dx)
    y = torch.tanh(dx) * 2.0
    assert deferred.pending_ops() > 0
    observe(y)
    assert deferred.pending_ops() == 0
    assert_close_to_torch(y.cpu(), torch.tanh(dx.cpu()) * 2.0)


def test_backward_and_optimizer_step_end_their_regions(deferred):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    reference.load_state_dict(model.state_dict())
    model.to("neuron")
    x, labels = torch.randn(4, 8), torch.tensor([0, 2, 1, 2])
    dx, dlabels = x.to("neuron"), labels.to("neuron")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    host_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for _ in range(3):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(dx), dlabels).backward()
        assert deferred.pending_ops() == 0  # the backward's end ran its region
        optimizer.step()
        assert deferred.pending_ops() == 0  # and so did the step's end
        host_optimizer.zero_grad()
        torch.nn.functional.cross_entropy(reference(x), labels).backward()
        host_optimizer.step()
    assert deferred.REGION_STATS["regions_run"] >= 2
    for device_parameter, host_parameter in zip(model.parameters(), reference.parameters(), strict=True):
        assert_close_to_torch(device_parameter.detach().cpu(), host_parameter.detach(), "parameter after 3 steps")


def test_a_change_of_stream_starts_a_region(deferred):
    dx = torch.randn(4, 4, device="neuron")
    _warm(lambda t: t * 3.0, dx)
    first = dx * 3.0
    with neuron.stream(neuron.Stream()):
        second = first * 3.0  # recorded into a new region, after the first one ran
    assert_close_to_torch(second.cpu(), dx.cpu() * 9.0)
    assert_close_to_torch(first.cpu(), dx.cpu() * 3.0)


def test_the_region_length_limit(deferred, monkeypatch):
    monkeypatch.setenv("NEURON_MLIR_REGION_OPS", "2")
    dx = torch.randn(4, device="neuron")
    _warm(lambda t: t + 1.0, dx)
    runs = deferred.REGION_STATS["regions_run"]
    y = dx
    for _ in range(4):
        y = y + 1.0
    assert deferred.REGION_STATS["regions_run"] - runs == 2
    assert_close_to_torch(y.cpu(), dx.cpu() + 4.0)


def test_simulated_time_and_time_per_line(deferred):
    from neuron_mlir.frontend.device import sources

    dx = torch.randn(16, 16, device="neuron")
    _warm(lambda t: (t @ t).relu(), dx)
    start, end = neuron.Event(enable_timing=True), neuron.Event(enable_timing=True)
    calls = sum(e.calls for e in sources.EAGER_TIMES.values())
    start.record()
    y = (dx @ dx).relu()
    end.record()  # runs the region: its time lies between the events
    assert deferred.last_program.name.endswith("eager_region")
    assert start.elapsed_time(end) == pytest.approx(deferred.last_program.last_profile.total_ns / 1e6)
    assert sum(e.calls for e in sources.EAGER_TIMES.values()) - calls == 2  # each op counted at its own line
    assert_close_to_torch(y.cpu(), (dx.cpu() @ dx.cpu()).relu())


def test_an_op_that_fails_in_a_region_names_its_line(deferred, monkeypatch):
    from neuron_mlir.frontend.compile_graph import CompiledGraph

    dx = torch.randn(4, 4, device="neuron")
    _warm(lambda t: torch.exp(t) + 1.0, dx)

    def fail(*args, **kwargs):
        raise RuntimeError("simulated failure")

    monkeypatch.setattr(deferred, "_run", fail)  # the region's program fails: its ops run one by one
    run_arrays = CompiledGraph.run_arrays

    def exp_fails(self, *args, **kwargs):
        if self.name.endswith("_exp_default"):
            fail()
        return run_arrays(self, *args, **kwargs)

    monkeypatch.setattr(CompiledGraph, "run_arrays", exp_fails)
    y = torch.exp(dx) + 1.0
    with pytest.raises(RuntimeError, match="simulated failure") as raised:
        y.cpu()
    assert any("test_region.py:" in note and "exp" in note for note in raised.value.__notes__)


def test_errors_still_raise_at_the_users_line(deferred):
    dx, dw = torch.randn(4, 8, device="neuron"), torch.randn(8, 6, device="neuron")
    _warm(_ops, dx, dw)
    _ops(dx, dw)
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        dx @ dx  # checked when issued, not when the region runs
    h, _ = _ops(dx, dw)
    assert_close_to_torch(h.cpu(), _ops(dx.cpu(), dw.cpu())[0])


def test_deferral_off(monkeypatch, fresh_eager):
    from neuron_mlir.frontend.device import region

    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    monkeypatch.setenv("NEURON_MLIR_DEFER", "0")
    dx = torch.randn(4, device="neuron")
    for _ in range(2):
        y = dx * 2.0
        assert region.pending_ops() == 0
    assert_close_to_torch(y.cpu(), dx.cpu() * 2.0)


def test_a_constant_op_outside_a_region_replays_its_first_run(deferred, monkeypatch):
    """`fill_` and `zero_` read no operand's value: outside a region (the gradient `loss.backward()` makes before
    a compiled backward graph) the first run's outputs are kept and written again, with the run's simulated time;
    inside a region they are recorded like any op."""
    from neuron_mlir.frontend.compile_graph import CompiledGraph

    runs: list[str] = []
    run_arrays = CompiledGraph.run_arrays

    def counted(self, *args, **kwargs):
        runs.append(self.name)
        return run_arrays(self, *args, **kwargs)

    monkeypatch.setattr(CompiledGraph, "run_arrays", counted)
    target = torch.empty(5, 3, device="neuron")
    times = []
    for value in (2.5, 2.5, 2.5):
        start = neuron.Event(enable_timing=True)
        end = neuron.Event(enable_timing=True)
        start.record()
        target.fill_(value)
        end.record()
        times.append(start.elapsed_time(end))
        assert torch.equal(target.cpu(), torch.full((5, 3), 2.5))
    assert len([name for name in runs if "fill" in name]) == 1  # the first call ran, the others replayed it
    assert times[0] > 0
    # the same simulated time each call; the times are differences of a float64 clock at different values, equal
    # to within its rounding
    assert_close_to_torch(torch.tensor(times, dtype=torch.float64), torch.tensor([times[0]] * 3, dtype=torch.float64))
    target.zero_()
    target.zero_()
    assert torch.equal(target.cpu(), torch.zeros(5, 3))
    # inside a region: recorded with its neighbours, not run alone
    other = torch.ones(5, 3, device="neuron")
    _warm(lambda: (other * 3, target.fill_(4.0)))
    runs.clear()
    product = other * 3
    target.fill_(4.0)
    assert deferred.pending_ops() == 2
    assert torch.equal(target.cpu(), torch.full((5, 3), 4.0))
    assert torch.equal(product.cpu(), torch.full((5, 3), 3.0))
    assert not [name for name in runs if "fill" in name]
