"""Verdicts, worded so that none claims more than was checked (CrossHair's rule), and the exit
status they (or an error, or an interrupt) give."""

from __future__ import annotations

from enum import Enum


class Verdict(str, Enum):
    VIOLATED = "violated"  # a concrete counterexample was found and re-run through the concrete model
    HOLDS_TO_DEPTH = "holds to depth"  # no violation in any execution of at most k iterations; not a proof
    PROVED = "proved"  # k-induction closed: holds at every depth, for the model under the config's bounds
    VACUOUS = "vacuous"  # holds to depth k, but no state within k iterations exercises the property
    UNKNOWN = "unknown"  # the solver answered unknown or ran out of time: nothing is claimed

    def words(self, depth: int | None = None) -> str:
        if self is Verdict.HOLDS_TO_DEPTH:
            return f"holds to depth {depth} (not proved)"
        if self is Verdict.VACUOUS:
            return f"vacuous to depth {depth} (never exercised)"
        if self is Verdict.VIOLATED:
            return f"violated at depth {depth}"
        if self is Verdict.PROVED:
            return f"proved (k={depth})"
        return "unknown"


# exit status of every `kvmc` subcommand (documented in checker/cli/app.py and the README):
# 0 holds / proved; 1 a violation (review: newly broken; replay: diverged); 2 bad usage or input;
# 3 inconclusive (unknown, timeout, vacuous); 4 internal error (a kvmc bug, traceback in a file);
# 128 + N killed by signal N after saying what was established (130 SIGINT, 143 SIGTERM)
EXIT_OK, EXIT_VIOLATION, EXIT_USAGE, EXIT_INCONCLUSIVE, EXIT_INTERNAL = 0, 1, 2, 3, 4
EXIT_SIGINT, EXIT_SIGTERM = 130, 143


def exit_code(verdicts: list[Verdict]) -> int:
    if any(v is Verdict.VIOLATED for v in verdicts):
        return EXIT_VIOLATION
    if any(v in (Verdict.UNKNOWN, Verdict.VACUOUS) for v in verdicts):
        return EXIT_INCONCLUSIVE
    return EXIT_OK
