"""Verifying a module whose ops repeat: each distinct op verified once per `verify_module` call.

A lowered module holds thousands of instructions that differ only in which buffer they name: the same opcode,
engine, access patterns and buffer types in every unrolled iteration of a loop. An op whose verifier reads
nothing but its own class, properties, attributes, operand and result types and the module's target (and, for
instructions whose rules read them, `runtime.isa.READS_ADDRESSES`, the addresses of the buffers they access) gets
the same answer for every op with equal values of those. `memoized_verify` wraps such a class's `verify_` so
that, inside `verify_module`, an op whose values equal those of an op that already passed is not checked again; an
op that fails is checked (and reported) as before. A call in which most lookups miss (the allocs of a module after
memory allocation, where every buffer has its own address) stops building keys and checks every op, as building
them would cost more than it saves.
Outside `verify_module` (`op.verify()`, xDSL's own drivers) every op is checked in full.

Only classes whose verification is a function of that key may be wrapped: no regions, no successors, no trait or
verifier that looks at the op's parent, neighbours or uses. The memo lives for one call, so it holds no IR alive.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from xdsl.ir import Operation


class _Memo:
    """The keys verified in one `verify_module` call, and how often a lookup found one.

    A key costs a fraction of a check to build, and keys holding addresses differ after memory allocation (every
    buffer has one of its own), so a call whose lookups mostly miss stops looking after `_TRIAL` of them."""

    __slots__ = ("hits", "keys", "lookups")

    def __init__(self) -> None:
        self.keys: set[Hashable] = set()
        self.lookups = 0
        self.hits = 0

    @property
    def worthwhile(self) -> bool:
        return self.lookups < _TRIAL or 2 * self.hits >= self.lookups


_TRIAL = 1024
# per key function, the table of one `verify_module` call
_MEMO: contextvars.ContextVar[dict[Callable[[Operation], Hashable], _Memo] | None] = contextvars.ContextVar(
    "verification_memo", default=None
)

VerifyT = TypeVar("VerifyT", bound=Callable[[Any], None])


def value_key(op: Operation, by_class: frozenset[str] = frozenset()) -> tuple[Hashable, ...]:
    """What a context-free verifier reads: the op's class, properties, attributes, operand and result types.

    The properties named in `by_class` enter the key by their class alone: for those the verifier asks only
    whether they are present and of the declared class (an instruction's `id` and `waits`, which differ between
    every two instructions and would otherwise make every key distinct)."""
    properties = op.properties.items()
    return (
        type(op),
        tuple((name, type(value)) if name in by_class else (name, value) for name, value in properties)
        if by_class
        else tuple(properties),
        tuple(op.attributes.items()),
        tuple(operand.type for operand in op.operands),
        tuple(result.type for result in op.results),
    )


def memoized_verify(verify_: VerifyT, key: Callable[[Operation], Hashable]) -> VerifyT:
    """`verify_`, skipped inside `verify_module` for an op whose `key` equals that of an op that passed it.

    The classes sharing a `key` function share a table, and each table decides alone whether looking up is worth
    it: after memory allocation the allocs' keys all differ, the instructions' mostly repeat."""

    def verify(op: Operation) -> None:
        memos = _MEMO.get()
        if memos is None:
            verify_(op)
            return
        memo = memos.get(key)
        if memo is None:
            memo = memos[key] = _Memo()
        if not memo.worthwhile:
            verify_(op)
            return
        found = key(op)
        memo.lookups += 1
        if found in memo.keys:
            memo.hits += 1
            return
        verify_(op)
        memo.keys.add(found)

    verify.__doc__ = verify_.__doc__
    return cast(VerifyT, verify)


@contextmanager
def shared_verification() -> Iterator[None]:
    """Within this block, memoized verifiers check each distinct key once."""
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def verify_module(module: Operation) -> None:
    """`module.verify()`, each distinct op of the memoized classes verified once."""
    with shared_verification():
        module.verify()
