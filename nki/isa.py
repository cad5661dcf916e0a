"""`nki.isa`: the NeuronCore instructions a kernel issues, each traced into the neuron dialect's instruction.

Signatures are NKI 0.6's: the destination first, nothing returned. Most calls are one neuron instruction of the
same name (`dma_copy`, `nc_matmul`, `activation`, `tensor_tensor`, `tensor_scalar`, `scalar_tensor_tensor`,
`tensor_reduce`, `tensor_copy`, `memset`, `iota`, `affine_select`, `dma_transpose`). The others are short,
fixed sequences of them, named in their docstrings: `nc_transpose` is a TensorE transpose (or a product with
an identity where the target's transpose is not bit exact), `tensor_partition_reduce` a product with a ones
column (a sum) or two transposes around a free-axis reduction, `reciprocal` a power of -1 on VectorE,
`exponential` an activation with a bias, `bn_stats`/`bn_aggr` reductions writing a per-partition statistics
record.

Every instruction is verified as it is traced (see `tracing.py`): a broken hardware rule is an `NkiError`
naming the call, the operand, the rule and the kernel's line. NKI's optional `name=` of an instruction is
accepted; the profile names instructions by the kernel's source line instead.
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np
from xdsl.dialects.builtin import DenseArrayBase, FloatAttr, IntegerAttr, StringAttr, f64, i1, i64
from xdsl.ir import Attribute, SSAValue

from neuron_mlir.ir.dialects import neuron
from neuron_mlir.nki import operators
from neuron_mlir.nki.tracing import NkiTensor, dtype_name, error, trace
from neuron_mlir.runtime import isa
from neuron_mlir.runtime.hardware import PARTITIONS, Engine, Memory


class engine(enum.Enum):
    """Which engine runs an instruction that several can run (`unknown`: the default for that instruction)."""

    unknown = "unknown"
    tensor = "tensor"
    vector = "vector"
    scalar = "scalar"
    gpsimd = "gpsimd"
    sync = "sync"


tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown


class reduce_cmd(enum.Enum):
    idle = "idle"
    reset = "reset"
    reset_reduce = "reset_reduce"
    reduce = "reduce"


class matmul_perf_mode(enum.Enum):
    """TensorE's performance mode of `nc_matmul`: `double_row` pairs full 128-row fp8 tiles (NeuronCore-v3 and
    later). The simulated core charges fp8 matmuls of full tiles that rate on those targets either way."""

    none = "none"
    double_row = "double_row"


class oob_mode(enum.Enum):
    """What a DMA does with an out-of-bounds index. The accesses a kernel writes here are direct and checked
    while tracing (over every trip of a loop), so an index outside a tensor is a trace error in either mode."""

    error = "error"
    skip = "skip"


_FP8 = frozenset({"f8e4m3", "f8e5m2"})


def _check_perf_mode(api: str, mode: Any, stationary: NkiTensor, moving: NkiTensor, is_transpose: bool) -> None:
    """The public rules of `perf_mode`: a `matmul_perf_mode` (or its name); double_row needs a target with
    TensorE's fp8 double-row mode (not NeuronCore-v2), fp8 operands, and is no transpose."""
    if mode is None:
        return
    try:
        chosen = mode if isinstance(mode, matmul_perf_mode) else matmul_perf_mode(str(mode))
    except ValueError:
        raise error(f"{api}: perf_mode {mode!r} is not an nki.isa.matmul_perf_mode") from None
    if chosen is matmul_perf_mode.none:
        return
    target = trace().target
    if target.matmul_fp8_speedup < 2:
        raise error(f"{api}: perf_mode double_row is not supported on {target.name} ({target.core_version})")
    dtypes = {dtype_name(tensor.dtype) for tensor in (stationary, moving)}
    if not dtypes <= _FP8:
        raise error(f"{api}: perf_mode double_row multiplies fp8 operands, got {', '.join(sorted(dtypes))}")
    if is_transpose:
        raise error(f"{api}: perf_mode double_row cannot transpose")


def _engine(choice: Any, default: Engine, api: str) -> Engine:
    if choice is None or choice is engine.unknown:
        return default
    if isinstance(choice, engine):
        return Engine(choice.value)
    raise error(f"{api}: engine {choice!r} is not an nki.isa.engine")


def _tensor(value: Any, api: str, role: str) -> NkiTensor:
    if not isinstance(value, NkiTensor):
        raise error(f"{api}: {role} must be a tensor, got {type(value).__name__}")
    return value


def _float(value: float) -> FloatAttr:
    return FloatAttr(float(value), f64)


def _flag(value: bool) -> IntegerAttr:
    return IntegerAttr(int(bool(value)), i1)


def _scalar_or_column(
    value: Any, api: str, role: str, accesses: dict[str, Any], props: dict[str, Attribute], immediate: str
) -> None:
    """A tensor_scalar-style operand: an fp32 immediate, or a per-partition [P, 1] tile."""
    if isinstance(value, NkiTensor):
        accesses[role] = value
    elif isinstance(value, int | float | np.integer | np.floating):
        props[immediate] = _float(float(value))
    else:
        raise error(f"{api}: {role} must be a number or a [P, 1] tile, got {type(value).__name__}")


# ---- data movement -------------------------------------------------------------------------------------------


def dma_copy(
    dst: NkiTensor,
    src: NkiTensor,
    priority: Any = None,
    oob_mode: Any = None,
    dge_mode: Any = None,
    engine: Any = None,
    mask: Any = None,
    name: str | None = None,
) -> None:
    """dst = src between HBM and SBUF, element by element in row-major order (equal counts, dtype converted)."""
    api = "nki.isa.dma_copy"
    if mask is not None:
        raise error(f"{api}: mask= was removed in NKI 0.2; slice the tensors instead")
    trace().emit(api, neuron.DmaCopyOp, Engine.DMA, {"dst": _tensor(dst, api, "dst"), "src": _tensor(src, api, "src")})


class dge_mode(enum.Enum):
    """Where a DMA's descriptors come from. The simulated core prices every DMA the same way whatever the
    mode, so the choice only selects which of NKI's rules a call must keep."""

    unknown = "unknown"
    none = "none"
    swdge = "swdge"
    hwdge = "hwdge"


_DMA_TRANSPOSE_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


def dma_transpose(
    dst: NkiTensor,
    src: NkiTensor,
    axes: Any = None,
    priority: Any = None,
    dge_mode: Any = None,
    oob_mode: Any = None,
    name: str | None = None,
) -> None:
    """dst = src with its axes permuted by the DMA engine (`neuron.dma_transpose`, NeuronCore-v3 on), dst in SBUF,
    both of one 2-byte dtype: NKI's permutations, (1, 0) of a 2-D src, (2, 1, 0) of a 3-D one, (3, 1, 2, 0) of a
    4-D one, so src's last axis always becomes dst's partitions.

    The instruction transposes src's elements, read in row-major order as an [R, C] matrix, into dst's C
    partitions; the other axes' order in dst is the pattern in which dst's free elements are written. The
    indirect (software DGE) form is refused by name; on a target without DMA transposes (trn1) the
    instruction's own rule refuses the call at the kernel's line."""
    api = "nki.isa.dma_transpose"
    dst, src = _tensor(dst, api, "dst"), _tensor(src, api, "src")
    order = _DMA_TRANSPOSE_AXES.get(src.ndim)
    if order is None or dst.ndim != src.ndim or (axes is not None and tuple(axes) != order):
        raise error(
            f"{api}: the permutations are (1, 0), (2, 1, 0) and (3, 1, 2, 0) of a 2-, 3- or 4-D src, got src "
            f"{list(src.shape)}, dst {list(dst.shape)}, axes {axes}"
        )
    expected = [src.shape[axis] for axis in order]
    if list(dst.shape) != expected:
        raise error(f"{api}: dst must be src permuted by {order}, {expected}, got {list(dst.shape)}")
    mode = "unknown" if dge_mode is None else getattr(dge_mode, "value", dge_mode)
    if mode == "swdge" or mode == "none":
        raise error(f"{api}: dge_mode {mode} is not a direct transpose (only unknown and hwdge are)")
    if mode == "hwdge" and (src.shape[0] != 16 or src.shape[-1] % 128):
        raise error(
            f"{api}: a hardware-DGE transpose needs src.shape[0] == 16 and src.shape[-1] a multiple of 128, "
            f"got {list(src.shape)}"
        )
    source: NkiTensor | tuple[NkiTensor, neuron.AccessPatternAttr] = src
    if not src.buffer.on_chip:  # the instruction reads HBM row by row: keep the row dimension unmerged
        source = (src, src.access_pattern(list(zip(src.strides, src.shape, strict=True))))
    written: NkiTensor | tuple[NkiTensor, neuron.AccessPatternAttr] = dst
    if src.ndim > 2:  # src's leading axes, outermost first, at their places in dst
        written = (dst, dst.access_pattern([(dst.strides[order.index(i)], src.shape[i]) for i in range(src.ndim - 1)]))
    trace().emit(api, neuron.DmaTransposeOp, Engine.DMA, {"dst": written, "src": source})


def tensor_copy(dst: NkiTensor, src: NkiTensor, engine: Any = None, name: str | None = None) -> None:
    """dst = src on chip (VectorE by default), converting the dtype: how PSUM results reach SBUF."""
    api = "nki.isa.tensor_copy"
    trace().emit(
        api,
        neuron.TensorCopyOp,
        _engine(engine, Engine.VECTOR, api),
        {"dst": _tensor(dst, api, "dst"), "src": _tensor(src, api, "src")},
    )


def memset(dst: NkiTensor, value: float, engine: Any = None, name: str | None = None) -> None:
    """Fill dst with `value` (VectorE by default)."""
    api = "nki.isa.memset"
    trace().emit(
        api,
        neuron.MemsetOp,
        _engine(engine, Engine.VECTOR, api),
        {"dst": _tensor(dst, api, "dst")},
        {"value": _float(value)},
    )


# ---- TensorE ---------------------------------------------------------------------------------------------------


def nc_matmul(
    dst: NkiTensor,
    stationary: NkiTensor,
    moving: NkiTensor,
    is_stationary_onezero: bool = False,
    is_moving_onezero: bool = False,
    is_transpose: bool = False,
    accumulate: bool | None = None,
    tile_position: Any = (),
    tile_size: Any = (),
    perf_mode: Any = None,
    name: str | None = None,
) -> None:
    """dst[M, N] (=|+=) stationary[K, M]^T @ moving[K, N] into PSUM.

    `accumulate=None`: the first write to the PSUM tile's elements overwrites, later ones add (NKI's rule; in a
    traced loop, a register condition: see `Trace.first_write_accumulates`); True adds (the elements must hold
    data), False overwrites.

    `tile_position=(start_row, 0)` with `tile_size=(row_size, 128)`: TensorE's row tiling mode, the matmul on PE
    rows start_row .. start_row + row_size - 1 alone (its operands on those partitions), beside matmuls in other
    row tiles. Both or neither are given; column tiling is not supported (start column 0, column size 128)."""
    api = "nki.isa.nc_matmul"
    dst = _tensor(dst, api, "dst")
    row_tile = _row_tile(api, tile_position, tile_size)
    stationary, moving = _tensor(stationary, api, "stationary"), _tensor(moving, api, "moving")
    _check_perf_mode(api, perf_mode, stationary, moving, is_transpose)
    current = trace()
    decided: bool | SSAValue = current.first_write_accumulates(api, dst) if accumulate is None else bool(accumulate)
    if decided is True and accumulate:
        current.check_written(api, dst, "dst (accumulate=True)")
    props: dict[str, Attribute] = {}
    dynamic: dict[str, SSAValue] = {}
    if isinstance(decided, SSAValue):
        dynamic["accumulate"] = decided
    elif decided:
        props["accumulate"] = _flag(True)
    if is_transpose:
        props["is_transpose"] = _flag(True)
    if row_tile is not None:
        props["row_tile_start"] = IntegerAttr(row_tile[0], i64)
        props["row_tile_size"] = IntegerAttr(row_tile[1], i64)
    trace().emit(
        api,
        neuron.MatmulOp,
        Engine.TENSOR,
        {"dst": dst, "stationary": _tensor(stationary, api, "stationary"), "moving": _tensor(moving, api, "moving")},
        props,
        dynamic,
    )


def _row_tile(api: str, tile_position: Any, tile_size: Any) -> tuple[int, int] | None:
    """nc_matmul's (start row, row size) from NKI's tiling arguments; None for the whole PE array. Which sizes and
    starts a target allows is the instruction's rule (`neuron.nc_matmul`'s verifier)."""
    if not tile_position and not tile_size:
        return None
    if not tile_position or not tile_size:
        raise error(f"{api}: tile_position and tile_size enable tiling mode together; give both or neither")
    pairs = []
    for name, value in (("tile_position", tile_position), ("tile_size", tile_size)):
        if not (
            isinstance(value, tuple | list)
            and len(value) == 2
            and all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in value)
        ):
            raise error(f"{api}: {name} must be a pair of integers, got {value!r}")
        pairs.append((int(value[0]), int(value[1])))
    (start_row, start_column), (row_size, column_size) = pairs
    if start_column != 0 or column_size != PARTITIONS:
        raise error(
            f"{api}: column tiling is not supported (tile_position's start column must be 0 and tile_size's "
            f"column size {PARTITIONS}, got {start_column} and {column_size})"
        )
    if row_size == PARTITIONS and start_row == 0:
        return None  # the whole array: NKI's default
    return start_row, row_size


def identity(size: int, dtype: np.dtype) -> NkiTensor:
    """The trace's [size, size] identity tile in SBUF (built once: a memset and an affine_select)."""
    current = trace()

    def build() -> NkiTensor:
        ones = current.allocate((size, size), dtype, Memory.SBUF, "ones")
        memset(ones, 1.0)
        eye = current.allocate((size, size), dtype, Memory.SBUF, "identity")
        affine_select(eye, [[-1, size]], 1, ones, 0.0, cmp_op="is_equal")
        return eye

    return current.constant(("identity", size, np.dtype(dtype).str), build)


def nc_transpose(dst: NkiTensor, data: NkiTensor, engine: Any = None, name: str | None = None) -> None:
    """dst[F, P] = data[P, F]^T on TensorE, from SBUF into PSUM.

    Where the target's PE transpose is bit exact (trn2, trn3) it is `nc_matmul(is_transpose)`, and dst keeps
    data's dtype; on trn1 it is the product with an identity, and dst is fp32."""
    api = "nki.isa.nc_transpose"
    dst, data = _tensor(dst, api, "dst"), _tensor(data, api, "data")
    if engine is not None and engine not in (tensor_engine, unknown_engine):
        raise error(f"{api}: only the Tensor engine transpose is supported")
    if data.ndim != 2:
        raise error(f"{api}: data must be a 2-D tile [P, F], got {list(data.shape)}")
    partitions = data.shape[0]
    eye = identity(partitions, data.dtype)
    if trace().target.matmul_transpose_bit_exact:
        nc_matmul(dst, eye, data, is_transpose=True, accumulate=False)
    else:
        nc_matmul(dst, data, eye, accumulate=False)


# ---- ScalarE ---------------------------------------------------------------------------------------------------


def activation(
    dst: NkiTensor,
    op: Any,
    data: NkiTensor,
    bias: Any = None,
    scale: Any = 1.0,
    reduce_op: Any = None,
    reduce_res: NkiTensor | None = None,
    reduce_cmd: Any = None,
    name: str | None = None,
) -> None:
    """dst = op(data * scale + bias) on ScalarE; with `reduce_res` ([P, 1]) the free-axis sum of dst too."""
    api = "nki.isa.activation"
    props: dict[str, Attribute] = {"func": StringAttr(operators.activation_name(op, api))}
    accesses: dict[str, Any] = {"dst": _tensor(dst, api, "dst"), "src": _tensor(data, api, "data")}
    if isinstance(scale, NkiTensor):
        accesses["scale_vector"] = scale
    elif float(scale) != 1.0:
        props["scale"] = _float(scale)
    if isinstance(bias, NkiTensor):
        accesses["bias"] = bias
    elif bias is not None:
        props["bias_value"] = _float(bias)
    if reduce_res is not None:
        if reduce_op is not None and operators.reduce_name(reduce_op, api) != "add":
            raise error(f"{api}: reduce_op must be nl.add (ScalarE sums along the free axes)")
        accesses["accumulate_dst"] = _tensor(reduce_res, api, "reduce_res")
    trace().emit(api, neuron.ActivationOp, Engine.SCALAR, accesses, props)


def activation_reduce(
    dst: NkiTensor,
    op: Any,
    data: NkiTensor,
    reduce_op: Any,
    reduce_res: NkiTensor,
    bias: Any = None,
    scale: Any = 1.0,
    name: str | None = None,
) -> None:
    """`activation` that also writes the free-axis sum of dst into reduce_res ([P, 1])."""
    activation(dst, op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res)


def exponential(
    dst: NkiTensor,
    src: NkiTensor,
    max_value: Any = 0.0,
    reduce_res: NkiTensor | None = None,
    name: str | None = None,
    **_: Any,
) -> None:
    """dst = exp(src - max_value) (max_value a number or a [P, 1] tile), with the row sum into reduce_res."""
    api = "nki.isa.exponential"
    bias: Any
    if isinstance(max_value, NkiTensor):
        bias = trace().allocate(max_value.shape, np.dtype(np.float32), Memory.SBUF, "neg_max")
        tensor_scalar(bias, max_value, operators.BINARY["multiply"], -1.0)
    else:
        bias = -float(max_value)
    activation(dst, operators.UNARY["exp"], _tensor(src, api, "src"), bias=bias, reduce_res=reduce_res)


# ---- VectorE and GpSimdE ---------------------------------------------------------------------------------------


def tensor_tensor(
    dst: NkiTensor, data1: NkiTensor, data2: NkiTensor, op: Any, engine: Any = None, name: str | None = None
) -> None:
    """dst = data1 op data2 elementwise (VectorE by default)."""
    api = "nki.isa.tensor_tensor"
    trace().emit(
        api,
        neuron.TensorTensorOp,
        _engine(engine, Engine.VECTOR, api),
        {"dst": _tensor(dst, api, "dst"), "in0": _tensor(data1, api, "data1"), "in1": _tensor(data2, api, "data2")},
        {"op": StringAttr(operators.alu_name(op, api))},
    )


def tensor_scalar(
    dst: NkiTensor,
    data: NkiTensor,
    op0: Any,
    operand0: Any,
    reverse0: bool = False,
    op1: Any = None,
    operand1: Any = None,
    reverse1: bool = False,
    engine: Any = None,
    name: str | None = None,
) -> None:
    """dst = (data op0 operand0) op1 operand1, each operand a number or a [P, 1] tile (VectorE by default)."""
    api = "nki.isa.tensor_scalar"
    accesses: dict[str, Any] = {"dst": _tensor(dst, api, "dst"), "src": _tensor(data, api, "data")}
    props: dict[str, Attribute] = {"op0": StringAttr(operators.alu_name(op0, api, "op0"))}
    _scalar_or_column(operand0, api, "operand0", accesses, props, "scalar0")
    if reverse0:
        props["reverse0"] = _flag(True)
    if op1 is not None:
        props["op1"] = StringAttr(operators.alu_name(op1, api, "op1"))
        _scalar_or_column(operand1, api, "operand1", accesses, props, "scalar1")
        if reverse1:
            props["reverse1"] = _flag(True)
    trace().emit(api, neuron.TensorScalarOp, _engine(engine, Engine.VECTOR, api), accesses, props)


def tensor_scalar_reduce(
    dst: NkiTensor,
    data: NkiTensor,
    op0: Any,
    operand0: Any,
    reduce_op: Any,
    reduce_res: NkiTensor,
    reverse0: bool = False,
    name: str | None = None,
) -> None:
    """dst = data op0 operand0, and reduce_res ([P, 1]) = reduce_op of dst over its free axes. A sum after an
    arithmetic operator is one VectorE tensor_scalar writing reduce_res as its `accumulate_dst`; other reductions
    are a tensor_scalar and a tensor_reduce."""
    api = "nki.isa.tensor_scalar_reduce"
    operator = operators.alu_name(op0, api, "op0")
    if operators.reduce_name(reduce_op, api) != "add" or operator not in isa.REDUCING_TENSOR_SCALAR_OPS:
        tensor_scalar(dst, data, op0, operand0, reverse0=reverse0)
        tensor_reduce(reduce_res, reduce_op, dst, axis=tuple(range(1, dst.ndim)))
        return
    accesses: dict[str, Any] = {
        "dst": _tensor(dst, api, "dst"),
        "src": _tensor(data, api, "data"),
        "accumulate_dst": _tensor(reduce_res, api, "reduce_res"),
    }
    props: dict[str, Attribute] = {"op0": StringAttr(operator)}
    _scalar_or_column(operand0, api, "operand0", accesses, props, "scalar0")
    if reverse0:
        props["reverse0"] = _flag(True)
    trace().emit(api, neuron.TensorScalarOp, Engine.VECTOR, accesses, props)


def scalar_tensor_tensor(
    dst: NkiTensor,
    data: NkiTensor,
    op0: Any,
    operand0: Any,
    op1: Any,
    operand1: NkiTensor,
    reverse0: bool = False,
    reverse1: bool = False,
    name: str | None = None,
) -> None:
    """dst = (data op0 operand0) op1 operand1: operand0 a number or a [P, 1] tile, operand1 a tile like data."""
    api = "nki.isa.scalar_tensor_tensor"
    accesses: dict[str, Any] = {
        "dst": _tensor(dst, api, "dst"),
        "src": _tensor(data, api, "data"),
        "in1": _tensor(operand1, api, "operand1"),
    }
    props: dict[str, Attribute] = {
        "op0": StringAttr(operators.alu_name(op0, api, "op0")),
        "op1": StringAttr(operators.alu_name(op1, api, "op1")),
    }
    _scalar_or_column(operand0, api, "operand0", accesses, props, "scalar0")
    if reverse0:
        props["reverse0"] = _flag(True)
    if reverse1:
        props["reverse1"] = _flag(True)
    trace().emit(api, neuron.ScalarTensorTensorOp, Engine.VECTOR, accesses, props)


def _reduced_axes(data: NkiTensor, axis: Any, api: str) -> tuple[int, ...]:
    """The free axes `axis` names, which must be the trailing ones."""
    axes = tuple(int(a) for a in (axis if isinstance(axis, tuple | list) else (axis,)))
    axes = tuple(sorted(a + data.ndim if a < 0 else a for a in axes))
    trailing = tuple(range(data.ndim - len(axes), data.ndim))
    if not axes or axes != trailing or 0 in axes:
        raise error(
            f"{api}: axis {axis} of a {data.ndim}-d tile: reductions run over trailing free axes, never the "
            "partition axis 0"
        )
    return axes


def tensor_reduce(
    dst: NkiTensor,
    op: Any,
    data: NkiTensor,
    axis: Any,
    negate: bool = False,
    keepdims: bool = False,
    name: str | None = None,
) -> None:
    """dst = reduce(op) of data over its trailing free `axis` (VectorE)."""
    api = "nki.isa.tensor_reduce"
    dst, data = _tensor(dst, api, "dst"), _tensor(data, api, "data")
    axes = _reduced_axes(data, axis, api)
    kept = [(data.strides[d], data.shape[d]) for d in range(1, data.ndim) if d not in axes and data.shape[d] > 1]
    reduced = [(data.strides[d], data.shape[d]) for d in axes if data.shape[d] > 1]
    from neuron_mlir.nki.tracing import merge_dims

    kept_pattern = merge_dims(kept) if kept else []
    reduced_pattern = merge_dims(reduced)
    props: dict[str, Attribute] = {
        "op": StringAttr(operators.reduce_name(op, api)),
        "axes": IntegerAttr(len(reduced_pattern), i64),
    }
    if negate:
        props["negate"] = _flag(True)
    trace().emit(
        api,
        neuron.TensorReduceOp,
        Engine.VECTOR,
        {"dst": dst, "src": (data, data.access_pattern(kept_pattern + reduced_pattern))},
        props,
    )


def tensor_partition_reduce(dst: NkiTensor, op: Any, data: NkiTensor, name: str | None = None) -> None:
    """dst[1, F] = reduce(op) of data[P, F] across partitions.

    A sum is the product with a ones column on TensorE (into fp32 PSUM, then copied to dst unless dst is that
    PSUM tile); max and min transpose data to PSUM, reduce the free axis on VectorE and transpose back."""
    api = "nki.isa.tensor_partition_reduce"
    dst, data = _tensor(dst, api, "dst"), _tensor(data, api, "data")
    if data.ndim != 2:
        raise error(f"{api}: data must be a 2-D tile [P, F], got {list(data.shape)}")
    partitions, free = data.shape
    reduce = operators.reduce_name(op, api)
    current = trace()
    if reduce == "add":
        ones = current.allocate((partitions, 1), data.dtype, Memory.SBUF, "ones")
        memset(ones, 1.0)
        if dst.buffer.memory is Memory.PSUM and dst.dtype == np.float32:
            nc_matmul(dst, ones, data, accumulate=False)
            return
        total = current.allocate((1, free), np.dtype(np.float32), Memory.PSUM, "partition_sum")
        nc_matmul(total, ones, data, accumulate=False)
        tensor_copy(dst, total)
        return
    if reduce not in ("max", "min"):
        raise error(f"{api}: op {op!r}: partition reductions are add, maximum and minimum")
    transposed = current.allocate((free, partitions), np.dtype(np.float32), Memory.PSUM, "transposed")
    if current.target.matmul_transpose_bit_exact and data.dtype == np.float32:
        nc_transpose(transposed, data)
    else:
        nc_matmul(transposed, data, identity(partitions, data.dtype), accumulate=False)
    column = current.allocate((free, 1), np.dtype(np.float32), Memory.SBUF, "partition_reduce")
    tensor_reduce(column, operators.BINARY["maximum" if reduce == "max" else "minimum"], transposed, axis=1)
    row = current.allocate((1, free), np.dtype(np.float32), Memory.PSUM, "partition_row")
    nc_matmul(row, column, identity(free, np.dtype(np.float32)), accumulate=False)
    tensor_copy(dst, row)


def reciprocal(dst: NkiTensor, data: NkiTensor, name: str | None = None) -> None:
    """dst = 1 / data on VectorE (the ALU's power of -1)."""
    api = "nki.isa.reciprocal"
    trace().emit(
        api,
        neuron.TensorScalarOp,
        Engine.VECTOR,
        {"dst": _tensor(dst, api, "dst"), "src": _tensor(data, api, "data")},
        {"op0": StringAttr("power"), "scalar0": _float(-1.0)},
    )


def iota(dst: NkiTensor, pattern: Any, offset: int = 0, channel_multiplier: int = 0, name: str | None = None) -> None:
    """dst[p, i...] = offset + p * channel_multiplier + sum(i_d * step_d) over `pattern` [[step, num], ...]."""
    api = "nki.isa.iota"
    trace().emit(
        api,
        neuron.IotaOp,
        Engine.GPSIMD,
        {"dst": _tensor(dst, api, "dst")},
        {
            "pattern": _pattern(pattern, api),
            "base": IntegerAttr(int(offset), i64),
            "channel_multiplier": IntegerAttr(int(channel_multiplier), i64),
        },
    )


def affine_select(
    dst: NkiTensor,
    pattern: Any,
    channel_multiplier: int,
    on_true_tile: NkiTensor,
    on_false_value: float,
    cmp_op: Any = None,
    offset: int = 0,
    name: str | None = None,
) -> None:
    """dst = on_true_tile where cmp_op(offset + p * channel_multiplier + sum(i_d * step_d), 0), else
    on_false_value (GpSimdE); cmp_op defaults to nl.equal."""
    api = "nki.isa.affine_select"
    if cmp_op is None:
        cmp = "is_equal"
    elif isinstance(cmp_op, str):
        cmp = cmp_op
    else:
        cmp = operators.alu_name(cmp_op, api, "cmp_op")
    trace().emit(
        api,
        neuron.AffineSelectOp,
        Engine.GPSIMD,
        {"dst": _tensor(dst, api, "dst"), "on_true": _tensor(on_true_tile, api, "on_true_tile")},
        {
            "cmp": StringAttr(cmp),
            "base": IntegerAttr(int(offset), i64),
            "channel_multiplier": IntegerAttr(int(channel_multiplier), i64),
            "pattern": _pattern(pattern, api),
            "on_false_value": _float(on_false_value),
        },
    )


def _pattern(pattern: Any, api: str) -> DenseArrayBase:
    try:
        pairs = [(int(step), int(num)) for step, num in pattern]
    except (TypeError, ValueError):
        raise error(f"{api}: pattern must be a list of [step, num] pairs, got {pattern!r}") from None
    return DenseArrayBase.from_list(i64, [value for pair in pairs for value in pair])


def dropout(dst: NkiTensor, data: NkiTensor, prob: Any, name: str | None = None) -> None:
    """dst = data with each element replaced by zero with probability `prob` (a number or a [P, 1] tile).

    The draws are counter-based (GpSimdE's Philox `uniform` kernel keyed by the kernel's seed, `nki.jit(seed=)`):
    every element of every call, and of every trip of a traced loop, has a counter of its own, so the run is
    repeatable and no two elements share a draw. Kept elements are not rescaled, as NKI's instruction defines."""
    api = "nki.isa.dropout"
    dst, data = _tensor(dst, api, "dst"), _tensor(data, api, "data")
    if dst.dtype != data.dtype:
        raise error(f"{api}: dst is {dst.dtype} but data is {data.dtype}: dropout keeps the dtype")
    current = trace()
    partitions = data.shape[0]
    free = data.size // partitions
    counters = current.allocate((partitions, free), np.dtype(np.int32), Memory.SBUF, "dropout_counter")
    base, dynamic_base = current.random_counters(partitions * free)
    props: dict[str, Attribute] = {
        "pattern": _pattern([[1, free]], api),
        "channel_multiplier": IntegerAttr(free, i64),
    }
    dynamic: dict[str, SSAValue] = {}
    if dynamic_base is None:
        props["base"] = IntegerAttr(base, i64)
    else:
        dynamic["base"] = dynamic_base
    current.emit(api, neuron.IotaOp, Engine.GPSIMD, {"dst": counters}, props, dynamic)
    key = current.constant(("dropout_key", partitions), lambda: _seed_column(partitions))
    uniform = current.allocate((partitions, free), np.dtype(np.float32), Memory.SBUF, "dropout_uniform")
    current.emit(
        api,
        neuron.GpsimdKernelOp,
        Engine.GPSIMD,
        {"dst": uniform, "in0": counters, "in1": key},
        {"kernel": StringAttr("uniform")},
    )
    # keep where the draw in [0, 1) is at least the drop probability: P(keep) = 1 - prob
    tensor_scalar(uniform, uniform, operators.BINARY["greater_equal"], prob)
    flat = data if data.ndim == 2 else data.reshape_on_chip((partitions, free))
    out = dst if dst.ndim == 2 else dst.reshape_on_chip((partitions, free))
    tensor_tensor(out, flat, uniform, operators.BINARY["multiply"])


def _seed_column(partitions: int) -> NkiTensor:
    current = trace()
    key = current.allocate((partitions, 1), np.dtype(np.int32), Memory.SBUF, "dropout_key")
    memset(key, float(current.seed), engine=gpsimd_engine)
    return key


# ---- batch-norm statistics -------------------------------------------------------------------------------------

# The record bn_stats writes per partition and bn_aggr reads: (count, mean, sum of squared deviations) for the
# even and the odd elements of the chunk.
BN_STATS_SIZE = 6


def bn_stats(dst: NkiTensor, data: NkiTensor, name: str | None = None) -> None:
    """dst[P, 6] = (n, mean, M2) of data's even and odd elements (data [P, F], F <= 512, F even)."""
    api = "nki.isa.bn_stats"
    dst, data = _tensor(dst, api, "dst"), _tensor(data, api, "data")
    if data.ndim != 2 or data.shape[1] % 2:
        raise error(f"{api}: data must be a 2-D tile [P, F] with F even, got {list(data.shape)}")
    if dst.ndim != 2 or dst.shape[1] != BN_STATS_SIZE:
        raise error(f"{api}: dst must be [P, {BN_STATS_SIZE}], got {list(dst.shape)}")
    partitions, free = data.shape
    half = free // 2
    current = trace()
    centred = current.allocate((partitions, half), np.dtype(np.float32), Memory.SBUF, "bn_centred")
    for parity in range(2):
        part = data[:, parity::2]
        count, mean, m2 = (dst[:, 3 * parity + k : 3 * parity + k + 1] for k in range(3))
        memset(count, float(half))
        tensor_reduce(mean, operators.BINARY["add"], part, axis=1)
        tensor_scalar(mean, mean, operators.BINARY["multiply"], 1.0 / half)
        tensor_scalar(centred, part, operators.BINARY["subtract"], mean)
        activation(centred, operators.UNARY["square"], centred, reduce_res=m2)


def bn_aggr(dst: NkiTensor, data: NkiTensor, name: str | None = None) -> None:
    """dst[P, 2] = (mean, variance) of the records bn_stats wrote into data [P, 6k] (Chan's parallel formula)."""
    api = "nki.isa.bn_aggr"
    dst, data = _tensor(dst, api, "dst"), _tensor(data, api, "data")
    if data.ndim != 2 or data.shape[1] % 3:
        raise error(f"{api}: data must be [P, 6k] records of bn_stats, got {list(data.shape)}")
    if dst.ndim != 2 or dst.shape[1] != 2:
        raise error(f"{api}: dst must be [P, 2], got {list(dst.shape)}")
    partitions, groups = data.shape[0], data.shape[1] // 3
    counts, means, m2s = data[:, 0::3], data[:, 1::3], data[:, 2::3]
    current = trace()
    f32 = np.dtype(np.float32)
    total = current.allocate((partitions, 1), f32, Memory.SBUF, "bn_count")
    weighted = current.allocate((partitions, groups), f32, Memory.SBUF, "bn_weighted")
    mean = current.allocate((partitions, 1), f32, Memory.SBUF, "bn_mean")
    add, multiply = operators.BINARY["add"], operators.BINARY["multiply"]
    tensor_reduce(total, add, counts, axis=1)
    tensor_tensor(weighted, counts, means, multiply)
    tensor_reduce(mean, add, weighted, axis=1)
    inverse = current.allocate((partitions, 1), f32, Memory.SBUF, "bn_inverse")
    reciprocal(inverse, total)
    tensor_tensor(mean, mean, inverse, multiply)
    # M2 = sum(M2_i) + sum(n_i * (mean_i - mean)^2)
    deviation = current.allocate((partitions, groups), f32, Memory.SBUF, "bn_deviation")
    tensor_scalar(deviation, means, operators.BINARY["subtract"], mean)
    tensor_tensor(deviation, deviation, deviation, multiply)
    tensor_tensor(deviation, deviation, counts, multiply)
    tensor_tensor(deviation, deviation, m2s, add)
    m2 = current.allocate((partitions, 1), f32, Memory.SBUF, "bn_m2")
    tensor_reduce(m2, add, deviation, axis=1)
    tensor_copy(dst[:, 0:1], mean)
    tensor_tensor(dst[:, 1:2], m2, inverse, multiply)
