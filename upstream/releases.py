"""The SGLang releases the harness knows: which kvmc preset each conforms to, which API family
its adapter speaks (upstream/real.py), and which stubs its imports need.

Adding a release: one `Release` line; its `api` names the adapter family (a label: upstream/real.py
adapts by feature tests on the imported objects), or `None` while no adapter exists (install works,
`kvmc conform` says "no adapter yet" and exits 2). Each release a preset names is conformed to it;
`current` to the release it claims (`current_release`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Release:
    version: str
    preset: str | None  # the kvmc design preset that claims this release (None: none yet)
    api: str | None  # adapter family (upstream/real.py); None: installable, not conformable
    note: str = ""


RELEASES: dict[str, Release] = {
    r.version: r
    for r in [
        Release("0.5.10.post1", "v0.5.10.post1", "v0510", "fill_ids; mixed_with_decode_tokens; one allocator.py"),
        Release("0.5.11", "v0.5.11", "v0511", "fill_ids; num_mixed_decode_tokens"),
        Release("0.5.12.post1", "v0.5.12.post1", "v0511", "same API family as 0.5.11"),
        Release("0.5.13", "v0.5.13", "v0513", "fill_len, array('q') token ids; mem_cache/allocator/ package"),
        Release("0.5.16", None, None, "no preset claims it; its API (req.kv appears) not checked by the harness"),
        Release("0.5.17", None, "v0513", "no preset claims it"),
        Release("0.5.18", "v0.5.18", "v0513", "req.kv (ReqKvInfo) for kv_allocated_len; UnifiedRadixCache for hybrid SWA"),
        Release("0.5.19", "v0.5.19", "v0519", "ReqKvInfo always present: cache_protected_len, req_pool_idx, kv_committed_len"),
        Release("0.5.20", "v0.5.20", "v0519", "Req.lock_receipt; _select_prefill_admission"),
        Release("0.5.21", "v0.5.21", "v0521", "PrefillBudget / SWAPrefillBudget (memory_budget); no SWARadixCache"),
        Release("0.5.22", "v0.5.22", "v0522", "Req.prefix_len / extend_end, req.lock, tree.checkpoint; torch-native allocator path"),
        Release("0.5.23", "v0.5.23", "v0522", "get_num_allocatable_reqs(num_held_rows); tvm_ffi stub"),
    ]
}


def current_release() -> str:
    """The release the `current` preset is (`model.designs.CURRENT_RELEASE`)."""
    from model import designs

    return designs.CURRENT_RELEASE


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
    """The releases some preset claims."""
    return [r for r in RELEASES.values() if r.preset is not None]


def preset_pairs() -> list[tuple[str, str]]:
    """(release, preset) for every preset that names a release: what `kvmc conform --all` runs.
    `current` is one of them (its flags are its release's preset's), so it is run only where its
    flags differ from that preset's."""
    from model import designs

    pairs = [(r.version, r.preset) for r in preset_releases() if r.preset]
    rel = current_release()
    twin = next((p for v, p in pairs if v == rel), None)
    if twin is None or designs.preset(twin).flags() != designs.preset("current").flags():
        pairs.append((rel, "current"))
    return pairs
