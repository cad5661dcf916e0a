"""Streams and events of the simulated device: where the simulated time of eager work accumulates.

The simulator runs each program to completion when it is called, so work is always finished on the host's
return and `synchronize` has nothing to wait for. What a stream keeps is the device's clock: the simulated time of
every program run on it, in issue order. Events record a stream's clock, so `start.elapsed_time(end)` is the
simulated device time between them, in milliseconds, as `torch.cuda.Event.elapsed_time` measures GPU time.
"""

from __future__ import annotations

from typing import Any

import torch


class Stream:
    """An in-order queue of the simulated device; `simulated_ns` is the device time of the work it has run."""

    def __init__(self, device: Any = None, priority: int = 0) -> None:
        self.device = torch.device("neuron", 0)
        self.priority = priority
        self.simulated_ns = 0.0
        self.programs_run = 0

    def synchronize(self) -> None:
        """Work is finished when its call returns on the simulator: nothing to wait for."""

    def query(self) -> bool:
        return True

    def wait_event(self, event: Event) -> None:
        # an in-order device whose work completes on issue: the event's work is done, but time cannot run backwards
        self.simulated_ns = max(self.simulated_ns, event.simulated_ns)

    def wait_stream(self, stream: Stream) -> None:
        self.simulated_ns = max(self.simulated_ns, stream.simulated_ns)

    def record_event(self, event: Event | None = None) -> Event:
        event = Event() if event is None else event
        event.record(self)
        return event

    def add_run(self, simulated_ns: float) -> None:
        self.simulated_ns += simulated_ns
        self.programs_run += 1

    def __enter__(self) -> Stream:
        global _current
        self._previous = _current
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
        self.simulated_ns = (stream or current_stream()).simulated_ns
        self.recorded = True

    def wait(self, stream: Stream | None = None) -> None:
        (stream or current_stream()).wait_event(self)

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        """Recorded work is already finished (see the module docstring)."""

    def elapsed_time(self, end_event: Event) -> float:
        """Simulated device time from this event to `end_event`, in milliseconds."""
        if not (self.recorded and end_event.recorded):
            raise RuntimeError("elapsed_time: both events must be recorded first")
        return (end_event.simulated_ns - self.simulated_ns) / 1e6


_default = Stream()
_current = _default


def current_stream(device: Any = None) -> Stream:
    return _current


def default_stream(device: Any = None) -> Stream:
    return _default


def set_stream(stream: Stream) -> None:
    global _current
    _current = stream


def stream(stream: Stream | None) -> Stream:
    """`with torch.neuron.stream(s):` runs the enclosed work on `s`."""
    return stream if stream is not None else _current


# bytes moved between the host and the device by copies (`.to`, `.cpu()`, `copy_`)
transfers = {"host_to_device_bytes": 0, "device_to_host_bytes": 0, "device_to_device_bytes": 0}


def count_transfer(source: torch.Tensor, destination: torch.Tensor) -> None:
    nbytes = destination.numel() * destination.element_size()
    source_on_device = source.device.type == "neuron"
    destination_on_device = destination.device.type == "neuron"
    if source_on_device and destination_on_device:
        transfers["device_to_device_bytes"] += nbytes
    elif destination_on_device:
        transfers["host_to_device_bytes"] += nbytes
    elif source_on_device:
        transfers["device_to_host_bytes"] += nbytes
