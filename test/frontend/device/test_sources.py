"""The user's source line of an eager op: found by the walk over the frames, its per-code answers kept by the code
object's id and never taken from another code object's entry."""

import os

import torch

from neuron_mlir.frontend.device import sources


def _issue() -> str:
    return sources.user_line()  # the line this test module issues from


def _line_of_issue() -> str:
    code = _issue.__code__
    return f"{code.co_filename}:{code.co_firstlineno + 1}"


def test_the_line_is_the_users_and_kept_by_the_codes_id(monkeypatch):
    monkeypatch.setattr(sources, "_native_walk", None)  # the Python walk, whose caches are these
    assert _issue() == _line_of_issue()
    code = _issue.__code__
    known = sources._not_the_users[id(code)]
    assert known[0] is code
    assert known[1] is False
    assert any(found[0] is code for found in sources._lines.values())
    assert _issue() == _line_of_issue()  # found again from the kept entries


def test_an_entry_left_under_the_id_by_another_code_object_is_not_used(monkeypatch):
    """The kept answers hold their code objects, so an id cannot pass to another code object while its entry lives;
    should an entry under the id belong to another code object all the same, the walk works the answer out again."""
    monkeypatch.setattr(sources, "_native_walk", None)
    code = _issue.__code__
    torch_file = os.path.join(os.path.dirname(torch.__file__), "elsewhere.py")
    other = compile("x = 1\ny = 2\n", torch_file, "exec")
    monkeypatch.setattr(sources, "_not_the_users", {id(code): (other, True)})
    monkeypatch.setattr(sources, "_lines", {})
    assert _issue() == _line_of_issue()
    assert sources._not_the_users[id(code)][0] is code
    stale = {key: (other, "elsewhere.py:2") for key in sources._lines}
    monkeypatch.setattr(sources, "_lines", stale)
    assert _issue() == _line_of_issue()


def _step(weight: torch.Tensor, x: torch.Tensor) -> None:
    loss = torch.nn.functional.gelu(x @ weight).sum()
    loss.backward()
    torch.get_device_module("neuron").synchronize()


def test_the_native_walk_answers_as_the_python_walk(monkeypatch):
    """The native walk (`native.user_line()`) gives the Python walk's answers: the user's line from a plain call and
    from the device's kernels (whose callers they mark), the autograd node's name in a backward pass."""
    from neuron_mlir.frontend.device import native

    assert sources._native_walk_once() is not None, native.unavailable_reason()
    assert _issue() == _line_of_issue()
    weight = torch.randn(8, 4, device="neuron", requires_grad=True)
    x = torch.randn(3, 8, device="neuron")
    _step(weight, x)  # the programs compiled
    seen = {}
    for way in ("native", "python"):
        if way == "python":
            monkeypatch.setattr(sources, "_native_walk", None)
        monkeypatch.setattr(sources, "EAGER_TIMES", {})
        _step(weight, x)
        seen[way] = {key: entry.calls for key, entry in sources.EAGER_TIMES.items()}
    assert seen["native"] == seen["python"]
    lines = {line for _, line in seen["native"]}
    assert any(line.endswith(" (backward)") for line in lines)
    assert any(line.startswith(__file__) for line in lines)
