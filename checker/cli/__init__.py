"""The `kvmc` command line: `main` parses and dispatches (cli/app.py); each subcommand's module
imports the engines it needs only when it runs, so `kvmc --help` stays fast."""


def main(argv=None):  # type: ignore[no-untyped-def]
    from checker.cli.app import main as _main

    return _main(argv)
