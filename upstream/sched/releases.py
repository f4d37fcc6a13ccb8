"""Which SGLang release a trace replays on, and how (parent side: no SGLang import).

A checked-in counterexample is a design "current without fix X" (model/designs.py). On release V:
* V lacks X (V is older than X's first release, `Fix.first_tag`), or X is reverted in V
  (upstream/sched/reverts.py): the trace must reproduce step for step (`reproduce`);
* V has X: the trace's events must run on V without breaking the property (`events`).

The adapters (upstream/sched/harness.py) speak two scheduler families: the monolithic scheduler
of 0.5.10.post1 .. 0.5.12.post1 and the component scheduler of 0.5.13 .. 0.5.23; a release outside
them is bad input (no adapter), as is a trace a real scheduler cannot run (`not_replayable`: EAGLE
needs the draft and target models, a planted kvmc mutant has no SGLang counterpart, ...).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from model.designs import FIXES, PRESETS, Design

from ..errors import UpstreamUsageError
from ..releases import release as registry_release

# releases the scheduler adapters have been run on (the API families of upstream/releases.py)
ADAPTED = {"0.5.10.post1": "monolithic", "0.5.11": "monolithic", "0.5.12.post1": "monolithic",
           "0.5.13": "components", "0.5.17": "components", "0.5.18": "components", "0.5.19": "components",
           "0.5.20": "components", "0.5.21": "components", "0.5.22": "components", "0.5.23": "components"}


def version_key(v: str) -> tuple[int, ...]:
    """'0.5.10.post1' -> (0, 5, 10, 1); 'v0.5.11' -> (0, 5, 11, 0)."""
    v = v.removeprefix("v")
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)(?:\.post(\d+))?", v)
    if not m:
        raise UpstreamUsageError(f"cannot read release {v!r} (expected like 0.5.11 or 0.5.10.post1)")
    return tuple(int(g or 0) for g in m.groups())


def parse_against(spec: str) -> str:
    """`sglang==0.5.11` (or `0.5.11`) -> '0.5.11'; anything else is bad input."""
    s = spec.strip()
    if s.startswith("sglang=="):
        s = s[len("sglang=="):]
    elif "==" in s or s.startswith("sglang"):
        raise UpstreamUsageError(f"--against {spec!r}: expected sglang==VERSION, e.g. sglang==0.5.11")
    version_key(s)
    return s


def adapter(version: str) -> str:
    r = registry_release(version)  # an unknown release: one line, exit 2
    fam = ADAPTED.get(r.version)
    if fam is None:
        raise UpstreamUsageError(
            f"SGLang {r.version}: no scheduler adapter for this release ({r.note or 'not studied'}); "
            f"`kvmc replay --against` runs on {', '.join(ADAPTED)}")
    return fam


def has_fix(version: str, fix: str) -> bool:
    return version_key(version) >= version_key(FIXES[fix].first_tag)


def fixes_off(design: Design) -> list[str]:
    """The fixes the trace's design turned off: none for a preset itself; a design named like
    `P-without-X[-without-Y][+mutant]` for a preset P (`Design.describe_change`) says which; for any other design, every fix `current`
    has and the design lacks. (A trace read back lists every fix flag kvmc has today, a flag added
    after it was written as off: its name is the record.)"""
    name = design.name.split("+")[0]
    if name in PRESETS:  # a preset's own trace (a finding): nothing turned off
        return []
    for p in sorted(PRESETS, key=len, reverse=True):
        if name.startswith(p + "-without-"):
            named = [f for f in name[len(p):].split("-without-") if f]
            if all(f in FIXES for f in named):
                return named
    cur = PRESETS["current"]
    return [f for f in FIXES if cur.fixes.get(f) is not None and design.fixes.get(f) is None]


@dataclass(frozen=True)
class Plan:
    mode: str  # "reproduce" | "events" | "not replayable"
    why: str  # one line: the release before the fix, the fix reverted, the fix present, or why not


RING_NOT_REPLAYABLE = ("the per-request SWA ring (swa_req_ring_size): the replay builds SGLang's scheduler over a plain "
                       "SWAKVPool, and the only pool that sets a ring is DeepSeek-V4's, which needs that model's "
                       "layout and CUDA kernels (the conform rows /swa_ring build the ring on a real SWAKVPool alone)")


def plan(trace: object, version: str, reverts: list[str]) -> Plan:
    cfg = trace.cfg  # type: ignore[attr-defined]
    design = trace.design  # type: ignore[attr-defined]
    if cfg.spec is not None:
        return Plan("not replayable", "speculative decoding: EAGLE draft and verify need the draft and target "
                                      "models, which a replay without a model cannot run")
    if cfg.swa_ring:
        return Plan("not replayable", RING_NOT_REPLAYABLE)
    if design.mutants:
        return Plan("not replayable", f"planted kvmc mutant(s) {', '.join(sorted(design.mutants))} have no SGLang "
                                      "counterpart")
    if design.overrides:
        return Plan("not replayable", "a reviewer's transition override exists only in the model")
    off = fixes_off(design)
    present = [f for f in off if has_fix(version, f) and f not in reverts]
    if present:
        names = ", ".join(f"{f} (#{FIXES[f].pr}, since {FIXES[f].first_tag})" for f in present)
        return Plan("events", f"SGLang {version} has {names}: the trace's events must not break the property")
    why = []
    for f in off:
        if f in reverts:
            why.append(f"{f} (#{FIXES[f].pr}) reverted")
        else:
            why.append(f"before {f} (#{FIXES[f].pr}, first in {FIXES[f].first_tag})")
    return Plan("reproduce", f"SGLang {version}: " + ("; ".join(why) if why else "the trace's design"))


def check_reverts(version: str, reverts: list[str]) -> None:
    """A revert must name a fix the release has and kvmc knows how to revert there."""
    from .reverts import REVERTS, available

    for f in reverts:
        if f not in FIXES:
            raise UpstreamUsageError(f"--revert {f!r}: unknown fix; expected one of {sorted(REVERTS)}")
        if not has_fix(version, f):
            raise UpstreamUsageError(f"--revert {f}: SGLang {version} does not have it (#{FIXES[f].pr} is first in "
                                     f"{FIXES[f].first_tag}); replay on {version} without --revert")
        if f not in REVERTS:
            raise UpstreamUsageError(f"--revert {f}: kvmc has no revert patch for #{FIXES[f].pr}; revertible: "
                                     f"{sorted(REVERTS)}")
        if available(f, version) is None:
            written = sorted({v for r in REVERTS[f] for v in r.releases}, key=version_key)
            raise UpstreamUsageError(f"--revert {f}: the revert patch is written for SGLang {', '.join(written)}, "
                                     f"not {version}")


def label(version: str, reverts: list[str]) -> str:
    if not reverts:
        return version
    return version + " with " + ", ".join(f"#{FIXES[f].pr} ({f})" for f in reverts) + " reverted"
