"""The device's clock: copies between device tensors are DMAs with the cost model's time, and the report names
the user's source line of each eager op."""

import re

import pytest
import torch

import neuron_mlir
from neuron_mlir.frontend.device import sources, storage, streams
from neuron_mlir.runtime.cost_model import OperandShape, dma_cost
from neuron_mlir.runtime.hardware import Memory

neuron = torch.get_device_module("neuron")

COPIES = {
    "copy_": lambda a, b: b.copy_(a),
    "clone": lambda a, b: a.clone(),
    "contiguous": lambda a, b: a.t().contiguous(),
    "to copy": lambda a, b: a.to(a.device, copy=True),
}


def _dense_hbm(nbytes):
    return OperandShape(Memory.HBM, "u8", 0, (nbytes,), (1,))


@pytest.fixture
def fresh(fresh_eager):
    """Profiles, counts and times per line started afresh."""
    neuron_mlir.reset()
    yield fresh_eager
    neuron_mlir.reset()


@pytest.fixture
def compiled_eager(monkeypatch, fresh):
    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    monkeypatch.delenv("NEURON_MLIR_STRICT", raising=False)
    return fresh


@pytest.mark.parametrize("name", COPIES)
def test_a_copy_between_device_tensors_is_a_dma_on_the_stream(host_mode, fresh, name):
    a = torch.arange(64 * 128, dtype=torch.float32).reshape(64, 128).to("neuron")
    b = torch.empty(64, 128, device="neuron")
    stream = neuron.current_stream()
    before, programs = stream.simulated_ns, stream.programs_run
    result = COPIES[name](a, b)
    assert torch.equal(result.cpu().float(), COPIES[name](a.cpu(), b.cpu()).float())
    elapsed = stream.simulated_ns - before
    assert stream.programs_run == programs + 1
    target = storage.device_memory().target
    # at least the fixed latency and the bytes at the HBM bandwidth (read and written)
    assert elapsed >= target.dma_fixed_latency_ns + 2 * a.numel() * 4 / target.hbm_bandwidth_gbps / 2
    copies = {k: p for k, p in neuron_mlir.profiles().items() if k.startswith("device_copy_")}
    assert len(copies) == 1, copies
    (profile,) = copies.values()
    assert profile.total_ns == pytest.approx(elapsed)
    assert profile.dma_bytes == a.numel() * 4
    assert [location.rsplit(":", 1)[0] for location in profile.location_ns] == [__file__]  # the user's line
    assert neuron.eager_stats()["device_to_device_bytes"] > 0


def test_a_cast_between_device_dtypes_is_a_compiled_program(compiled_eager):
    """A dtype cast on the device is compute (the compiler's cast), not a copy of bytes: one program, no DMA."""
    a = torch.arange(64 * 128, dtype=torch.float32).reshape(64, 128).to("neuron")
    stream = neuron.current_stream()
    programs = stream.programs_run
    result = a.to(torch.bfloat16)
    assert result.device.type == "neuron"
    assert torch.equal(result.cpu(), a.cpu().to(torch.bfloat16))
    assert stream.programs_run == programs + 1
    assert not any(key.startswith("device_copy_") for key in neuron_mlir.profiles())
    assert neuron.eager_stats()["native_ops"].get("aten._to_copy.default", 0) == 1


def test_the_dma_time_is_the_cost_models(host_mode, fresh):
    a = torch.randn(256, 512).to("neuron")
    stream = neuron.current_stream()
    before = stream.simulated_ns
    a.clone()
    dense = stream.simulated_ns - before
    target = storage.device_memory().target
    nbytes = a.numel() * 4
    assert dense == pytest.approx(dma_cost(_dense_hbm(nbytes), _dense_hbm(nbytes), target).alone_ns(target))
    before = stream.simulated_ns
    a.t().contiguous()  # a transpose moves one element per descriptor chunk: overhead-bound, much slower
    assert stream.simulated_ns - before > 10 * dense


def test_copies_from_and_to_the_host_take_no_device_time(host_mode, fresh):
    stream = neuron.current_stream()
    before = stream.simulated_ns
    x = torch.randn(8, 8).to("neuron")
    x.cpu()
    assert stream.simulated_ns == before
    empty = torch.empty(0, device="neuron")
    empty.clone()
    assert stream.simulated_ns == before  # nothing to move


def test_the_report_names_the_users_line_per_op(compiled_eager):
    x = torch.randn(16, 8).to("neuron")
    w = torch.randn(8, 4).to("neuron").requires_grad_()
    for _ in range(3):
        y = (x @ w).relu()  # the line the forward ops come from
    line = f"{__file__}:{test_the_report_names_the_users_line_per_op.__code__.co_firstlineno + 4}"
    y.sum().backward()
    times = sources.EAGER_TIMES
    assert times[("aten.mm.default", line)].calls == 3
    assert times[("aten.mm.default", line)].simulated_ns > 0
    assert times[("aten.relu.default", line)].calls == 3
    assert any(op == "aten.mm.default" and where == "MmBackward0 (backward)" for op, where in times)
    text = neuron_mlir.report()
    assert "eager ops on the device" in text
    assert re.search(rf"aten\.mm\.default +3 +0 +[0-9.]+ +[0-9.]+% +{re.escape(line)}", text), text
    assert "no profiles yet" not in text  # eager work alone makes a report


def test_each_thread_names_its_own_line_and_no_frame_outlives_its_kernel(host_mode, fresh):
    """A device kernel marks its caller as the frame the walk to the user's line starts from, per thread, and
    drops the mark as it returns, also when the op raises: threads issuing ops at once each get their own line, and
    afterwards no frame (nor the tensors its locals hold) is kept. (On the host: the eager path counts each call
    under its line alike, and host calls from several threads share no pending region.)"""
    import threading

    x = torch.randn(16, 8).to("neuron")
    w = torch.randn(8, 4).to("neuron")
    first = test_each_thread_names_its_own_line_and_no_frame_outlives_its_kernel.__code__.co_firstlineno
    barrier = threading.Barrier(2)

    def issue(count):
        barrier.wait()
        for _ in range(count):
            x @ w  # this thread's line

    threads = [threading.Thread(target=issue, args=(20,)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for _ in range(20):
        x + 1.0  # the main thread's line
    for thread in threads:
        thread.join()
    with pytest.raises(RuntimeError):
        x @ torch.randn(5, 5).to("neuron")  # a shape error inside the kernel
    times = sources.EAGER_TIMES
    assert times[("aten.mm.default", f"{__file__}:{first + 15}")].calls == 40
    assert times[("aten.add.Tensor", f"{__file__}:{first + 21}")].calls == 20
    assert sources._issuer.frame is None


class _Doubled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2  # a user's line inside the backward pass


def test_backward_runs_on_the_calling_thread_and_names_its_ops_by_node(host_mode, fresh):
    import threading

    threads = []
    w = torch.ones(4, 4).to("neuron").requires_grad_()
    w.register_hook(lambda grad: threads.append(threading.get_ident()))
    y = _Doubled.apply(w.relu())
    y.sum().backward()
    assert threads == [threading.get_ident()]  # no hand-over to a device thread of the autograd engine
    assert w.grad is not None
    assert torch.equal(w.grad.cpu(), torch.full((4, 4), 2.0))
    user = f"{__file__}:{_Doubled.backward.__code__.co_firstlineno + 2}"
    assert (sources.EAGER_TIMES[("aten.mul.Tensor", user)]).calls == 1
    assert any(
        op == "aten.threshold_backward.default" and where == "ReluBackward0 (backward)"
        for op, where in sources.EAGER_TIMES
    )
    # the engine's entry ends the walk: the caller's `backward()` line names no op of the pass
    backward_line = (
        f"{__file__}:{test_backward_runs_on_the_calling_thread_and_names_its_ops_by_node.__code__.co_firstlineno + 7}"
    )
    on_that_line = {op for op, where in sources.EAGER_TIMES if where == backward_line}
    assert on_that_line == {"aten.sum.dim_IntList", "aten.fill_.Scalar"}  # the forward's sum, the loss's gradient


def test_a_copys_line_is_the_users_in_the_report(host_mode, fresh):
    x = torch.randn(4, 4).to("neuron")
    x.clone()
    line = f"{__file__}:{test_a_copys_line_is_the_users_in_the_report.__code__.co_firstlineno + 2}"
    entry = sources.EAGER_TIMES[(streams.DEVICE_COPY, line)]
    assert entry.calls == 1
    assert entry.simulated_ns > 0
    assert line in neuron_mlir.report()


def test_device_streams_are_torch_streams_told_apart_by_identity(host_mode):
    """torch's stream arguments take them (`record_stream`, as FSDP-style allocators call it), yet two streams of
    the one device stay two streams with their own clocks."""
    side = neuron.Stream()
    assert isinstance(side, torch.Stream)
    assert side.device == torch.device("neuron", 0)
    assert side != neuron.current_stream()
    assert side == side
    tensor = torch.ones(3, device="neuron")
    tensor.record_stream(side)
    with neuron.stream(side):
        assert neuron.current_stream() is side
    assert neuron.current_stream() is neuron.default_stream()
