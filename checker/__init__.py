"""kvmc's checker, one concern a folder, lowest first (a folder imports only those before it):

    verdict.py  the verdicts and exit codes
    traces/     Trace, the concrete re-run, ITF, step annotations
    engines/    BMC, k-induction, explicit, random; the orchestration of a check
    reports/    charts, terminal and HTML renderings
    replay/     refinement checks of traces on the torch pool; the regression corpus
    cli/        the `kvmc` command line and its subcommands
"""
