"""Who answers the scheduler's nondeterministic questions: arrivals, session turns and closes,
SGLANG_TEST_RETRACT, accepted draft tokens, when `_evict_swa` fires, HiCache write-back, and
(when replaying a trace) which nodes eviction takes.

The names are the model's choice names (model/ops.py scoping: `recv.arrive[0]`,
`prefill.evict.evict[3]`, `decode.accept[1]`, ...), so a trace's `mbt::nondetPicks` answer the
pool's questions one for one. Every question asked is recorded in `asked`, which replay compares
with the trace's recorded picks.
"""

from __future__ import annotations

from typing import Any, Callable

from model.ops import ChoiceScope


class ChoiceError(ValueError):
    """A recorded pick the pool cannot use (out of its range)."""


class Chooser(ChoiceScope):
    policy_evict = False  # True: eviction follows the pool's own LRU policy, not picks

    def __init__(self) -> None:
        super().__init__()
        self.asked: dict[str, Any] = {}

    def bool(self, name: str) -> bool:
        q = self.qualify(name)
        v = bool(self._bool(q))
        self.asked[q] = v
        return v

    def int(self, name: str, lo: int, hi: int) -> int:
        q = self.qualify(name)
        v = int(self._int(q, lo, hi))
        self.asked[q] = v
        return v

    def new_step(self) -> None:
        self.asked = {}

    def _bool(self, q: str) -> bool:
        raise NotImplementedError

    def _int(self, q: str, lo: int, hi: int) -> int:
        raise NotImplementedError


class ReplayChooser(Chooser):
    """Answers from one step's recorded picks (missing: False / lo, as the model's DictOracle).
    `lenient`: eviction by the pool's LRU policy and out-of-range ints clamped, for replaying a
    trace's events on a design it was not recorded on."""

    def __init__(self, picks: dict[str, Any] | None = None, lenient: bool = False) -> None:
        super().__init__()
        self.picks = picks or {}
        self.lenient = lenient
        self.policy_evict = lenient

    def set_picks(self, picks: dict[str, Any]) -> None:
        self.picks = picks
        self.new_step()

    def _bool(self, q: str) -> bool:
        return bool(self.picks.get(q, False))

    def _int(self, q: str, lo: int, hi: int) -> int:
        v = int(self.picks.get(q, lo))
        if not lo <= v <= hi:
            if self.lenient:
                return min(max(v, lo), hi)
            raise ChoiceError(f"pick {q}={v} is outside the pool's range [{lo}, {hi}]")
        return v


class FunctionChooser(Chooser):
    """Answers with functions (Hypothesis draws, a seeded RNG); eviction follows LRU."""

    policy_evict = True

    def __init__(self, draw_bool: Callable[[str], bool], draw_int: Callable[[str, int, int], int]) -> None:
        super().__init__()
        self.draw_bool, self.draw_int = draw_bool, draw_int

    def _bool(self, q: str) -> bool:
        return self.draw_bool(q)

    def _int(self, q: str, lo: int, hi: int) -> int:
        return self.draw_int(q, lo, hi)
