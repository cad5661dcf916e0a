"""Helpers shared by the tests (not collected: no test_ prefix)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from neuron_mlir.ir.semantics.compare import mismatch

REPO = Path(__file__).resolve().parents[2]


def assert_close_to_torch(actual, expected, what: str = "result", precision=None) -> None:
    """Compare a compiled result with eager PyTorch's, with the tolerance of the expected dtype (or of
    `precision`, a torch dtype, for results computed in a narrower type than their own).

    The one place numeric tests compare numbers: the tolerances live in `neuron_mlir.ir.semantics.compare`.
    """

    if isinstance(expected, Sequence):  # a Tensor is no Sequence
        assert len(actual) == len(expected), f"{what}: {len(actual)} values, expected {len(expected)}"
        for index, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_close_to_torch(a, e, f"{what}[{index}]", precision)
        return
    if expected is None:
        assert actual is None, f"{what}: expected None"
        return
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype}, expected {expected.dtype}"
    if expected.is_complex():  # (real, imaginary) pairs, with the tolerance of the real dtype of the halves
        import torch

        actual, expected = (torch.view_as_real(t.resolve_conj().resolve_neg()) for t in (actual, expected))
    from neuron_mlir.frontend.tensors import to_numpy

    narrower = None if precision is None else str(precision).removeprefix("torch.")
    problem = mismatch(to_numpy(actual), to_numpy(expected), narrower)
    assert problem is None, f"{what}: {problem}"


def assert_close_to_golden(actual, eager, golden, what: str = "result") -> None:
    """Compare a compiled result with a float64 golden run, allowing a small multiple of eager's own error in the
    same dtype (`neuron_mlir.ir.semantics.compare.golden_mismatch`): for whole-model gradients and low-precision
    sums, where eager itself strays further than any fixed tolerance."""
    from neuron_mlir.frontend.tensors import to_numpy
    from neuron_mlir.ir.semantics.compare import golden_mismatch

    assert actual.dtype == eager.dtype, f"{what}: dtype {actual.dtype}, eager {eager.dtype}"
    problem = golden_mismatch(to_numpy(actual), to_numpy(eager), to_numpy(golden.double()))
    assert problem is None, f"{what}: {problem}"


def numpy_close(actual: np.ndarray, expected: np.ndarray, what: str = "result") -> None:
    problem = mismatch(actual, expected)
    assert problem is None, f"{what}: {problem}"


def capture_aten_graphs(module, *inputs, backward: bool = False):
    """The ATen graphs (forward, and backward when asked) that the neuron-mlir backend would compile."""
    import torch
    from torch._functorch.aot_autograd import aot_module_simplified

    from neuron_mlir.frontend.backend import decompositions
    from neuron_mlir.frontend.recognize_activations import recognize_activations

    graphs = []

    def keep(gm, example_inputs):
        from functorch.compile import make_boxed_func

        graphs.append(gm)
        return make_boxed_func(gm)

    def backend(gm, example_inputs):
        recognize_activations(gm)
        return aot_module_simplified(
            gm, example_inputs, fw_compiler=keep, bw_compiler=keep, decompositions=decompositions()
        )

    torch._dynamo.reset()
    compiled = torch.compile(module, backend=backend)
    out = compiled(*inputs)
    if backward:
        outputs = out if isinstance(out, tuple) else (out,)
        sum(o.float().sum() for o in outputs if o.requires_grad).backward()
    torch._dynamo.reset()
    return graphs


def capture_aten_graphs_with_inputs(module, *inputs, backward: bool = False):
    """Like `capture_aten_graphs`, as (graph, real inputs of its first call) pairs, in the order they ran."""
    import torch
    from torch._functorch.aot_autograd import aot_module_simplified

    from neuron_mlir.frontend.backend import decompositions
    from neuron_mlir.frontend.recognize_activations import recognize_activations

    captured = []

    def keep(gm, example_inputs):
        entry = [gm, None]
        captured.append(entry)

        def run(args):
            if entry[1] is None:
                entry[1] = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
            return gm(*args)

        run._boxed_call = True  # type: ignore[attr-defined]  # AOTAutograd calls a function so flagged with a list
        return run

    def backend(gm, example_inputs):
        recognize_activations(gm)
        return aot_module_simplified(
            gm, example_inputs, fw_compiler=keep, bw_compiler=keep, decompositions=decompositions()
        )

    torch._dynamo.reset()
    compiled = torch.compile(module, backend=backend)
    out = compiled(*inputs)
    if backward:
        outputs = out if isinstance(out, tuple) else (out,)
        sum(o.float().sum() for o in outputs if o.requires_grad).backward()
    torch._dynamo.reset()
    return [(gm, args) for gm, args in captured if args is not None]


def trace_aten_graphs(fn, *inputs, backward: bool = False):
    """(graph, example inputs) of every ATen graph the backend would compile for `fn(*inputs)`, without running
    any of them: the graphs return zeros of their outputs' shapes, so tracing real-size shapes costs no eager
    arithmetic. Attention traces as the backend traces it (`frontend.backend.attention_backends`)."""
    import torch
    from torch._functorch.aot_autograd import aot_module_simplified
    from torch.nn.attention import sdpa_kernel

    from neuron_mlir.frontend.backend import attention_backends, decompositions
    from neuron_mlir.frontend.recognize_activations import recognize_activations

    captured = []

    def keep(gm, example_inputs):
        captured.append((gm, list(example_inputs)))
        [output] = [node for node in gm.graph.nodes if node.op == "output"]
        values = [node.meta.get("val") if isinstance(node, torch.fx.Node) else node for node in output.args[0]]

        def run(args):
            return [torch.zeros(v.shape, dtype=v.dtype) if isinstance(v, torch.Tensor) else v for v in values]

        run._boxed_call = True  # type: ignore[attr-defined]  # AOTAutograd calls a function so flagged with a list
        return run

    def backend(gm, example_inputs):
        recognize_activations(gm)
        with sdpa_kernel(attention_backends(gm, example_inputs)):
            return aot_module_simplified(
                gm,
                example_inputs,
                fw_compiler=keep,
                bw_compiler=keep,
                inference_compiler=keep,
                decompositions=decompositions(),
            )

    torch._dynamo.reset()
    out = torch.compile(fn, backend=backend)(*inputs)
    if backward:
        outputs = out if isinstance(out, tuple) else (out,)
        sum(o.float().sum() for o in outputs if o.requires_grad).backward()
    torch._dynamo.reset()
    return captured
