"""Every symbolic trace is re-run through the concrete model; a trace the concrete model does not
follow is an encoding bug, reported as one (with both states), never as a counterexample."""

from __future__ import annotations


from typing import Any

import pytest

from checker.engines.bmc import BMC
from checker.traces.trace import TraceMismatch, run_concrete
from checker.verdict import Verdict
from model.designs import PRESETS, Design
from model.ops import Concrete
from model.state import State
from model.system import System
from model.transition import Ctx
from specs.configs import CONFIGS


def _leaks_only_in_z3(x: Ctx, s: State, r: int, site: str) -> State:
    """A deliberately broken 'encoding' of cache_unfinished_req: the symbolic interpretation loses a
    token that the concrete one keeps (what a wrong z3 translation would do)."""
    from model import radix_cache

    s2 = radix_cache.cache_unfinished_req.original(x, s, r, site)
    return s2.set(full_available=s2.full_available - 1) if x.ops.symbolic else s2


def test_bmc_reports_a_trace_the_concrete_model_does_not_follow_as_an_encoding_bug() -> None:
    base = PRESETS["current"]
    design = Design("current+z3-only-leak", base.fixes, overrides={"cache_unfinished_req": _leaks_only_in_z3})
    from checker.engines.agreement import pinned

    cfg = pinned(CONFIGS["small"], full_tokens=(8, 8), input_len=(3, 3), max_new_tokens=(2, 2), warm_len=(1, 1))
    res = BMC(System(cfg, design), ["conservation"], minimize=False).run(1)["conservation"]
    assert res.verdict is Verdict.UNKNOWN  # not violated: the trace was not confirmed
    assert res.trace is None
    assert "encoding bug" in res.reason
    assert "full_available: trace=" in res.reason and "model=" in res.reason  # both states' values


def test_run_concrete_names_the_step_the_field_and_both_states() -> None:
    system = System(CONFIGS["small"], PRESETS["current"])
    from checker.engines.explicit import param_points, successors

    p = param_points(system)[0]
    s0 = system.init(system.ctx(Concrete(), p))
    picks, s1 = list(successors(system, p, s0))[1]
    wrong = s1.set(full_available=s1.full_available + 5)
    with pytest.raises(TraceMismatch) as e:
        run_concrete(system, p, [("event_loop_iteration", picks)], expected=[s0, wrong])
    err = e.value
    assert err.step == 1 and err.field == "full_available"
    assert err.recorded_state == wrong and err.concrete_state == s1
    assert f"trace={wrong.full_available}" in err.both_states() and f"model={s1.full_available}" in err.both_states()


def test_bmc_goes_on_with_a_fresh_solver_after_an_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    """After the solver gives up on a query, the BMC asks the rest on a new solver with the same
    assertions (a solver used past its timeout has answered sat wrongly), and still finds the bug."""
    import z3

    real = BMC._solver
    made: list[Any] = []

    def solver(self: BMC) -> Any:
        s = real(self)
        made.append(s)
        if len(made) > 1:
            return s

        class GivesUpOnce:
            answered = False

            def __getattr__(self, name: str) -> Any:
                return getattr(s, name)

            def check(self, *a: Any) -> Any:
                if not GivesUpOnce.answered:
                    GivesUpOnce.answered = True
                    return z3.unknown
                return s.check(*a)

            def reason_unknown(self) -> str:
                return "planted unknown"

        return GivesUpOnce()

    monkeypatch.setattr(BMC, "_solver", solver)
    design = PRESETS["current"].with_mutants(frozenset({"unfinished_keeps_protected_len"}))
    res = BMC(System(CONFIGS["small"], design), ["conservation", "no_prefill_oom"], minimize=False).run(3)
    assert len(made) == 2, "the solver that gave up was used again"
    kept, now = list(made[0].assertions()), list(made[1].assertions())
    assert kept and [a.sexpr() for a in now[: len(kept)]] == [a.sexpr() for a in kept]
    assert res["conservation"].verdict is Verdict.VIOLATED, res
