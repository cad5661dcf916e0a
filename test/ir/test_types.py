"""The runtime's names of xDSL element types and the neuron dialect's engines (ir/types.py, ir/dialects/neuron.py):
each type and engine name maps one way, and what the core cannot hold or run is refused."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    Signedness,
    StringAttr,
)
from xdsl.utils.exceptions import VerifyException

from neuron_mlir.ir.dialects.neuron import EngineAttr
from neuron_mlir.ir.types import element_type_for, runtime_dtype_name
from neuron_mlir.runtime.hardware import Engine


@pytest.mark.parametrize(
    ("element_type", "name"),
    [
        (Float32Type(), "f32"),
        (BFloat16Type(), "bf16"),
        (Float16Type(), "f16"),
        (Float64Type(), "f64"),
        (Float8E4M3FNType(), "f8e4m3"),
        (Float8E5M2Type(), "f8e5m2"),
        (IntegerType(1), "i1"),
        (IntegerType(8), "i8"),
        (IntegerType(32), "i32"),
        (IntegerType(64), "i64"),
        (IntegerType(8, Signedness.UNSIGNED), "u8"),
    ],
)
def test_each_element_type_has_its_name(element_type: object, name: str) -> None:
    assert runtime_dtype_name(element_type) == name  # type: ignore[arg-type]


def test_the_names_of_the_float_types_lead_back_to_them() -> None:
    for name in ("f32", "bf16", "f16", "f8e4m3", "f8e5m2"):
        assert runtime_dtype_name(element_type_for(name)) == name


def test_a_type_the_core_cannot_hold_is_refused() -> None:
    with pytest.raises(ValueError, match="no NeuronCore storage type"):
        runtime_dtype_name(IndexType())


@pytest.mark.parametrize("engine", list(Engine))
def test_each_engine_attribute_names_its_engine(engine: Engine) -> None:
    assert EngineAttr(engine).engine is engine


def test_an_engine_attribute_of_an_unknown_name_is_refused_as_it_is_made() -> None:
    with pytest.raises(VerifyException, match="unknown engine 'warp'"):
        EngineAttr.new([StringAttr("warp")])
