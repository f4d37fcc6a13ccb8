"""What the harness (harness.py), its forcing of SGLang's choices (forcing.py) and the refinement
map (abstraction.py) agree on, below all three: the environment SGLang's scheduler runs under, the
forced-retraction interval, and kvmc's token scheme (which token a request slot's position holds,
and whose a token is). Worker side, any release 0.5.10.post1 .. 0.5.23; imports no SGLang.
"""

from __future__ import annotations

from model.config import Config, Params

# read by SGLang's envs at get() time; set before the first scheduler step
ENV = {
    "SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_IDLE": "1",  # the idle check raises on a leak (instead of logging)
    # `_evict_swa` fires when decode_batch_idx % interval == 1; with the default multiplier the
    # interval can be 1 (W = 1, page 1), where the condition never holds and the choice could not
    # be forced either way: an interval of at least 2 lets forcing.py choose
    "SGLANG_SWA_EVICTION_INTERVAL_MULTIPLIER": "2",
    # 0.5.18+ frees the window once this many tokens slid out: 1, so that it frees whenever the
    # model's `_evict_swa` would move E and forcing.py decides by `decode_batch_idx`
    "SGLANG_SWA_EVICTION_INTERVAL": "1",
    # 0.5.21+ picks the Rust tree core for UnifiedRadixCache where its extension loads; its nodes are
    # opaque handles (no node_by_id / root_node in 0.5.21), which abstraction.py cannot map onto the
    # model's atoms. The Python core is SGLang's own reference implementation of the same interface
    # (and the one it falls back to, e.g. for session-aware caching).
    "SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND": "python",
}
RETRACT_INTERVAL = 2  # SGLANG_TEST_RETRACT_INTERVAL as forcing.py drives forward_ct


# -- tokens ----------------------------------------------------------------------------------------
def token(cfg: Config, params: Params, r: int, pos: int) -> int:
    """Token at position `pos` of request slot r: the warm prefix's tokens (shared), else private to
    r. Outputs follow the same scheme, so a request re-matches its own nodes and nobody else's
    (kvmc's tree abstraction: prefix sharing goes through the warm prefix only)."""
    if cfg.shares(r) and pos < sum(params.warm_len):
        return 1 + pos
    return 1_000_000 * (r + 1) + pos


def owner_of(tok: int, cfg: Config) -> int:
    """-1 for a warm-prefix token, else the request slot. Token 0 is an aborted prompt's
    (`set_finish_with_abort` makes it [0]): the config's over-long slot."""
    if tok == 0 and cfg.over_long:
        return cfg.over_long[0]
    return -1 if tok < 1_000_000 else tok // 1_000_000 - 1
