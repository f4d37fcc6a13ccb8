"""Shared helpers of the torchvision stand-in: classes whose every attribute is a name, and
functions that raise."""

from typing import Any


class _AnyName(type):
    def __getattr__(cls, name: str) -> str:
        if name.startswith("__"):
            raise AttributeError(name)
        return f"{cls.__name__}.{name}"


def names_class(name: str, module: str) -> type:
    """A class whose attributes are all defined (`InterpolationMode.BICUBIC`)."""
    return _AnyName(name, (), {"__module__": module})


def unavailable(qualname: str) -> Any:
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{qualname} on kvmc's torchvision stub (not available)")

    return fn


def module_getattr(module: str) -> Any:
    """A module `__getattr__`: CamelCase names are classes, others are functions that raise."""
    made: dict[str, Any] = {}

    def getattr_(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name not in made:
            made[name] = names_class(name, module) if name[:1].isupper() else unavailable(f"{module}.{name}")
        return made[name]

    return getattr_
