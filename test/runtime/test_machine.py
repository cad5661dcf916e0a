"""The machine's memories: host memory only for what the plan uses, aliasing, NaN-filled fresh memory, views."""

from __future__ import annotations

import numpy as np

from neuron_mlir.runtime.hardware import TRN2, Memory
from neuron_mlir.runtime.machine import Machine
from neuron_mlir.runtime.program import Access, BufferDecl
from neuron_mlir.runtime.validate import memory_sizes


def test_host_memory_covers_only_the_buffers():
    buffers = [
        BufferDecl("far", Memory.HBM, 10 * 2**30, (1024,), "f32"),
        BufferDecl("near", Memory.HBM, 0, (16,), "bf16"),
        BufferDecl("tile", Memory.SBUF, 200 * 1024, (128, 64), "f32"),
        BufferDecl("acc", Memory.PSUM, 2048, (128, 512), "f32"),
    ]
    machine = Machine(buffers, memory_sizes(TRN2))
    assert machine.bytes_held == 4096 + 32 + 128 * 256 + 128 * 2048


def test_buffers_sharing_bytes_share_memory():
    buffers = [
        BufferDecl("a", Memory.SBUF, 1024, (128, 16), "f32"),
        BufferDecl("b", Memory.SBUF, 1024 + 32, (128, 8), "bf16"),
    ]
    machine = Machine(buffers, memory_sizes(TRN2))
    a = machine.view(0, Access(0, ((1, 16),), partitions=128))
    b = machine.view(1, Access(1, ((1, 8),), partitions=128))
    assert np.isnan(a).all()
    assert np.isnan(b.astype(np.float32)).all()
    a[...] = 1.0
    assert (b.view(np.uint16)[:, 1::2] == np.float32(1.0).view(np.uint32) >> 16).all()


def test_views_follow_partition_rows_and_negative_steps():
    buffers = [BufferDecl("t", Memory.SBUF, 64, (4, 6), "i32")]
    machine = Machine(buffers, memory_sizes(TRN2))
    whole = machine.buffer_view(0, (4, 6))
    whole[...] = np.arange(24).reshape(4, 6)
    reversed_columns = machine.view(0, Access(0, ((-2, 3),), offset=5, partition_start=1, partitions=2))
    np.testing.assert_array_equal(reversed_columns, [[11, 9, 7], [17, 15, 13]])
