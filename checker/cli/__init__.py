"""The `kvmc` command line: `main` parses and dispatches (cli/app.py); each subcommand's module
imports the engines it needs only when it runs, so `kvmc --help` stays fast. SIGINT and SIGTERM
are handled from the first line (checker/interrupt.py): no traceback, no process left behind."""


def main(argv=None):  # type: ignore[no-untyped-def]
    import sys

    from checker import interrupt

    code = 0
    with interrupt.handling():
        try:
            from checker.cli.app import main as _main

            code = _main(argv)
        except interrupt.Interrupted as e:  # before the command could report (while starting, say)
            print(f"kvmc: interrupted by {e.name}", file=sys.stderr, flush=True)
            code = e.exit_code
    if interrupt.signalled() is not None and argv is None:
        # the whole process ends here: an executor's or multiprocessing's exit hooks would join
        # threads and children that are gone (`kvmc review` hung there)
        interrupt.exit_now(code)
    return code
