"""`IPython.display` stand-in: notebook output is a no-op."""

from typing import Any


class HTML:
    def __init__(self, data: Any = None, *args: Any, **kwargs: Any) -> None:
        self.data = data


def display(*args: Any, **kwargs: Any) -> None:
    return None
