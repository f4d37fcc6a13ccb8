"""The one exception bad input raises in upstream/: printed as one line, exit status 2."""


class UpstreamUsageError(Exception):
    """Bad input (an unknown release, a wheel that cannot be had, a release without an adapter)."""


EXIT_USAGE = 2
