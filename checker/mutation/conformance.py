"""Survivors against SGLang itself: `kvmc mutate --conform VERSION`.

A mutant no property sees may still be a model SGLang does not run. The conformance harness
(upstream/conform.py: SGLang's own PrefillAdder, allocators and radix caches on CPU, the model's
transitions beside them, generated scenarios) is the second oracle: a survivor whose rows disagree
with SGLang where the unmutated model agrees is killed by conformance (principle 2: the model answers
to the real code). A row the model itself disagrees on is no evidence and is left out; so are
errors and documented abstractions (upstream/abstractions.py), which the harness counts apart.

What it cannot see: a mutant of a transition no row runs (`check_decode_mem`, retraction, EAGLE v1;
the extend, decode and spec v2 decode allocations have rows since session 27), and one whose
difference the scenarios do not reach. Its time is outside the hunt's budget, and the report says how long it took.
"""

from __future__ import annotations

import time
from typing import Any


def baseline(version: str, examples: int, seed: int, rows: tuple[str, ...] = ()) -> dict[str, Any]:
    """The unmutated model's rows on `version` (`rows`, default all): {row: disagreed count} (None
    where the row does not apply), from the same scenarios the mutants get."""
    from upstream.conform import run

    [res] = run([version], rows, examples, seed, jobs=1)
    if "error" in res:
        raise RuntimeError(f"kvmc conform on SGLang {version} failed for the model itself: {res['error'][:300]}")
    return {row["row"]: row.get("disagreed") for row in res["rows"]}


def conform_kill(mid: str, version: str, examples: int, seed: int, base: dict[str, Any],
                 rows: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """The kill of generated mutant `mid` by conformance on `version` (the `kill` dict of an outcome,
    engine "conform"), or None when every row the model agrees on agrees with the mutant too."""
    from upstream.conform import run, side_by_side

    t0 = time.perf_counter()
    [res] = run([version], rows, examples, seed, jobs=1, generated=[mid])
    seconds = time.perf_counter() - t0
    if "error" in res:
        return None  # the worker failed (a mutant that raises is `invalid` before it gets here)
    for row in res["rows"]:
        if row.get("disagreed") and base.get(row["row"]) == 0:
            return dict(engine="conform", config=f"SGLang {version}", property=f"agrees with SGLang: {row['row']}",
                        how="disagreed", depth=None, seconds=round(seconds, 1), point=None,
                        disagreed=row["disagreed"], scenarios=row.get("scenarios"),
                        evidence=side_by_side(res, row) if row.get("minimal") else "")
    return None
