"""Signals a check already computes, said in the text report as what they are.

`kvmc check` learns more than its verdicts, and used to say it only in `--json` (or as "a kvmc
bug"). Each of these is a finding a person should look at:

* a lemma the BMC dropped (specs/lemmas.py: checked at every depth, assumed only while it holds):
  a fact about the reachable states that the model used to satisfy no longer holds in this
  design. Either the design's change is meant to (then the lemma needs restating), or it is a bug
  no property states: a property gap (a planted bug that breaks only a lemma is invisible to the
  verdicts);
* an induction candidate dropped with a counterexample to induction (checker/engines/induction.py):
  the property holds as far as the BMC looked, but the step case failed from the CTI's state: a
  lemma excluding that state is missing, or (if the state is reachable) the property fails deeper;
* a counterexample whose replay on the torch pool (checker/replay/pool.py) diverges: under a
  design that differs from every release preset (a changed fix flag, a mutant, an override) the
  pool implements the preset's behaviour, so the divergence is the design's change showing (a
  model change to look at: does the pool need it, or is the change wrong?); under a release
  preset it is a disagreement between the two implementations of one design (a kvmc bug).
"""

from __future__ import annotations

from typing import Any

from model.designs import PRESETS


def changed_design(design: Any) -> bool:
    """Whether `design` differs from every release preset (a fix flag, a planted bug, an override)."""
    if design.mutants or dict(design.overrides):
        return True
    return not any(design.flags() == p.flags() for p in PRESETS.values())


def _dropped_lemmas(c: Any) -> dict[str, int]:
    """lemma -> the first depth the BMC dropped it at, from any result's meta (`lemma:name@t`)."""
    out: dict[str, int] = {}
    for r in c.results.values():
        for d in r.meta.get("lemmas_dropped") or []:
            name, _, t = d.partition("@")
            name = name[len("lemma:"):] if name.startswith("lemma:") else name
            depth = int(t) if t.isdigit() else -1
            out[name] = min(out.get(name, depth), depth)
    return out


def findings(report: Any) -> list[str]:
    """One line per finding of the check's report (module docstring), config by config."""
    lines: list[str] = []
    changed = changed_design(report.design)
    for c in report.configs:
        for name, t in sorted(_dropped_lemmas(c).items(), key=lambda kv: kv[1]):
            lines.append(f"[{c.config}] lemma {name} fails at depth {t} (the BMC stopped assuming it): a fact the "
                         f"reachable states of the model satisfy does not hold in design {report.design.name}: a possible "
                         f"property gap (no property states it) or a model change to look at")
        proof = c.proof or {}
        dropped: dict[str, str] = {}
        for a in proof.get("attempts") or [proof]:
            for n, why in (a.get("dropped") or {}).items():
                dropped.setdefault(n, why)
        for r in c.results.values():
            if r.meta.get("cti") is None and r.meta.get("cti_path") is None:
                continue
            why = dropped.get(r.property, f"fails the step case at k={r.meta.get('cti_k', '?')}")
            where = f" (counterexample to induction: {r.meta['cti_path']})" if r.meta.get("cti_path") else ""
            lemmas = r.meta.get("cti_suggest")
            lines.append(f"[{c.config}] {r.property} was dropped from the induction: {why}{where}: a lemma excluding "
                         f"that state is missing" + (f" (known lemmas false in it: {', '.join(lemmas)})" if lemmas else "")
                         + ", or, if the state is reachable, the property fails deeper than the BMC looked")
        for r in c.results.values():
            note = str(r.meta.get("pool_replay") or "")
            if "diverged" not in note:
                continue
            if changed:
                lines.append(f"[{c.config}] {r.property}: the torch pool does not follow this counterexample ({note}); "
                             f"design {report.design.name} differs from every release preset and the pool implements "
                             f"the presets, so this is the design's change showing: a model change to look at")
            else:
                lines.append(f"[{c.config}] {r.property}: the torch pool does not follow this counterexample ({note}) "
                             f"under a release preset: the model and the pool disagree (a kvmc bug)")
    return lines


def render(report: Any) -> list[str]:
    """The findings as report lines (nothing when there are none)."""
    fs = findings(report)
    return ["findings (signals to look at, not verdicts):"] + [f"  {f}" for f in fs] if fs else []
