"""The device's native hooks (frontend/device/native): storage resize in place, generators on the device, pinned
host memory; and the device without them."""

import os
import subprocess
import sys
from typing import Any, cast

import pytest
import torch

from neuron_mlir.frontend.device import native

# torch.neuron, which the device registers when torch is imported (no static attribute of torch)
neuron = torch.get_device_module("neuron")
# their semantics, not the compiler's: every op on the host
pytestmark = pytest.mark.usefixtures("host_mode")


def test_the_native_hooks_are_loaded():
    """`make venv` builds them; a process that finds them missing builds them (test/conftest.py's environment)."""
    assert native.loaded(), native.unavailable_reason()


def test_the_device_guard_answers_without_python(monkeypatch: pytest.MonkeyPatch):
    """torch asks the guard for its device on every guarded kernel and autograd node: the native guard answers
    in C++, never through the Python guard's `type_`; a training step's tensors stay on `neuron:0`."""
    from neuron_mlir.frontend.device import registration

    calls: list[int] = []
    monkeypatch.setattr(registration._DeviceGuard, "type_", lambda self: calls.append(1))
    weight = torch.ones(4, 3, device="neuron", requires_grad=True)
    loss = (torch.ones(2, 4, device="neuron") @ weight).relu().sum()
    loss.backward()
    assert weight.grad is not None
    assert weight.grad.device == torch.device("neuron", 0)
    assert calls == []


@pytest.mark.parametrize("op", ["view", "as_strided", "unfold", "_reshape_alias"])
def test_view_ops_have_native_kernels(op: str):
    """Views reach the device as `view` and `as_strided` (transpose, expand, slicing and `t` are composites ending
    in one): they run their CPU kernel from C++, not through the Python fallback."""
    table = torch._C._dispatch_dump_table(f"aten::{op}")
    entry = next(line for line in table.splitlines() if line.startswith("PrivateUse1:"))
    assert "neuron_hooks.cpp" in entry


def test_views_through_the_native_kernels_alias_their_base():
    base = torch.arange(24, dtype=torch.float32).to("neuron")
    grid = base.view(4, 6)
    column = grid.t()[2]  # transpose, then select: as_strided over the same storage
    assert column.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    assert (column.shape, column.stride(), column.storage_offset()) == ((4,), (6,), 2)
    column.mul_(-1)
    expected = torch.arange(24, dtype=torch.float32).view(4, 6)
    expected[:, 2] *= -1
    assert torch.equal(base.cpu(), expected.reshape(-1))
    windows = base.unfold(0, 4, 4)
    assert torch.equal(windows.cpu(), expected.reshape(-1).unfold(0, 4, 4))


class _AtenOps(torch.utils._python_dispatch.TorchDispatchMode):
    """The aten ops a call reaches the backends with, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize(
    "case",
    [
        {"is_causal": True},
        {"scale": 0.5},
        {"attn_mask": "boolean"},
        {"attn_mask": "float", "requires_grad": False},
    ],
    ids=["causal", "scale", "boolean-mask", "float-mask-inference"],
)
def test_attention_takes_the_cpus_implementation(case: dict[str, Any]):
    """`scaled_dot_product_attention` picks the same implementation for device tensors as for CPU tensors (the
    CPU's fused op where it takes it, one eager op and the same graph under torch.compile, rather than the math
    composite of a dozen ops), forward and backward, with the CPU's values."""
    import torch.nn.functional as F
    from support import assert_close_to_torch

    case = dict(case)
    requires_grad = case.pop("requires_grad", True)
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=generator) for _ in range(3))
    if case.get("attn_mask") == "boolean":
        case["attn_mask"] = torch.rand(5, 5, generator=generator) > 0.3
    elif case.get("attn_mask") == "float":
        case["attn_mask"] = torch.randn(2, 1, 5, 5, generator=generator)
    seen, results = [], []
    for device in ("cpu", "neuron"):
        inputs = [t.detach().to(device).requires_grad_(requires_grad) for t in (q, k, v)]
        kwargs: dict[str, Any] = {
            name: value.to(device) if isinstance(value, torch.Tensor) else value for name, value in case.items()
        }
        with _AtenOps() as mode:
            out = F.scaled_dot_product_attention(inputs[0], inputs[1], inputs[2], **kwargs)
            if requires_grad:
                out.sum().backward()
        seen.append(mode.ops)
        results.append([out.detach().cpu(), *(t.grad.cpu() for t in inputs if t.grad is not None)])
    assert seen[0] == seen[1]
    assert not any("bmm" in op for op in seen[1]), seen[1]
    assert_close_to_torch(results[1], results[0], "attention")


def test_fresh_results_are_made_by_the_native_constructor():
    """`storage.empty_array`, which every fresh eager result and compiled output goes through, makes its tensor in
    C++ over the new block: contiguous, of the dtype, sharing the array's bytes."""
    import ml_dtypes
    import numpy as np

    from neuron_mlir.frontend.device import storage

    make = native.tensor_over()
    assert make is not None
    assert storage._tensor_over is make
    for shape, dtype in (
        ((3, 4), np.dtype(np.float32)),
        ((), np.dtype(np.int32)),
        ((0, 5), np.dtype(ml_dtypes.bfloat16)),
    ):
        tensor, array = storage.empty_array(shape, dtype)
        assert tensor.device == torch.device("neuron", 0)
        assert tuple(tensor.shape) == shape
        assert tensor.is_contiguous()
        assert not tensor.requires_grad
        assert tensor.dtype == {np.float32: torch.float32, np.int32: torch.int32}.get(dtype.type, torch.bfloat16)
        array[...] = 3
        assert torch.equal(tensor.cpu(), torch.full(shape, 3, dtype=tensor.dtype))
    small = storage.new_storage(8)
    with pytest.raises(RuntimeError, match="too small"):
        make(small, (4,), torch.float32)


def test_fresh_results_come_whole_from_one_native_call():
    """`storage.empty_array` makes block, storage, tensor and array in one native call (contiguous `torch.empty`
    too): the block and the array hang on the storage (it dies with the last tensor over it), the counters follow, and a request
    the HBM cannot hold is still the out-of-memory error naming the bytes."""
    import numpy as np

    from neuron_mlir.frontend.device import storage

    assert storage._fresh_tensor is not None
    memory = storage.device_memory()
    before = (memory.allocated_bytes, memory.stats()["allocation.all.allocated"])
    tensor, array = storage.empty_array((5, 6), np.dtype(np.float32))
    block = storage.block_of(tensor)
    assert (block.nbytes, array.shape, array.dtype) == (120, (5, 6), np.dtype(np.float32))
    assert array.ctypes.data == tensor.data_ptr() == block.data.ctypes.data
    # the array is the one the simulator reads the whole tensor through later: kept, not made again
    assert storage.dense_array(tensor) is array
    assert (memory.allocated_bytes, memory.stats()["allocation.all.allocated"]) == (before[0] + 120, before[1] + 1)
    view = tensor[1:]
    del tensor, array, block
    assert memory.allocated_bytes == before[0] + 120  # the view keeps the storage, and the block on it
    del view
    assert memory.allocated_bytes == before[0]
    with pytest.raises(torch.OutOfMemoryError, match="tried to allocate"):
        storage.empty_array((1 << 40,), np.dtype(np.float32))
    # contiguous `torch.empty` takes the same path (without the array), strided ones the Python one
    empty = torch.empty(3, 4, dtype=torch.bfloat16, device="neuron")
    strided = torch.empty_strided((3, 4), (1, 3), dtype=torch.bfloat16, device="neuron")
    assert memory.allocated_bytes == before[0] + 2 * 24
    for tensor in (empty, strided):
        assert storage.block_of(tensor).nbytes == 24
        tensor.fill_(2)
        assert torch.equal(tensor.cpu(), torch.full((3, 4), 2, dtype=torch.bfloat16))
    assert strided.stride() == (1, 3)
    with pytest.raises(torch.OutOfMemoryError, match="tried to allocate"):
        torch.empty(1 << 40, device="neuron")


def test_several_fresh_results_come_from_one_native_call():
    """`storage.empty_arrays` makes what `empty_array` makes for each of several layouts in one native call (a
    compiled graph's device outputs): each its own block, storage, tensor and array, the array kept on the storage;
    and a batch the HBM cannot hold whole gives back the blocks it made before raising the out-of-memory error."""
    import ml_dtypes
    import numpy as np

    from neuron_mlir.frontend.device import storage

    assert storage._fresh_tensors is not None
    memory = storage.device_memory()
    before = (memory.allocated_bytes, memory.stats()["allocation.all.allocated"])
    layouts = [
        ((5, 6), torch.float32, np.dtype(np.float32)),
        ((), torch.int64, np.dtype(np.int64)),
        ((2, 0), torch.bfloat16, np.dtype(ml_dtypes.bfloat16)),
        ((3,), torch.bool, np.dtype(np.bool_)),
    ]
    made = storage.empty_arrays(layouts)
    assert len(made) == 4
    for (tensor, array), (shape, dtype, element) in zip(made, layouts, strict=True):
        assert tensor.device == torch.device("neuron", 0)
        assert (tuple(tensor.shape), tensor.dtype, tensor.is_contiguous()) == (shape, dtype, True)
        assert (array.shape, array.dtype, array.flags.c_contiguous, array.flags.writeable) == (
            shape,
            element,
            True,
            True,
        )
        assert array.ctypes.data == storage.block_of(tensor).data.ctypes.data
        assert tensor.data_ptr() == (array.ctypes.data if array.size else 0)  # torch's pointer of no elements
        assert storage.dense_array(tensor) is array
        array[...] = 1
        assert torch.equal(tensor.cpu(), torch.ones(shape, dtype=dtype))
    blocks = {id(storage.block_of(tensor)) for tensor, _ in made}
    assert len(blocks) == 4
    assert memory.allocated_bytes == before[0] + 120 + 8 + 0 + 3
    assert memory.stats()["allocation.all.allocated"] == before[1] + 4
    tensor = made[0][0]
    del made
    assert memory.allocated_bytes == before[0] + 120  # each block dies with its own tensor
    del tensor
    assert memory.allocated_bytes == before[0]
    with pytest.raises(torch.OutOfMemoryError, match="tried to allocate"):
        storage.empty_arrays(
            [((4,), torch.float32, np.dtype(np.float32)), ((1 << 40,), torch.float32, np.dtype(np.float32))]
        )
    assert memory.allocated_bytes == before[0]
    assert storage.empty_arrays([]) == []


def test_a_fresh_results_bytes_are_the_memory_of_its_array():
    """A fresh result's bytes are the memory of the typed array the native maker returns, and its block's `data` (a
    uint8 array of the bytes) is made on first use, once, over that memory: writes through either show in the other
    and in the tensor, and the arrays keep the host memory alive after the block has given its range back."""
    import numpy as np

    from neuron_mlir.frontend.device import storage

    memory = storage.device_memory()
    before = memory.allocated_bytes
    tensor, array = storage.empty_array((4, 8), np.dtype(np.float32))
    block = storage.block_of(tensor)
    data = block.data
    assert (data.dtype, data.shape, data.flags.c_contiguous, data.flags.writeable) == (
        np.dtype(np.uint8),
        (128,),
        True,
        True,
    )
    assert data.ctypes.data == array.ctypes.data == tensor.data_ptr()
    assert block.data is data
    array[...] = 3.0
    assert np.array_equal(data.view(np.float32).reshape(4, 8), array)
    data[:4] = np.frombuffer(np.float32(-1.5).tobytes(), np.uint8)
    assert tensor.cpu()[0, 0].item() == -1.5
    del tensor, block
    assert memory.allocated_bytes == before  # the range goes back with the storage
    data[4:8] = np.frombuffer(np.float32(7.0).tobytes(), np.uint8)
    assert (array[0, 0], array[0, 1]) == (-1.5, 7.0)  # the host memory lives on with the arrays over it


def test_a_tensors_facts_come_from_one_native_call():
    """What a deferred region asks of every operand (its storage's block, the storage, the offset, whether it is
    contiguous and whether its bytes are its values) comes from one native call, and is what the tensor's own
    methods say: for contiguous tensors and views, conjugate and negative views, a CPU tensor (no block), and
    storages torch allocated itself (no block attribute: found by address)."""
    from neuron_mlir.frontend.device import storage

    facts = storage._tensor_facts
    assert facts is not storage.python_tensor_facts
    base = torch.arange(24.0).reshape(4, 6).to("neuron")
    complex_base = torch.randn(3, 4, dtype=torch.complex64).to("neuron")
    own = torch.UntypedStorage(96, device="neuron")
    tensors = [
        base,
        base[1:],
        base.t(),
        base[:, 2:5],
        complex_base.conj(),
        complex_base.conj().imag,
        torch.ones(3),
        torch.empty(0, device="neuron").set_(own, 2, (4, 5), (5, 1)),
    ]
    for tensor in tensors:
        native_facts = facts(tensor, storage._BLOCK_ATTRIBUTE)
        python_facts = storage.python_tensor_facts(tensor, storage._BLOCK_ATTRIBUTE)
        assert native_facts is not None
        assert native_facts[0] is python_facts[0]
        assert native_facts[1] is python_facts[1]
        expected = (tensor.storage_offset(), tensor.is_contiguous(), not (tensor.is_conj() or tensor.is_neg()))
        assert native_facts[2:] == python_facts[2:] == expected
    assert facts(base, "no_such_attribute")[0] is None
    with pytest.raises(TypeError):
        facts("not a tensor", storage._BLOCK_ATTRIBUTE)


def test_an_eager_ops_program_key_comes_from_one_native_call(monkeypatch: pytest.MonkeyPatch):
    """The program key of an eager op's call (`eager._signature`) comes from one native call and equals, with the
    same hash, the key the Python path makes: for tensors of several dtypes and devices, keyword arguments, lists,
    numbers (floats by their bits: -0.0 and NaN keyed apart from 0.0), None and dtypes. Calls the Python path is to
    answer (a sparse tensor, a CPU tensor beside a device tensor, a tensor subclass) are left to it, which gives its
    answer or PyTorch's error."""
    from neuron_mlir.frontend.device import eager

    native_signature = eager._native_signature
    assert native_signature is not None
    x = torch.randn(3, 4, device="neuron")
    add, cat, sum_, fill = (
        torch.ops.aten.add.Tensor,
        torch.ops.aten.cat.default,
        torch.ops.aten.sum.dim_IntList,
        torch.ops.aten.fill_.Scalar,
    )
    calls: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = [
        (add, (x, x.to(torch.bfloat16)), {"alpha": 2}),
        (add, (x, torch.tensor(1.5)), {}),
        (cat, ([x, x, x],), {"dim": 1}),
        (sum_, (x, [0, 1], True), {"dtype": torch.float64}),
        (sum_, (x, None), {}),
        (fill, (x, 0.0), {}),
        (fill, (x, -0.0), {}),
        (fill, (x, float("nan")), {}),
        (fill, (x, True), {}),
        (add, (torch.ones(2), torch.ones(2)), {}),
    ]
    keys = []
    for op, args, kwargs in calls:
        facts, flat = eager._facts(op), eager._leaves(args, kwargs)
        made = native_signature(facts, args, kwargs, flat, eager._SYMBOLIC, eager._PYTHON_PATH)
        monkeypatch.setattr(eager, "_native_signature", None)
        expected = eager._signature(facts, args, kwargs, flat)
        monkeypatch.setattr(eager, "_native_signature", native_signature)
        assert made is not eager._PYTHON_PATH
        assert made == expected
        assert hash(made) == hash(expected)
        keys.append(made)
    assert len(set(keys)) == len(keys)  # no two calls share a key (0.0, -0.0 and NaN among them)

    class Subclass(torch.Tensor):
        pass

    left: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = [
        (add, (x, torch.ones(3, 4)), {}),
        (add, (torch.ones(3, 4).to_sparse(), torch.ones(3, 4).to_sparse()), {}),
        (add, (x.as_subclass(Subclass), x), {}),
    ]
    for op, args, kwargs in left:
        facts, flat = eager._facts(op), eager._leaves(args, kwargs)
        assert native_signature(facts, args, kwargs, flat, eager._SYMBOLIC, eager._PYTHON_PATH) is eager._PYTHON_PATH
    with pytest.raises(RuntimeError, match="same device"):
        eager._signature(eager._facts(add), (x, torch.ones(3, 4)), {}, [x, torch.ones(3, 4)])
    assert eager._signature(eager._facts(add), left[1][1], {}, list(left[1][1])) is None


def test_kept_arrays_are_found_by_one_native_call():
    """`storage.dense_array` finds the arrays it keeps on a storage (by offset, shape and dtype) through the native
    `cached_array`: the same array as the Python lookup, for the tensor and a contiguous view of the same bytes;
    nothing for tensors whose bytes are not their dense values, nor for a storage given a new block."""
    from neuron_mlir.frontend.device import storage

    find = storage._cached_array
    assert find is not None
    attribute = storage._DENSE_ARRAYS_ATTRIBUTE
    storage.device_memory()  # made by the first tensor's Python kernel; the native kernel then takes its blocks
    base = torch.arange(24.0).reshape(4, 6).to("neuron")
    array = find(base, attribute)  # kept by the native `empty` kernel that made the tensor
    assert array is not None
    assert array.ctypes.data == base.data_ptr()
    assert find(base, attribute) is array
    assert storage.dense_array(base) is array
    rows = base[1:3]
    assert find(rows, attribute) is None  # another offset and shape: not kept yet
    kept = storage.dense_array(rows)
    assert kept is not None
    assert find(base[1:3], attribute) is kept
    assert kept.tolist() == base.cpu()[1:3].tolist()
    assert find(base.view(6, 4), attribute) is None
    assert find(base.to(torch.int32), attribute) is None  # another storage
    assert find(base.t(), attribute) is None
    assert storage.dense_array(base.t()) is None
    complex_base = torch.randn(3, 4, dtype=torch.complex64).to("neuron")
    storage.dense_array(complex_base)
    assert find(complex_base, attribute) is not None
    assert find(complex_base.conj(), attribute) is None
    assert find(torch.ones(3), attribute) is None  # a CPU tensor: no kept arrays
    tensor = torch.arange(8.0).to("neuron")
    before = storage.dense_array(tensor)
    tensor.untyped_storage().resize_(64)  # a new block: the arrays over the old one are dropped
    assert find(tensor, attribute) is None
    after = storage.dense_array(tensor)
    assert after is not None
    assert after is not before
    assert after.ctypes.data == storage.block_of(tensor).data.ctypes.data
    with pytest.raises(TypeError):
        find("not a tensor", attribute)
    # several at once (a compiled graph's inputs): the same answers, None for what is not a device tensor
    found = storage.kept_arrays([base, rows, torch.ones(3), 3, None, base.t(), tensor])
    assert found is not None
    expected = [array, kept, None, None, None, None, after]
    assert [value is wanted for value, wanted in zip(found, expected, strict=True)] == [True] * 7


def test_device_memory_is_the_native_address_space():
    """The device's blocks come from the native address space: a tensor's block is taken and given back without
    Python code, and `memory_allocated` follows tensors exactly as they are made and die."""
    from neuron_mlir.frontend.device import storage

    memory = storage.device_memory()
    assert type(memory.space).__name__ == "AddressSpace"
    before = neuron.memory_allocated()
    tensor = torch.ones(1000, device="neuron")
    block = storage.block_of(tensor)
    assert type(block).__module__ == "neuron_hooks"
    assert neuron.memory_allocated() == before + 4000
    freed = memory.stats()["allocation.all.freed"]
    del tensor, block
    assert neuron.memory_allocated() == before
    assert memory.stats()["allocation.all.freed"] == freed + 1


def test_storage_resize_frees_and_brings_back_device_memory():
    """FSDP2's free and re-materialisation of an unsharded parameter: resize_(0), then resize_(n) and a copy."""
    tensor = torch.arange(256, dtype=torch.float32).to("neuron")
    view = tensor[8:16]
    stored = tensor.untyped_storage()
    before = neuron.memory_allocated()
    stored.resize_(0)
    assert stored.nbytes() == 0
    assert tensor.untyped_storage().nbytes() == 0
    assert neuron.memory_allocated() == before - 1024
    stored.resize_(1024)
    assert neuron.memory_allocated() == before
    with torch.no_grad():
        tensor.copy_(torch.arange(256, dtype=torch.float32) * 2)
    assert torch.equal(tensor.cpu(), torch.arange(256, dtype=torch.float32) * 2)
    assert torch.equal(view.cpu(), torch.arange(8, 16, dtype=torch.float32) * 2)  # views see the new bytes


def test_the_arrays_the_simulator_reads_follow_a_resized_storage():
    from neuron_mlir.frontend.device import storage

    tensor = torch.arange(8, dtype=torch.float32).to("neuron")
    array = storage.dense_array(tensor)
    assert storage.dense_array(tensor) is array  # kept on the storage, not made per op
    tensor.untyped_storage().resize_(0)
    tensor.untyped_storage().resize_(32)  # a new block: the kept array shows the old one
    tensor.copy_(torch.ones(8))
    renewed = storage.dense_array(tensor)
    assert renewed is not None
    assert renewed is not array
    assert renewed.tolist() == [1.0] * 8


def test_storage_resize_keeps_the_leading_bytes():
    tensor = torch.arange(16, dtype=torch.int32).to("neuron")
    tensor.untyped_storage().resize_(128)
    assert torch.equal(tensor.cpu(), torch.arange(16, dtype=torch.int32))
    grown = torch.empty(0, dtype=torch.int32, device="neuron").set_(tensor.untyped_storage(), 0, (32,), (1,))
    assert torch.equal(grown[:16].cpu(), torch.arange(16, dtype=torch.int32))
    tensor.untyped_storage().resize_(16)
    shrunk = torch.empty(0, dtype=torch.int32, device="neuron").set_(tensor.untyped_storage(), 0, (4,), (1,))
    assert torch.equal(shrunk.cpu(), torch.arange(4, dtype=torch.int32))


def test_storage_resize_beyond_the_hbm_is_out_of_memory():
    tensor = torch.ones(4, device="neuron")
    capacity = neuron.mem_get_info()[1]
    with pytest.raises(torch.OutOfMemoryError, match="tried to allocate"):
        tensor.untyped_storage().resize_(2 * capacity)
    assert tensor.untyped_storage().nbytes() == 16
    assert torch.equal(tensor.cpu(), torch.ones(4))


def test_generators_on_the_device_draw_the_cpu_generators_numbers():
    generator = torch.Generator(device="neuron")
    assert generator.device == torch.device("neuron", 0)
    generator.manual_seed(7)
    first = torch.randn(6, device="neuron", generator=generator)
    second = torch.randn(6, device="neuron", generator=generator)
    host = torch.Generator().manual_seed(7)
    assert torch.equal(first.cpu(), torch.randn(6, generator=host))
    assert torch.equal(second.cpu(), torch.randn(6, generator=host))  # the device generator advanced
    state = generator.get_state()
    again = torch.rand(3, device="neuron", generator=generator)
    generator.set_state(state)
    assert torch.equal(torch.rand(3, device="neuron", generator=generator).cpu(), again.cpu())
    clone = generator.clone_state()
    assert clone.device == generator.device
    from_clone = torch.rand(3, generator=clone, device="neuron")
    assert torch.equal(from_clone.cpu(), torch.rand(3, generator=generator, device="neuron").cpu())


def test_the_default_generator_is_the_devices():
    (default,) = neuron.default_generators
    assert default.device == torch.device("neuron", 0)
    torch.manual_seed(11)
    assert default.initial_seed() == 11
    drawn = torch.rand(4, device="neuron")
    default.manual_seed(11)
    assert torch.equal(torch.rand(4, device="neuron").cpu(), drawn.cpu())
    assert torch.equal(drawn.cpu(), torch.rand(4, generator=torch.Generator().manual_seed(11)))


def test_pinned_memory_belongs_to_the_device():
    pinned = torch.arange(64, dtype=torch.float32).pin_memory()
    assert pinned.is_pinned()
    assert pinned[10:20].is_pinned()  # a pointer inside a pinned block
    assert torch.equal(pinned, torch.arange(64, dtype=torch.float32))
    assert not torch.arange(64, dtype=torch.float32).is_pinned()
    assert torch.empty(8, pin_memory=True).is_pinned()
    device = pinned.to("neuron", non_blocking=True)
    assert torch.equal(device.cpu(), pinned)


def test_without_native_hooks_the_device_works_and_says_what_is_missing(tmp_path):
    """No compiler: the device registers torch's Python hooks, warns once naming what then fails."""
    script = (
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import torch\n"
        "print([str(w.message) for w in caught if 'native hooks' in str(w.message)])\n"
        "assert torch.equal((torch.ones(3, device='neuron') + 1).cpu(), torch.full((3,), 2.0))\n"
        # views through the Python fallback, a backward through torch's Python device guard
        "base = torch.arange(6.0).to('neuron')\n"
        "base.view(2, 3).t()[1].mul_(-1)\n"
        "assert base.cpu().tolist() == [0.0, -1.0, 2.0, 3.0, -4.0, 5.0]\n"
        "weight = torch.ones(3, device='neuron', requires_grad=True)\n"
        "(weight * 3).sum().backward()\n"
        "assert torch.equal(weight.grad.cpu(), torch.full((3,), 3.0))\n"
        "try:\n"
        "    torch.ones(3, device='neuron').untyped_storage().resize_(0)\n"
        "except NotImplementedError as error:\n"
        "    print('resize:', error)\n"
    )
    environment = {
        **os.environ,
        "CXX": "/bin/false",
        "NEURON_MLIR_NATIVE_DIR": str(tmp_path),
        "NEURON_MLIR_EAGER": "host",
    }
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=environment, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    warned, resize = result.stdout.splitlines()[:2]
    assert "building neuron_hooks.cpp failed" in warned
    assert "resize_ (FSDP2)" in warned
    assert resize.startswith("resize:")
    assert "resizePrivateUse1Bytes" in resize


def test_storages_torch_allocates_itself_take_device_memory():
    """`torch.UntypedStorage(n, device=...)` and storage copies go through the device's C++ allocator."""
    before = neuron.memory_allocated()
    stored = torch.UntypedStorage(64, device="neuron")
    assert stored.device == torch.device("neuron", 0)
    assert neuron.memory_allocated() == before + 64
    tensor = torch.empty(0, dtype=torch.float32, device="neuron").set_(stored, 0, (16,), (1,))
    tensor.fill_(3.0)
    assert torch.equal((tensor * 2).cpu(), torch.full((16,), 6.0))
    stored.resize_(128)
    assert torch.equal(tensor.cpu(), torch.full((16,), 3.0))
    copied = torch.arange(4, dtype=torch.float32).untyped_storage().to(device="neuron")
    assert torch.equal(torch.empty(0, device="neuron").set_(copied).cpu(), torch.arange(4, dtype=torch.float32))
    moved = cast(Any, torch.ones(2).untyped_storage()).neuron()  # the device's storage methods
    assert moved.is_neuron
    assert moved.device == torch.device("neuron", 0)
    del stored, tensor, copied, moved
    assert neuron.memory_allocated() == before
    with pytest.raises(torch.OutOfMemoryError, match="tried to allocate"):
        torch.UntypedStorage(2 * neuron.mem_get_info()[1], device="neuron")


@pytest.mark.parametrize("op", ["fill_.Scalar", "empty.memory_format", "empty_strided"])
def test_the_loss_gradients_ops_have_native_kernels(op: str):
    """`ones_like` (the gradient `loss.backward()` starts from) is an `empty` and a `fill_`: both reach C++ kernels,
    not the Python fallback."""
    table = torch._C._dispatch_dump_table(f"aten::{op}")
    entry = next(line for line in table.splitlines() if line.startswith("PrivateUse1:"))
    assert "neuron_hooks.cpp" in entry


def test_empty_through_the_native_kernels():
    """A contiguous `empty` or `empty_strided` is made in C++ from the device memory (its bytes counted, given back
    with the tensor); other layouts, negative sizes and requests beyond the HBM take the Python kernels, with their
    strides and errors."""
    from neuron_mlir.frontend.device import storage

    memory = storage.device_memory()
    before = memory.allocated_bytes
    made = [
        torch.empty(3, 4, device="neuron"),
        torch.empty_strided((2, 5), (5, 1), dtype=torch.int16, device="neuron"),
        torch.empty((), dtype=torch.float64, device="neuron"),
        torch.empty(0, 3, dtype=torch.bfloat16, device="neuron"),
        torch.empty_like(torch.empty(2, 3, device="neuron")),
    ]
    for tensor in made:
        assert tensor.device == torch.device("neuron", 0)
        assert tensor.is_contiguous()
        assert storage.block_of(tensor).nbytes == tensor.numel() * tensor.element_size()
        # the array a program reads it through, kept over its bytes, for the dtypes NumPy has itself
        kept = storage.kept_arrays([tensor])
        assert kept is not None
        if tensor.dtype == torch.bfloat16:
            assert kept == [None]
        else:
            array = kept[0]
            assert array is not None
            assert array is storage.dense_array(tensor)
            assert array.ctypes.data == tensor.data_ptr()
    assert [t.dtype for t in made] == [torch.float32, torch.int16, torch.float64, torch.bfloat16, torch.float32]
    assert memory.allocated_bytes == before + 48 + 20 + 8 + 0 + 24
    strided = torch.empty_strided((3, 4), (1, 3), device="neuron")
    channels_last = torch.empty(2, 3, 4, 5, device="neuron", memory_format=torch.channels_last)
    assert (strided.stride(), channels_last.stride()) == ((1, 3), (60, 1, 15, 3))
    with torch.device("neuron"):
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            assert torch.empty(2).dtype == torch.float64
        finally:
            torch.set_default_dtype(previous)
    del made, tensor, strided, channels_last
    assert memory.allocated_bytes == before
    with pytest.raises(ValueError, match="negative size"):
        torch.empty(-1, 2, device="neuron")
    with pytest.raises(RuntimeError, match="channels_last"):
        torch.empty(2, 3, device="neuron", memory_format=torch.channels_last)
    with pytest.raises(torch.OutOfMemoryError, match="tried to allocate"):
        torch.empty(1 << 40, device="neuron")


def _fill_record() -> tuple[Any, ...]:
    """What a fill leaves besides its values: the stream's clock and programs, the eager counters, the time per op
    and line, the profiles' run count."""
    from neuron_mlir.frontend import stats
    from neuron_mlir.frontend.device import eager, sources, streams

    stream = streams.current_stream()
    times = {key: (entry.calls, entry.simulated_ns) for key, entry in sources.EAGER_TIMES.items() if "fill" in key[0]}
    return stream.simulated_ns, stream.programs_run, dict(eager.EAGER_STATS.native_ops), times, stats.STATS.runs


_FILLS = [
    (torch.float32, 1.0),
    (torch.float32, -0.0),
    (torch.float32, float("nan")),
    (torch.float32, float("-inf")),
    (torch.float32, 3),
    (torch.bfloat16, 0.1),
    (torch.float16, -2.5),
    (torch.float8_e4m3fn, 1.5),
    (torch.int32, -7),
    (torch.int64, (1 << 40) + 3),
    (torch.int8, True),
    (torch.bool, True),
    (torch.bool, 0.0),
    (torch.complex64, 1 - 2j),
]


@pytest.mark.parametrize(("dtype", "value"), _FILLS, ids=[f"{str(d).removeprefix('torch.')}-{v}" for d, v in _FILLS])
def test_a_fill_replayed_in_cpp_is_the_python_replay(dtype: torch.dtype, value: Any, monkeypatch, fresh_eager):
    """A constant fill outside a region writes its first run's output again (`eager._replay`); the native kernel does
    so itself for a dense tensor: the same bytes (-0.0 and NaN included, every dtype), the same simulated time on the
    stream, the same counts and time for the op and the user's line, the same profile runs, as the Python path's
    replay; non-contiguous and view tensors take the Python path, which writes them as before; inside a pending
    region the fill is recorded, not replayed."""
    from neuron_mlir.frontend.device import dispatch, eager, region

    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    region.flush()
    python_replays: list[int] = []
    replay = eager._replay

    def counted(program: Any, name: str, written: Any) -> bool:
        python_replays.extend([1] if "fill" in name else [])
        return replay(program, name, written)

    monkeypatch.setattr(eager, "_replay", counted)
    expected = torch.full((4, 6), value, dtype=dtype)
    target = torch.empty(4, 6, dtype=dtype, device="neuron")
    target.fill_(value)  # the first run, by the Python path, which hands its kept output to the native kernel
    assert not python_replays
    if dtype != torch.complex64:  # complex values run as (real, imaginary) pairs: a program of another shape
        # the Python path's replay, called as the fallback would call it, against the native kernel's
        name = "aten.fill_.Scalar"
        records = []
        for native_kernel in (False, True):
            target.zero_()
            before = _fill_record()
            line = f"{__file__}:{sys._getframe().f_lineno + (2 if native_kernel else 4)}"
            if native_kernel:
                target.fill_(value)
            else:
                dispatch.neuron_fallback(torch.ops.aten.fill_.Scalar, target, value)
            after = _fill_record()
            calls, simulated_ns = after[3][(name, line)]
            assert (calls, before[3].get((name, line))) == (1, None)
            assert simulated_ns > 0
            assert after[:2] == (before[0] + simulated_ns, before[1] + 1)  # the stream's clock and programs
            assert after[2][name] == before[2][name] + 1
            assert after[4] == before[4] + 1
            records.append((simulated_ns, target.cpu().view(torch.uint8).clone()))
        assert len(python_replays) == 1  # the fallback's call replayed in Python, the kernel's natively
        python_bytes = records[0][1]
        assert records[1][0] == records[0][0]
        assert torch.equal(target.cpu().view(torch.uint8), python_bytes)
    assert torch.equal(target.cpu().view(torch.uint8), expected.view(torch.uint8)) or (
        dtype.is_floating_point and torch.equal(target.cpu().isnan(), expected.isnan())
    )
    # views: a contiguous part of a tensor natively, strided and expanded ones by the Python path
    base = torch.zeros(4, 6, dtype=dtype, device="neuron")
    base[1].fill_(value)
    base[:, ::3].fill_(value)
    torch.zeros(6, dtype=dtype, device="neuron").expand(4, 6).fill_(value)
    reference = torch.zeros(4, 6, dtype=dtype)
    reference[1].fill_(value)
    reference[:, ::3].fill_(value)
    torch.testing.assert_close(base.cpu(), reference, equal_nan=True, rtol=0, atol=0)
    # inside a pending region: recorded with the op before it (a complex fill runs alone, after the region)
    other = torch.ones(4, 6, device="neuron")
    product = other * 2
    target.fill_(value)
    assert region.pending_ops() == (0 if dtype.is_complex else 2)
    torch.testing.assert_close(target.cpu(), expected, equal_nan=True, rtol=0, atol=0)
    assert torch.equal(product.cpu(), torch.full((4, 6), 2.0))


def test_the_native_fill_follows_the_eager_mode_and_reset(monkeypatch, fresh_eager):
    """A kept fill is replayed natively only while ops compile: on the host (`NEURON_MLIR_EAGER=host`) it is a host
    op; `eager.reset` forgets it with the programs, so the next fill compiles and runs again."""
    from neuron_mlir.frontend.device import eager, region

    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    region.flush()
    target = torch.empty(3, 5, device="neuron")
    for _ in range(3):
        target.fill_(2.0)
    compiled = eager.EAGER_STATS.compiled_signatures
    monkeypatch.setenv("NEURON_MLIR_EAGER", "host")
    target.fill_(2.0)
    assert eager.EAGER_STATS.host_ops["aten.fill_.Scalar"] == 1
    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    target.fill_(2.0)
    assert eager.EAGER_STATS.compiled_signatures == compiled
    eager.reset()
    target.zero_()
    region.flush()
    target.fill_(2.0)
    assert eager.EAGER_STATS.compiled_signatures == 2  # the zero_, and the fill compiled again
    assert torch.equal(target.cpu(), torch.full((3, 5), 2.0))


def test_the_loss_gradients_fill_is_counted_at_the_users_backward_line(monkeypatch, fresh_eager):
    """`loss.backward()` makes its gradient (`ones_like`) from torch's Python frames: replayed natively or not, the
    fill is counted under the line that called `backward()`."""
    from neuron_mlir.frontend.device import sources

    monkeypatch.setenv("NEURON_MLIR_EAGER", "compile")
    weight = torch.ones(3, device="neuron", requires_grad=True)
    line = ""
    for _ in range(3):  # the first fill runs, the next two replay
        loss = (weight * 2).sum()
        neuron.synchronize()  # the loss's region runs: the fill is outside a region
        line = f"{__file__}:{sys._getframe().f_lineno + 1}"
        loss.backward()
    assert sources.EAGER_TIMES[("aten.fill_.Scalar", line)].calls == 3
    assert weight.grad is not None
    assert torch.equal(weight.grad.cpu(), torch.full((3,), 6.0))
