"""Cross-engine agreement (tests/engines/test_agreement.py) on the hybrid-SWA and HiCache configs: the
same check, the same instances, in a file of its own so that the two halves run on two workers."""

from __future__ import annotations

import pytest

from tests.engines.test_agreement import CASES, disagreements, hybrid

HYBRID = [(c, g) for c, g in CASES if hybrid(c)]


def test_the_two_files_split_the_cases() -> None:
    assert HYBRID and len(HYBRID) < len(CASES)


@pytest.mark.parametrize("config, group", HYBRID, ids=[f"{c}-{'+'.join(g)}" for c, g in HYBRID])
def test_bmc_and_explicit_agree(config: str, group: list[str]) -> None:
    bad = disagreements(config, group)
    assert bad == [], "\n\n".join(bad)
