"""The SGLang releases the harness knows: which kvmc preset each conforms to, which API family
its adapter speaks (upstream/adapters.py), and which stubs its imports need.

Adding a release (0.5.19 .. 0.5.23 as the presets reach them): one `Release` line; its `api`
names an adapter family, or `None` while no adapter exists (install works, `kvmc conform` says
"no adapter yet" and exits 2).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Release:
    version: str
    preset: str | None  # the kvmc design preset that claims this release (None: none yet)
    api: str | None  # adapter family (upstream/adapters.py); None: installable, not conformable
    note: str = ""


RELEASES: dict[str, Release] = {
    r.version: r
    for r in [
        Release("0.5.10.post1", "v0.5.10.post1", "v0510", "fill_ids; mixed_with_decode_tokens; one allocator.py"),
        Release("0.5.11", "v0.5.11", "v0511", "fill_ids; num_mixed_decode_tokens"),
        Release("0.5.12.post1", "v0.5.12.post1", "v0511", "same API family as 0.5.11"),
        Release("0.5.13", "v0.5.13", "v0513", "fill_len, array('q') token ids; mem_cache/allocator/ package"),
        Release("0.5.17", None, "v0513", "no preset claims it"),
        Release("0.5.18", "current", "v0513", "the release `current` claims (SGLANG_COMMIT merge-base)"),
        Release("0.5.19", None, None, "not yet studied"),
        Release("0.5.20", None, None, "not yet studied"),
        Release("0.5.21", None, None, "PrefillBudget classes; not yet studied"),
        Release("0.5.22", None, None, "torch-native allocator path; not yet studied"),
        Release("0.5.23", None, None, "prefix_len / extend_end / req.kv API; no adapter yet"),
    ]
}


def release(version: str) -> Release:
    """The registry entry of `version`; an unknown one is bad input (one line, exit 2)."""
    from .errors import UpstreamUsageError

    v = version[1:] if version.startswith("v") else version
    try:
        return RELEASES[v]
    except KeyError:
        raise UpstreamUsageError(
            f"unknown SGLang release {version!r}; the harness knows {', '.join(RELEASES)} (upstream/releases.py)"
        ) from None


def preset_releases() -> list[Release]:
    """The releases some preset claims (what `kvmc conform --all` runs)."""
    return [r for r in RELEASES.values() if r.preset is not None]
