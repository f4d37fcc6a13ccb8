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
