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


def test_the_line_is_the_users_and_kept_by_the_codes_id():
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
