"""Which of the asked properties a config is checked for.

A property may declare the configs it is about (`Property.applies` in specs/properties.py: e.g.
HiCache's load-back, on the configs with HiCache); elsewhere it is not checked, rather than reported
vacuous, which would read as a finding and make every such config's exit status "inconclusive".
Read with `getattr`: `kvmc review --base-rev` runs these engines on an older specs/ whose
properties have no `applies` (they apply to every config)."""

from __future__ import annotations

from typing import Any

from checker.engines.results import ConfigReport


def for_config(cfg: Any, names: list[str] | None = None) -> list[str]:
    """`names` (default: every safety property) less those that do not apply to `cfg`; names that
    are not safety properties (liveness ones) pass through."""
    from specs.properties import PROPERTIES

    out = []
    for n in (list(PROPERTIES) if names is None else names):
        applies = getattr(PROPERTIES.get(n), "applies", None)
        if applies is None or applies(cfg):
            out.append(n)
    return out


def nothing_applies(cfg: Any) -> ConfigReport:
    """The report of a config none of the asked properties applies to: nothing checked, nothing claimed."""
    return ConfigReport(cfg.name, {}, 0.0, {})


# The largest page size the z3 engines are asked to unroll: at page 4 the BMC reaches depth 1 in
# about 5 minutes on 2 cores (docs/engines.md), and at page 64 one pinned instance's depth 1 takes
# 40 s. The concrete engines (explicit, random) do not care about page arithmetic and check the
# page-16 and page-64 configs; the z3 engines report them `not checked` rather than spin.
SYMBOLIC_MAX_PAGE = 4
SYMBOLIC_ENGINES = ("bmc", "induction")


def beyond_symbolic_reach(engine: str, cfg: Any) -> str | None:
    """Why `engine` does not check `cfg` (a page size past `SYMBOLIC_MAX_PAGE` for a z3 engine), or None."""
    if engine in SYMBOLIC_ENGINES and cfg.page_size > SYMBOLIC_MAX_PAGE:
        return (f"page size {cfg.page_size} is beyond the symbolic engines' reach (z3 is checked up to page "
                f"{SYMBOLIC_MAX_PAGE}); --engine explicit or --engine random checks {cfg.name}")
    return None
