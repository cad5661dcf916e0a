"""Streams and events of the simulated device: where the simulated time of eager work accumulates.

The simulator runs each program to completion when it is called, so work is always finished on the host's
return and `synchronize` has nothing to wait for. What a stream keeps is the device's clock: the simulated time of
every program run on it, in issue order. Events record a stream's clock, so `start.elapsed_time(end)` is the
simulated device time between them, in milliseconds, as `torch.cuda.Event.elapsed_time` measures GPU time.
"""

from __future__ import annotations

from typing import Any

import torch

from neuron_mlir.frontend.device import storage


class Stream(torch.Stream):
    """An in-order queue of the simulated device; `simulated_ns` is the device time of the work it has run.

    A `torch.Stream`, so that torch's stream arguments take it (`Tensor.record_stream`, `torch.accelerator`),
    but compared by identity: torch's streams of the device all share one id."""

    def __new__(cls, device: Any = None, priority: int = 0) -> Stream:
        return super().__new__(cls, device=torch.device("neuron", 0), priority=priority)

    def __init__(self, device: Any = None, priority: int = 0) -> None:
        self.priority = priority
        self.simulated_ns = 0.0
        self.programs_run = 0

    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__

    def synchronize(self) -> None:
        """Work is finished when its call returns on the simulator: nothing to wait for but recorded ops."""
        storage.observe()

    def query(self) -> bool:
        return True

    # the device's events and streams keep its simulated clock: these take them, not torch's base types
    def wait_event(self, event: Event) -> None:  # type: ignore[override]
        storage.observe()
        # an in-order device whose work completes on issue: the event's work is done, but time cannot run backwards
        self.simulated_ns = max(self.simulated_ns, event.simulated_ns)

    def wait_stream(self, stream: Stream) -> None:  # type: ignore[override]
        storage.observe()
        self.simulated_ns = max(self.simulated_ns, stream.simulated_ns)

    def record_event(self, event: Event | None = None) -> Event:  # type: ignore[override]
        event = Event() if event is None else event
        event.record(self)
        return event

    def add_run(self, simulated_ns: float) -> None:
        self.simulated_ns += simulated_ns
        self.programs_run += 1

    def __enter__(self) -> Stream:
        global _current
        self._previous = current_stream()
        _current = self
        return self

    def __exit__(self, *exc: object) -> None:
        global _current
        _current = self._previous

    def __repr__(self) -> str:
        return f"<torch.neuron.Stream device={self.device} simulated_ns={self.simulated_ns:.0f}>"


class Event:
    """A point on a stream's simulated clock."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.enable_timing = enable_timing
        self.simulated_ns = 0.0
        self.recorded = False

    def record(self, stream: Stream | None = None) -> None:
        storage.observe()  # recorded ops pending on the stream come before the event
        self.simulated_ns = (stream or current_stream()).simulated_ns
        self.recorded = True

    def wait(self, stream: Stream | None = None) -> None:
        (stream or current_stream()).wait_event(self)

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        """Recorded work is already finished (see the module docstring) once pending ops have run."""
        storage.observe()

    def elapsed_time(self, end_event: Event) -> float:
        """Simulated device time from this event to `end_event`, in milliseconds."""
        if not (self.recorded and end_event.recorded):
            raise RuntimeError("elapsed_time: both events must be recorded first")
        return (end_event.simulated_ns - self.simulated_ns) / 1e6


# made on first use: a torch.Stream of the device needs the device registered (its guard)
_default: Stream | None = None
_current: Stream | None = None


def current_stream(device: Any = None) -> Stream:
    global _current
    if _current is None:
        _current = default_stream()
    return _current


def default_stream(device: Any = None) -> Stream:
    global _default
    if _default is None:
        _default = Stream()
    return _default


def set_stream(stream: Stream) -> None:
    global _current
    storage.observe()
    _current = stream


def stream(stream: Stream | None) -> Stream:
    """`with torch.neuron.stream(s):` runs the enclosed work on `s`."""
    return stream if stream is not None else current_stream()


# bytes moved between the host and the device by copies (`.to`, `.cpu()`, `copy_`)
transfers = {"host_to_device_bytes": 0, "device_to_host_bytes": 0, "device_to_device_bytes": 0}

DEVICE_COPY = "device-to-device copy (DMA)"  # how copies between device tensors are named in reports


def device_copy(source: torch.Tensor, destination: torch.Tensor) -> float:
    """Put a copy from device tensor `source` into device tensor `destination` on the current stream as the DMA
    an HBM-to-HBM transfer is on the NeuronCore: its duration from the cost model (`runtime/cost_model.py`:
    fixed latency, the DMA engines' rate at the contiguous runs of both sides' layouts, HBM bandwidth), a
    profile in `neuron_mlir.profiles()` (`device_copy_<dtypes>_<shape>`) and its time on the user's line in
    `neuron_mlir.report()`. Returns the simulated ns (0 for an empty copy, which moves nothing)."""
    from neuron_mlir.frontend import stats
    from neuron_mlir.frontend.device import sources, storage
    from neuron_mlir.runtime.cost_model import dma_cost

    if destination.numel() == 0:
        return 0.0
    # a copy's cost, name and profile depend only on both sides' geometry and dtypes (and the profile on the
    # user's line): a training step's copies repeat, and pricing one costs more than the copy of a small tensor
    target = storage.device_memory().target
    key = (
        source.shape,
        source.stride(),
        source.dtype,
        destination.shape,
        destination.stride(),
        destination.dtype,
        target.name,
    )
    priced = _priced_copies.get(key)
    if priced is None:
        shape = list(destination.shape)
        cost = dma_cost(_bytes_shape(source, shape), _bytes_shape(destination, shape), target)
        name = (
            f"device_copy_{str(source.dtype).removeprefix('torch.')}_{str(destination.dtype).removeprefix('torch.')}_"
            + "x".join(str(extent) for extent in shape)
        )
        if len(_priced_copies) >= _PRICED_COPIES:
            _priced_copies.clear()
        priced = _priced_copies[key] = (cost, cost.alone_ns(target), name, {})
    cost, duration, name, profiles = priced
    current_stream().add_run(duration)
    line = sources.user_line()
    profile = profiles.get(line)
    if profile is None:
        # a profile is handed out by `neuron_mlir.profiles()` as a copy: one object serves every such copy
        profile = profiles[line] = _dma_profile(cost, duration, target, line)
    stats.record_run(name, profile)
    sources.record(DEVICE_COPY, duration, line=line)
    return duration


# (both sides' sizes, strides and dtypes, the target's name) -> the copy's DMA cost, duration, profile name and
# profiles per user line
_priced_copies: dict[tuple[Any, ...], tuple[Any, float, str, dict[str, Any]]] = {}
_PRICED_COPIES = 4096  # more distinct copies than a program's steps make: start afresh


def _bytes_shape(tensor: torch.Tensor, shape: list[int]) -> Any:
    """The HBM side of a copy in bytes (the cost model's `OperandShape` of u8 elements): the tensor's elements
    at its strides, broadcast to the copy's `shape` (a broadcast dimension steps by 0), each element's bytes
    contiguous."""
    from neuron_mlir.runtime.cost_model import OperandShape
    from neuron_mlir.runtime.hardware import Memory

    itemsize = tensor.element_size()
    strides = [0] * len(shape)
    offset = len(shape) - tensor.dim()
    for axis, (extent, stride) in enumerate(zip(tensor.shape, tensor.stride(), strict=True)):
        if extent != 1:
            strides[offset + axis] = stride * itemsize
    return OperandShape(Memory.HBM, "u8", 0, (*shape, itemsize), (*strides, 1))


def _dma_profile(cost: Any, duration: float, target: Any, location: str) -> Any:
    """The profile of one DMA spread over `cost.engines` queues (a descriptor on each, all from time 0): what a
    program of that single transfer would report."""
    from array import array

    from neuron_mlir.runtime.profile import QUEUE_NAMES, InstructionStats, Profile, TraceEvents

    queues = [f"dma{q}" for q in range(cost.engines)]
    events = TraceEvents(
        array("b", [QUEUE_NAMES.index(q) for q in queues]),
        array("d", [0.0] * len(queues)),
        array("d", [duration] * len(queues)),
        array("l", range(len(queues))),
    )
    return Profile(
        target=target.name,
        core_version=target.core_version,
        total_ns=duration,
        busy_ns={q: duration for q in queues},
        opcode_counts={"dma_copy": len(queues)},
        dma_bytes=cost.bytes,
        hbm_bytes=cost.hbm_bytes,
        flops=0,
        flops_by_family={},
        peak_flops_by_family={family: target.peak_flops(family) for family in ("fp32", "bf16", "fp8")},
        hbm_bandwidth_bytes_per_ns=target.hbm_bandwidth_gbps,
        instructions=[InstructionStats(i, "dma_copy", q, location, 1, duration) for i, q in enumerate(queues)],
        events=events,
        location_ns={location: duration * len(queues)},
        location_counts={location: len(queues)},
        io_bytes=cost.hbm_bytes,
    )


def count_transfer(source: torch.Tensor, destination: torch.Tensor) -> None:
    nbytes = destination.numel() * destination.element_size()
    source_on_device = storage.on_device(source)
    destination_on_device = storage.on_device(destination)
    if source_on_device and destination_on_device:
        transfers["device_to_device_bytes"] += nbytes
    elif destination_on_device:
        transfers["host_to_device_bytes"] += nbytes
    elif source_on_device:
        transfers["device_to_host_bytes"] += nbytes
