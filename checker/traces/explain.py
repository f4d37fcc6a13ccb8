"""One line saying why a property fails in a concrete state, with its equation and the values."""

from __future__ import annotations

from typing import Any

from model.config import Params
from model.invariant_checker import self_check_during_busy
from model.ops import Concrete
from model.state import OOM_NAMES, State
from model.system import System
from specs.properties import ledger


def _eq(parts: list[tuple[str, Any]], total_name: str, total: Any) -> str:
    s = sum(v for _, v in parts)
    rel = "==" if s == total else "!="
    return " + ".join(f"{n}={v}" for n, v in parts) + f" = {s} {rel} {total_name}={total}"


def ledger_line(system: System, p: Params, s: State) -> str:
    x = system.ctx(Concrete(), p)
    L = ledger(x, s)
    out = ["full: " + _eq([("free", L.full_free), ("tree", L.full_tree), ("requests", L.full_reqs), ("sessions", L.full_sessions)], "F", p.full_tokens)]
    if system.cfg.hybrid_swa:
        out.append("swa: " + _eq([("free", L.swa_free), ("tree", L.swa_tree), ("requests", L.swa_reqs), ("sessions", L.swa_sessions)], "S", p.swa_tokens))
    out.append("req slots: " + _eq([("free", L.slots_free), ("requests", L.slots_reqs), ("sessions", L.slots_sessions)], "size", p.req_pool_size))
    return "; ".join(out)


def busy_line(system: System, p: Params, s: State) -> str:
    x = system.ctx(Concrete(), p)
    b = self_check_during_busy(x, s)
    t = b.terms
    if not b.ran:
        return "busy check did not run (no batch, or skipped)"
    if b.crashed:
        return "busy check raised NotImplementedError (SWARadixCache.evictable_size) instead of checking"
    parts = [("available", t["available"]), ("evictable", t["evictable"]), ("protected", t["protected"]),
             ("session_held", t["session_held"]), ("uncached", t["uncached"])]
    out = ["busy full: " + _eq(parts, "total", t["total"])]
    if system.cfg.hybrid_swa:
        sparts = [("available", t["swa_available"]), ("evictable", t["swa_evictable"]), ("protected", t["swa_protected"]),
                  ("session_held", t["swa_session_held"]), ("uncached", t["swa_uncached"])]
        checked = system.design.variant("swa_busy_check") == "on"
        out.append(("busy swa: " if checked else "busy swa (not checked): ") + _eq(sparts, "total", t["swa_total"]))
    out.append("fired" if b.fired else "passed")
    return "; ".join(out)


def explain(system: System, prop: str, p: Params, s: State) -> str:
    if prop in ("no_prefill_oom", "no_decode_oom"):
        return f"violated: {prop}  allocation failed: {OOM_NAMES[s.oom]} (full_available={s.full_available}" + (
            f", swa_available={s.swa_available})" if system.cfg.hybrid_swa else ")"
        )
    if prop == "no_scheduler_assertion":
        return f"violated: {prop}  the scheduler died: AssertionError ({OOM_NAMES[s.oom]}) in the insert-and-re-match"
    if prop == "conservation":
        return f"violated: conservation  {ledger_line(system, p, s)}"
    if prop == "busy_check_sound":
        return f"violated: busy_check_sound  (ledger exact) {busy_line(system, p, s)}"
    if prop == "busy_check_complete":
        return f"violated: busy_check_complete  ledger: {ledger_line(system, p, s)}; but {busy_line(system, p, s)}"
    return f"violated: {prop}"
