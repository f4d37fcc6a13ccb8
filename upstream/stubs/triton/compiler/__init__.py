"""`triton.compiler` stand-in: CamelCase names are inert classes."""

from typing import Any


def __getattr__(name: str) -> Any:
    if name[:1].isupper():
        cls = type(name, (), {"__module__": __name__})
        globals()[name] = cls
        return cls
    raise AttributeError(f"module 'triton.compiler' (kvmc stub) has no attribute {name!r}")
