"""A session-scoped fixture that installs the two releases the CI conforms (0.5.10.post1, before
the #23174 / #27391 fixes, and 0.5.13, after them) with `kvmc sglang install`, idempotently:
a fresh clone's `python -m pytest` sets them up itself (into `$KVMC_SGLANG_DIR`, default
~/.cache/kvmc/sglang; about 75 s the first time, nothing after)."""

from __future__ import annotations

from pathlib import Path

import pytest

CI_RELEASES = ("0.5.10.post1", "0.5.13")


@pytest.fixture(scope="session")
def sglang_root() -> Path:
    from upstream.install import default_dir, install

    root = default_dir()
    install(CI_RELEASES, root, say=lambda m: None)
    return root
