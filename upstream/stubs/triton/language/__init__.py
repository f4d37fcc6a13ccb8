"""`triton.language` stand-in. Kernel bodies never run; their signatures are evaluated at import
(`BLOCK: tl.constexpr`), and module-level code reads dtypes (`tl.float32`). Every name is an inert
placeholder."""

from __future__ import annotations

from typing import Any


class _Placeholder:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return f"<triton.language stub {self._name}>"

    def __getattr__(self, name: str) -> "_Placeholder":
        if name.startswith("__"):
            raise AttributeError(name)
        return _Placeholder(f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> "_Placeholder":
        return _Placeholder(f"{self._name}()")

    def __getitem__(self, item: Any) -> "_Placeholder":
        return _Placeholder(f"{self._name}[]")


class constexpr:  # a real class: used in annotations and isinstance checks
    def __init__(self, value: Any = None) -> None:
        self.value = value


class dtype:
    def __init__(self, name: str = "") -> None:
        self.name = name


class tensor:
    pass


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    if name[:1].isupper():
        cls = type(name, (), {"__module__": __name__})
        globals()[name] = cls
        return cls
    v = _Placeholder(f"tl.{name}")
    globals()[name] = v
    return v

