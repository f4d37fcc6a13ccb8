"""kvmc's checker, one concern a folder, lowest first (a module imports only its own layer and those
below it: docs/ARCHITECTURE.md's `order:` line, checked by tests/unit/test_layers.py):

    verdict.py    the verdicts and exit codes
    progress.py   what a run is doing now, for heartbeats
    interrupt.py  SIGINT/SIGTERM: stop promptly, say what was established, reap children
    executors/    `--executor local|ray`
    traces/       Trace, the concrete re-run, ITF, step annotations
    engines/      BMC, k-induction, explicit, random; the orchestration of a check
    reports/      charts, terminal and HTML renderings
    replay/       refinement checks of traces on the torch pool; the regression corpus
    mutation/     `kvmc mutate` (operators.py sits below upstream/, the rest above it)
    cli/          the `kvmc` command line and its subcommands
"""
