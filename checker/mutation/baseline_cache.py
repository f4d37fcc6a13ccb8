"""What `kvmc mutate` learns about the model itself before any mutant, kept between runs.

Before the hunt, `kvmc mutate` runs the model's own explicit search on every config a mutant runs
in (`runner.baseline`: where each property's witness is first met, nothing violated) and the
model's BMC of every property to depth 1 (`runner.model_findings`). On a 2-core machine that is
about six minutes for the twelve configs, spent again by every run although the model did not
change. `--baseline-cache DIR` keeps those results: one JSON file per (kind, config, arguments),
named by a digest of every source file the result can depend on (model/, specs/,
checker/engines/, checker/mutation/, the z3 version) and of the arguments. Any edit there names a
new file, so an entry is only ever read by the code that wrote it; nothing is invalidated in place.

A result is the run as it happened, time limits included: a search the time limit cut at depth 5
is read back as depth 5 (what the run that wrote it reached), never as more.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent.parent
SOURCES = ("model", "specs", "checker/engines", "checker/mutation")


@lru_cache(maxsize=1)
def source_digest() -> str:
    """sha256 over the sources a baseline depends on (path and bytes of each .py file) and z3's version."""
    import z3

    h = hashlib.sha256(z3.get_full_version().encode())
    for top in SOURCES:
        for f in sorted((REPO / top).rglob("*.py")):
            h.update(str(f.relative_to(REPO)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


class BaselineCache:
    """A folder of JSON results keyed by (kind, config, arguments) and the source digest."""

    def __init__(self, root: str | Path) -> None:
        """Checks the folder can be used, creating nothing: it is made at the first write."""
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise ValueError(f"--baseline-cache {str(self.root)!r} is a file; expected a folder (it is created if missing)")
        parent = self.root
        while not parent.exists():
            parent = parent.parent
        if not os.access(parent, os.W_OK | os.X_OK):
            raise ValueError(f"--baseline-cache {str(self.root)!r}: {str(parent)!r} is not writable; expected a folder "
                             "kvmc can write")

    def _file(self, kind: str, config: str, args: tuple[Any, ...]) -> Path:
        key = json.dumps([source_digest(), kind, config, list(args)])
        return self.root / f"{kind}-{config}-{hashlib.sha256(key.encode()).hexdigest()[:20]}.json"

    def get(self, kind: str, config: str, *args: Any) -> dict[str, Any] | None:
        f = self._file(kind, config, args)
        try:
            return json.loads(f.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):  # a torn or foreign file: recompute, and the put below replaces it
            return None

    def put(self, kind: str, config: str, args: tuple[Any, ...], value: dict[str, Any]) -> None:
        """Write atomically (a temporary file renamed over the entry): a reader sees all of it or none."""
        self.root.mkdir(parents=True, exist_ok=True)
        f = self._file(kind, config, args)
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=f.name + ".", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as out:
                json.dump(value, out)
            os.replace(tmp, f)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
