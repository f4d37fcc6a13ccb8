"""One walk over a z3 term DAG, shared by the proof cache's digests (checker/engines/proof_cache.py) and the
local queries' symbol sets (checker/engines/cone.py): a step query is a DAG of a few thousand distinct
terms under tens of thousands of references, so each term is visited once."""

from __future__ import annotations

from typing import Any, Callable


def fold(root: Any, memo: dict[int, tuple[Any, Any]], combine: Callable[[Any, list[Any]], Any]) -> Any:
    """`combine(term, [its children's values])` for `root` and every term below it, children first,
    each term once: `memo` maps a term's id to (the term, its value) and is shared between calls.
    The term is kept so that its id is not reused by another term while the memo lives."""
    stack = [root]
    while stack:
        e = stack[-1]
        if e.get_id() in memo:
            stack.pop()
            continue
        kids = e.children()
        todo = [c for c in kids if c.get_id() not in memo]
        if todo:
            stack.extend(todo)
            continue
        stack.pop()
        memo[e.get_id()] = (e, combine(e, [memo[c.get_id()][1] for c in kids]))
    return memo[root.get_id()][1]
