"""The two interpretations of model/ops.py agree: every primitive a transition uses gives, on z3
terms evaluated at a point, the value it gives on Python ints at that point (the model is written
once against these, so a disagreement here would make the engines disagree everywhere)."""

from __future__ import annotations

from typing import Any

import z3
from hypothesis import given, settings
from hypothesis import strategies as st

from model.ops import Concrete, Symbolic

C, S = Concrete(), Symbolic(0)
v, w = z3.Int("v"), z3.Int("w")
ints = st.integers(min_value=-40, max_value=200)
page = st.sampled_from([1, 2, 3, 4, 64])


def at(term: Any, a: int, b: int) -> Any:
    """A z3 term (or a constant the symbolic side folded) evaluated at v=a, w=b, as Python."""
    if isinstance(term, (bool, int)):
        return term
    r = z3.simplify(z3.substitute(term, (v, z3.IntVal(a)), (w, z3.IntVal(b))))
    return z3.is_true(r) if z3.is_bool(r) else r.as_long()


@settings(max_examples=300, deadline=None)
@given(a=ints, b=ints, ps=page, values=st.lists(st.integers(-3, 9), max_size=5).map(tuple))
def test_primitives_agree(a: int, b: int, ps: int, values: tuple[int, ...]) -> None:
    cases = [
        ("member", lambda o, x, y: o.member(x, values)),
        ("page_aligned", lambda o, x, y: o.page_aligned(x, ps)),
        ("ceil_page", lambda o, x, y: o.ceil_page(x, ps)),
        ("floor_page", lambda o, x, y: o.floor_page(x, ps)),
        ("pages", lambda o, x, y: o.pages(x, ps)),
        ("min", lambda o, x, y: o.min(x, y)),
        ("max", lambda o, x, y: o.max(x, y)),
        ("clamp0", lambda o, x, y: o.clamp0(x)),
        ("ite", lambda o, x, y: o.ite(x < y, x, y + 1)),
        ("and_/or_/not_", lambda o, x, y: o.or_(o.and_(x > 0, o.not_(y > 0)), x == y)),
        ("implies", lambda o, x, y: o.implies(x > y, x >= y + 1)),
    ]
    for name, f in cases:
        assert at(f(S, v, w), a, b) == f(C, a, b), (name, a, b, ps, values)
