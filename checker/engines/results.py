"""What an engine returns: a `Result` per property, a `ConfigReport` per config, a `Report` per
check. Plain data every engine, the orchestrator (engines/run.py), the command line and the reports
share; it imports no engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from model.designs import Design

from checker.traces.trace import Trace
from checker.verdict import Verdict


@dataclass
class Result:
    property: str
    verdict: Verdict
    depth: int  # violation depth, or the bound reached
    trace: Trace | None = None
    witness_depth: int | None = None
    reason: str = ""
    seconds: float = 0.0
    solver_seconds: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    def words(self) -> str:
        return self.verdict.words(self.depth)


@dataclass
class ConfigReport:
    config: str
    results: dict[str, Result]
    seconds: float
    proof: dict[str, Any] = field(default_factory=dict)
    # why the design's release does not ship this config's mechanism (`Config.not_modelled_by`): not
    # checked, and no verdict claimed about a combination no release runs
    not_applicable: str = ""


@dataclass
class Report:
    design: Design
    configs: list[ConfigReport]
    depth: int
    seconds: float
    stopped_early: bool = False

    def verdicts(self) -> list[Verdict]:
        return [r.verdict for c in self.configs for r in c.results.values()]

    def violations(self) -> list[tuple[str, Result]]:
        return [(c.config, r) for c in self.configs for r in c.results.values() if r.verdict is Verdict.VIOLATED]
