"""The `neuron` process-group backend: PyTorch's collectives on device tensors, one simulated NeuronCore per rank.

`register()` (called when the device registers) adds the backend `neuron` to `torch.distributed` for the `neuron`
device, so `dist.init_process_group("neuron")` under `torchrun` (or any rendezvous: env://, tcp://, a store) makes
one rank per process, and a script that leaves the backend to torch gets it for neuron tensors.

The bytes travel over gloo: each group holds a gloo process group made on the same store (under its own key
prefix), and a collective runs gloo's on host copies of the device tensors, then writes the results back into the
device tensors in place. CPU tensors go to gloo as they are. Reductions gloo lacks are composed: AVG is a SUM
divided by the group's size.

Before a collective exchanges anything, the ranks compare what they call (one small all-gather of the
collective's kind, element count, dtype and reduction or root, and an all_to_all's block sizes): ranks that call
different collectives, or pass different counts or dtypes, all raise `CollectiveError` naming the collective,
what each rank passed and the user's source line, where gloo alone would hand mismatched buffers to each other (a
wrong result on one rank, a closed connection on another). A failure of the transport itself (a peer that died,
one that did not arrive within the group's timeout) is raised as a `CollectiveError` naming the collective too.
A caller that compared already (the compiled collectives' transport, `transport.py`) runs the collectives that
carry its exchange inside `agreed(...)`, which compares nothing more and names failures after its collective.

Point-to-point sends and receives return their work in flight (a receive writes the device tensor back when it is
waited for): gloo completes a send only once its peer has posted the receive, so ranks that all send before they
receive (a ring of batched p2p ops) would otherwise wait on each other forever. The collectives are synchronous
(the returned work is already complete, which `async_op=True` callers accept), and a collective's simulated time is
not on the device's stream: on hardware the bytes would move over NeuronLink or EFA. Collectives inside compiled
graphs are timed (`runtime/collectives.py`) and reach the other ranks through this group (`transport.py`).
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch._C._distributed_c10d as c10d_bindings
import torch.distributed as dist
from torch._C._distributed_c10d import (
    AllgatherOptions,
    AllreduceCoalescedOptions,
    AllreduceOptions,
    AllToAllOptions,
    BarrierOptions,
    BroadcastOptions,
    GatherOptions,
    PrefixStore,
    ProcessGroupGloo,
    ReduceOp,
    ReduceOptions,
    ReduceScatterOptions,
    ScatterOptions,
    Store,
)
from torch.futures import Future

from neuron_mlir.runtime.collectives import CollectiveError

BACKEND = "neuron"
DEVICE = "neuron"

# What the ranks compare before a collective: codes for its kind and its tensors' dtype (a dtype not listed is
# compared by a code of its name).
_KINDS = (
    "all_reduce",
    "reduce",
    "reduce_scatter",
    "broadcast",
    "all_gather",
    "gather",
    "scatter",
    "all_to_all",
    "barrier",
)
_DTYPES = (
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.float8_e4m3fn,
    torch.float8_e5m2,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
    torch.complex64,
    torch.complex128,
)
_UNCOMPARED = -1  # an element count the ranks may legitimately disagree on (all_to_all with split sizes)


def _dtype_name(code: int) -> str:
    return str(_DTYPES[code]).removeprefix("torch.") if 0 <= code < len(_DTYPES) else "another dtype"


def _completed(result: Any) -> dist.Work:
    future: Future[Any] = Future()
    future.set_result(result)
    return c10d_bindings._create_work_from_future(future)  # type: ignore[attr-defined]  # bound, not in the stubs


class _HostCopies:
    """Host tensors standing in for a collective's tensors: device tensors are copied to the host (inputs) and the
    results written back in place (`write_back`), host tensors pass through."""

    def __init__(self) -> None:
        self._pending: list[tuple[torch.Tensor, torch.Tensor]] = []

    def __call__(self, tensor: torch.Tensor, *, written: bool = False) -> torch.Tensor:
        if tensor.device.type != DEVICE:
            return tensor
        host = tensor.detach().to("cpu")  # an input's value; for an output, its storage on the host
        if written:
            self._pending.append((tensor, host))
        return host

    def all(self, tensors: Sequence[torch.Tensor], *, written: bool = False) -> list[torch.Tensor]:
        return [self(tensor, written=written) for tensor in tensors]

    def write_back(self) -> None:
        with torch.no_grad():
            for device_tensor, host in self._pending:
                device_tensor.copy_(host)
        self._pending.clear()


class _InFlight(dist.Work):
    """A point-to-point transfer still in gloo's hands: `wait` waits for gloo, then writes a receive's result back
    to the device. gloo completes a send only once its peer posts the matching receive, so a send that waited
    before returning would deadlock ranks that all send first and then receive (a ring of batched p2p ops)."""

    def __init__(self, transport_work: Any, copies: _HostCopies, failing_as: Any, result: Any = None) -> None:
        super().__init__()
        self._transport_work, self._copies, self._failing_as, self._result = transport_work, copies, failing_as, result
        self._done = False

    def wait(self, timeout: datetime.timedelta = datetime.timedelta(0)) -> bool:
        if not self._done:
            with self._failing_as():
                self._transport_work.wait() if not timeout else self._transport_work.wait(timeout)
            self._copies.write_back()
            self._done = True
        return True

    def is_completed(self) -> bool:
        return self._done

    def is_success(self) -> bool:
        return self._done

    def result(self) -> Any:
        self.wait()
        return self._result


class NeuronProcessGroup(dist.ProcessGroup):
    """A process group whose collectives accept `neuron` tensors; gloo carries the bytes."""

    def __init__(self, store: Store, rank: int, world_size: int, timeout: datetime.timedelta) -> None:
        super().__init__(rank, world_size)  # type: ignore[call-arg]  # the stubs know only the store form
        self._rank, self._world_size = rank, world_size
        self._group_name = self._group_desc = ""
        self._agreed_as: str | None = None  # inside `agreed`: the collective the caller compared
        # the stubs give gloo's process group none of its collectives: it is used through c10d's protocol
        self._transport: Any = ProcessGroupGloo(PrefixStore("gloo/", store), rank, world_size, timeout)

    def getBackendName(self) -> str:  # the name c10d calls
        return BACKEND

    # c10d names every group; the C++ base keeps a name only in the backends it holds, which a Python group has not
    def _set_group_name(self, name: str) -> None:
        self._group_name = name

    def getGroupName(self) -> str:
        return self._group_name

    def _set_group_desc(self, description: str) -> None:
        self._group_desc = description

    def getGroupDesc(self) -> str:
        return self._group_desc

    def size(self) -> int:
        return self._world_size

    def rank(self) -> int:
        return self._rank

    # ---- agreement and failures ------------------------------------------------------------------------------

    def _agree(
        self,
        collective: str,
        tensors: Sequence[torch.Tensor],
        setting: int = 0,
        setting_name: str = "",
        *,
        compare_count: bool = True,
        blocks: tuple[Sequence[int], Sequence[int]] | None = None,
    ) -> None:
        """Raise on every rank when the ranks call different collectives or pass different element counts, dtypes
        or settings (`setting`: the reduction or the root, called `setting_name`), or (an all_to_all, `blocks`:
        the element counts this rank sends to and receives from each rank) when a rank sends a peer another count
        than the peer expects."""
        if self._world_size == 1 or self._agreed_as is not None:
            return
        count = sum(t.numel() for t in tensors) if compare_count else _UNCOMPARED
        dtype = tensors[0].dtype if tensors else None
        mine = agreement_facts(collective, count, dtype, setting, blocks, self._world_size)
        everyone = torch.empty(self._world_size * mine.numel(), dtype=torch.int64)
        self._transport._allgather_base(everyone, mine, AllgatherOptions()).wait()
        facts = everyone.view(self._world_size, mine.numel()).tolist()
        problem = disagreement(collective, facts, self._rank, setting_name)
        if problem is not None:
            from neuron_mlir.frontend.device.sources import user_line

            line = user_line()
            raise CollectiveError(f"{problem}" + (f" (at {line})" if line else ""))

    @contextlib.contextmanager
    def agreed(self, collective: str) -> Iterator[None]:
        """Run the block's collectives without comparing them first: the caller compared what they carry (as
        `collective`, the name their failures are given). One group's collectives are issued in order, as every
        rank issues them, so the block holds no other caller's."""
        self._agreed_as = collective
        try:
            yield
        finally:
            self._agreed_as = None

    @contextlib.contextmanager
    def _failing_as(self, collective: str) -> Iterator[None]:
        """Name the collective in a failure of the transport (a peer gone, a timeout)."""
        try:
            yield
        except CollectiveError:
            raise
        except RuntimeError as error:
            raise CollectiveError(
                f"{self._agreed_as or collective} on rank {self._rank} of the neuron process group "
                f"({self._world_size} ranks) failed: {error}"
            ) from error

    def _finish(self, copies: _HostCopies, transport_work: dist.Work | None, result: Any = None) -> dist.Work:
        """Wait for gloo's part, write the results back to the device, and hand the caller a completed work."""
        if transport_work is not None:
            transport_work.wait()
        copies.write_back()
        return _completed(result)

    # ---- reductions ------------------------------------------------------------------------------------------

    def _reduce_op(self, op: Any) -> tuple[Any, float | None]:  # a ReduceOp or its RedOpType member
        """gloo's op for `op`, and the divisor a mean needs afterwards."""
        if op == ReduceOp.AVG:
            return ReduceOp.SUM, float(self._world_size)
        return op, None

    def _average(self, tensors: Sequence[torch.Tensor], divisor: float | None) -> None:
        if divisor is not None:
            with torch.no_grad():
                for tensor in tensors:
                    tensor.div_(divisor)

    def allreduce(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        with self._failing_as("all_reduce"):
            opts = opts if isinstance(opts, AllreduceOptions) else _with_op(AllreduceOptions(), opts)
            self._agree("all_reduce", tensors, _op_code(opts.reduceOp), "reduction")
            op, divisor = self._reduce_op(opts.reduceOp)
            copies = _HostCopies()
            hosts = copies.all(tensors, written=True)
            gloo = AllreduceOptions()
            gloo.reduceOp = op
            self._transport.allreduce(hosts, gloo).wait()
            self._average(hosts, divisor)
            return self._finish(copies, None, tensors)

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        reduce_op = opts.reduceOp if isinstance(opts, AllreduceCoalescedOptions) else ReduceOp.SUM
        for tensor in tensors:
            self.allreduce([tensor], _with_op(AllreduceOptions(), reduce_op))
        return _completed(tensors)

    def reduce(self, tensors: list[torch.Tensor], opts: ReduceOptions) -> dist.Work:
        with self._failing_as("reduce"):
            self._agree("reduce", tensors, opts.rootRank, "root")
            op, divisor = self._reduce_op(opts.reduceOp)
            copies = _HostCopies()
            hosts = copies.all(tensors, written=True)
            gloo = ReduceOptions()
            gloo.reduceOp, gloo.rootRank, gloo.rootTensor = op, opts.rootRank, opts.rootTensor
            self._transport.reduce(hosts, gloo).wait()
            if self._rank == opts.rootRank:
                self._average(hosts, divisor)
            return self._finish(copies, None, tensors)

    def reduce_scatter(
        self, outputs: list[torch.Tensor], inputs: list[list[torch.Tensor]], opts: ReduceScatterOptions
    ) -> dist.Work:
        with self._failing_as("reduce_scatter"):
            self._agree("reduce_scatter", outputs, _op_code(opts.reduceOp), "reduction")
            op, divisor = self._reduce_op(opts.reduceOp)
            copies = _HostCopies()
            host_outputs = copies.all(outputs, written=True)
            host_inputs = [copies.all(group) for group in inputs]
            gloo = ReduceScatterOptions()
            gloo.reduceOp = op
            self._transport.reduce_scatter(host_outputs, host_inputs, gloo).wait()
            self._average(host_outputs, divisor)
            return self._finish(copies, None, outputs)

    def reduce_scatter_single(self, output: torch.Tensor, input: torch.Tensor, opts: ReduceScatterOptions) -> dist.Work:
        chunks = list(input.chunk(self._world_size))
        return self.reduce_scatter([output], [chunks], opts)

    # ---- data movement ----------------------------------------------------------------------------------------

    def broadcast(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        with self._failing_as("broadcast"):
            copies = _HostCopies()
            hosts = copies.all(tensors, written=True)
            gloo = BroadcastOptions()
            if isinstance(opts, BroadcastOptions):
                gloo.rootRank, gloo.rootTensor = opts.rootRank, opts.rootTensor
            elif opts is not None:
                gloo.rootRank = int(opts)
            self._agree("broadcast", tensors, gloo.rootRank, "root")
            return self._finish(copies, self._transport.broadcast(hosts, gloo), tensors)

    def allgather(self, outputs: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: Any = None) -> dist.Work:
        with self._failing_as("all_gather"):
            self._agree("all_gather", inputs)
            copies = _HostCopies()
            host_outputs = [copies.all(group, written=True) for group in outputs]
            host_inputs = copies.all(inputs)
            return self._finish(
                copies, self._transport.allgather(host_outputs, host_inputs, AllgatherOptions()), outputs
            )

    def all_gather_single(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> dist.Work:
        with self._failing_as("all_gather"):
            self._agree("all_gather", [input])
            copies = _HostCopies()
            host_output, host_input = copies(output, written=True), copies(input)
            return self._finish(
                copies, self._transport._allgather_base(host_output, host_input, AllgatherOptions()), output
            )

    def all_gather_single_coalesced(
        self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: Any = None
    ) -> dist.Work:
        for output, input in zip(outputs, inputs, strict=True):
            self.all_gather_single(output, input, opts)
        return _completed(outputs)

    def reduce_scatter_single_coalesced(
        self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: ReduceScatterOptions
    ) -> dist.Work:
        for output, input in zip(outputs, inputs, strict=True):
            self.reduce_scatter_single(output, input, opts)
        return _completed(outputs)

    def gather(self, outputs: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: GatherOptions) -> dist.Work:
        with self._failing_as("gather"):
            self._agree("gather", inputs, opts.rootRank, "root")
            copies = _HostCopies()
            host_outputs = [copies.all(group, written=True) for group in outputs]
            host_inputs = copies.all(inputs)
            gloo = GatherOptions()
            gloo.rootRank = opts.rootRank
            return self._finish(copies, self._transport.gather(host_outputs, host_inputs, gloo), outputs)

    def scatter(self, outputs: list[torch.Tensor], inputs: list[list[torch.Tensor]], opts: ScatterOptions) -> dist.Work:
        with self._failing_as("scatter"):
            self._agree("scatter", outputs, opts.rootRank, "root")
            copies = _HostCopies()
            host_outputs = copies.all(outputs, written=True)
            host_inputs = [copies.all(group) for group in inputs]
            gloo = ScatterOptions()
            gloo.rootRank = opts.rootRank
            return self._finish(copies, self._transport.scatter(host_outputs, host_inputs, gloo), outputs)

    def alltoall(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: AllToAllOptions) -> dist.Work:
        with self._failing_as("all_to_all"):
            blocks = ([t.numel() for t in inputs], [t.numel() for t in outputs])
            self._agree("all_to_all", inputs, compare_count=False, blocks=blocks)
            copies = _HostCopies()
            host_outputs, host_inputs = copies.all(outputs, written=True), copies.all(inputs)
            return self._finish(copies, self._transport.alltoall(host_outputs, host_inputs, AllToAllOptions()), outputs)

    def all_to_all_single(
        self,
        output: torch.Tensor,
        input: torch.Tensor,
        output_split_sizes: list[int],
        input_split_sizes: list[int],
        opts: AllToAllOptions,
    ) -> dist.Work:
        with self._failing_as("all_to_all"):
            blocks = (
                _block_elements(input, input_split_sizes, self._world_size),
                _block_elements(output, output_split_sizes, self._world_size),
            )
            self._agree("all_to_all", [input], compare_count=False, blocks=blocks)
            copies = _HostCopies()
            host_output, host_input = copies(output, written=True), copies(input)
            return self._finish(
                copies,
                self._transport.alltoall_base(
                    host_output, host_input, output_split_sizes, input_split_sizes, AllToAllOptions()
                ),
                output,
            )

    # point to point: the work returned is still in flight (`_InFlight`); nothing is compared first, since a send
    # and its receive are different calls on different ranks

    def send(self, tensors: list[torch.Tensor], dst: int, tag: int) -> dist.Work:
        with self._failing_as("send"):
            copies = _HostCopies()
            work = self._transport.send(copies.all(tensors), dst, tag)
            return _InFlight(work, copies, lambda: self._failing_as("send"), tensors)

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int) -> dist.Work:
        with self._failing_as("recv"):
            copies = _HostCopies()
            hosts = copies.all(tensors, written=True)
            work = self._transport.recv(hosts, src, tag)
            return _InFlight(work, copies, lambda: self._failing_as("recv"), tensors)

    def barrier(self, opts: BarrierOptions | None = None) -> dist.Work:
        with self._failing_as("barrier"):
            self._agree("barrier", [])
            self._transport.barrier(BarrierOptions()).wait()
            return _completed(None)


def _op_code(op: Any) -> int:
    """The number of a reduction (a ReduceOp or its RedOpType member)."""
    return int(op.op) if hasattr(op, "op") else int(op)


def _block_elements(tensor: torch.Tensor, split_sizes: Sequence[int], ranks: int) -> list[int]:
    """The element counts of an all_to_all_single's blocks, one per rank: `split_sizes` rows each, or equal."""
    rows = tensor.shape[0] if tensor.dim() else 1
    row_elements = tensor.numel() // rows if rows else 0
    return [size * row_elements for size in (split_sizes or [rows // ranks] * ranks)]


def _dtype_code(dtype: torch.dtype | None) -> int:
    if dtype is None:
        return -2
    return _DTYPES.index(dtype) if dtype in _DTYPES else len(_DTYPES)


def agreement_facts(
    collective: str,
    count: int,
    dtype: torch.dtype | None,
    setting: int,
    blocks: tuple[Sequence[int], Sequence[int]] | None,
    ranks: int,
) -> torch.Tensor:
    """What one rank tells the others of a collective before it: [kind, element count, dtype, setting], then the
    element counts it sends to and receives from each rank (-1 when it has none): a row of the same length on
    every rank, so the all-gather that compares them is itself well formed."""
    sent, received = blocks if blocks is not None else ([-1] * ranks, [-1] * ranks)
    row = [_KINDS.index(collective), count, _dtype_code(dtype), setting, *sent, *received]
    return torch.tensor(row, dtype=torch.int64)


def disagreement(
    label: str, facts: list[list[int]], rank: int, setting_name: str, global_ranks: Sequence[int] | None = None
) -> str | None:
    """What the ranks' facts (`agreement_facts` rows, by rank of the group) disagree on, said from `rank`'s side
    and begun with `label` (the collective, maybe where it was issued); None when they agree. Ranks are named by
    their rank in the group, or by `global_ranks`."""
    kind, count, dtype, setting = facts[rank][:4]
    n = len(facts)
    name = list(global_ranks) if global_ranks is not None else list(range(n))
    me = name[rank]
    for other, (other_kind, other_count, other_dtype, other_setting, *_) in enumerate(facts):
        them = name[other]
        if other_kind != kind:
            return (
                f"{label}: rank {me} calls {_KINDS[kind]} where rank {them} calls {_KINDS[other_kind]}: every rank "
                "of a group calls the same collectives in the same order"
            )
        if count != _UNCOMPARED and other_count != count:
            return (
                f"{label}: rank {me} passes {count} elements, rank {them} {other_count}: every rank of the group "
                "passes the same element count"
            )
        if other_dtype != dtype:
            return (
                f"{label}: rank {me} passes {_dtype_name(dtype)}, rank {them} {_dtype_name(other_dtype)}: every "
                "rank of the group passes the same dtype"
            )
        if other_setting != setting:
            shown = (
                (ReduceOp.RedOpType(setting).name, ReduceOp.RedOpType(other_setting).name)
                if setting_name == "reduction"
                else (setting, other_setting)
            )
            return (
                f"{label}: rank {me}'s {setting_name} is {shown[0]}, rank {them}'s {shown[1]}: every rank of the "
                f"group passes the same {setting_name}"
            )
    for sender in range(n):  # an all_to_all's blocks: what each rank sends a peer is what the peer expects
        for receiver in range(n):
            sent, expected = facts[sender][4 + receiver], facts[receiver][4 + n + sender]
            if sent != expected:
                return (
                    f"{label}: rank {name[sender]} sends {sent} elements to rank {name[receiver]}, which expects "
                    f"{expected}: every rank's input split for a peer is that peer's output split for it"
                )
    return None


def _with_op(options: AllreduceOptions, op: Any) -> AllreduceOptions:
    options.reduceOp = op if isinstance(op, ReduceOp) else ReduceOp(ReduceOp.SUM)
    return options


def _create(store: Store, rank: int, world_size: int, timeout: datetime.timedelta) -> NeuronProcessGroup:
    return NeuronProcessGroup(store, rank, world_size, timeout)


def register() -> None:
    """Add the `neuron` backend to torch.distributed, for the `neuron` device (once)."""
    if not dist.is_available() or BACKEND.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND, _create, devices=[DEVICE])
