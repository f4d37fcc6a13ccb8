"""Designs: which SGLang fixes are in, as named flags, and release presets.

Each fix below is one SGLang pull request that changed a transition or the busy check. A design
maps every fix to a variant name (the shipped behaviour is the first variant) or to `None` (the
pre-fix behaviour). Transitions read `design.on(fix)` / `design.variant(fix)`, so the same model
runs the code before and after each fix.

Presets follow the digest's version table (`../shared/reference/sglang-memory-model.md`, section 0):
v0.5.10.post1, v0.5.11, v0.5.12.post1, v0.5.13 and v0.5.18 .. v0.5.23, each the fixes its release
shipped (no fix was cherry-picked into v0.5.10.post1 or v0.5.12.post1), and `current`, the newest
release modelled: 0.5.23 (`CURRENT_RELEASE`). `build` makes a design from a preset and the fixes
turned off or on (`--design/--without/--with`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

CURRENT_RELEASE = "0.5.23"  # the release `current` is (its flags are v0.5.23's; PyPI wheels carry no commit id)


@dataclass(frozen=True)
class Fix:
    name: str
    pr: int
    commit: str
    first_tag: str
    summary: str
    variants: tuple[str, ...] = ("on",)  # first = what shipped
    off: str = "pre-fix behaviour"


FIXES: dict[str, Fix] = {
    f.name: f
    for f in [
        Fix(
            "swa_busy_check",
            21499,
            "f2377a00cb9d9f0d1efdeada0bb3719726914ff1",
            "v0.5.11",
            "busy check also balances the SWA pool, with U_S = ceil(A) - max(P, E)",
            variants=("on", "full_pool_only"),
            off="the released pre-fix check (v0.5.10.post1) calls evictable_size() on SWARadixCache, which raises "
            "NotImplementedError; variant full_pool_only is main between #22562 and #21499: SWA pool unchecked",
        ),
        Fix(
            "session_active",
            22753,
            "0cb7295698f0",
            "v0.5.11",
            "a session slot whose req_pool_idx belongs to a batch request is not session-held (#22753); "
            "variant is_active is #22213's flag (set by restore_to_req, cleared by save_from_req)",
            variants=("active_idx", "is_active"),
            off="every slot holding KV is counted as session-held, even while its request runs",
        ),
        Fix(
            "chunked_swa_page_reserve",
            23174,
            "50fc2c9e2308114b40d507ca8446e2c3bdd3842e",
            "v0.5.11",
            "add_chunked_req reserves one page of rem_swa_tokens and defers the chunk when nothing is left",
            off="R = min(rem_chunk, rem_total, rem_swa); R <= 0 falls back to rem_chunk",
        ),
        Fix(
            "chunked_req_scheduled_last_iter",
            24318,
            "",
            "v0.5.12.post1",
            "get_next_batch_to_run stashes the chunked request only if a chunk of it was scheduled in the last "
            "iteration (#24318, fixing #24252; content-based since #26938: fill_len > len(prefix_indices))",
            off="<= v0.5.11: the chunked request is stashed at every iteration; after #23174 parked it, its fill_ids "
            "still hold the whole prompt, so cache_unfinished_req inserts req_to_token entries never allocated "
            "(phantom KV) and the next extend is 0",
        ),
        Fix(
            "spec_topk_busy_check",
            27228,
            "687cfe91982904ee789577c82ddae19c51e041d8",
            "v0.5.13",
            "the busy check also runs with speculative_eagle_topk > 1",
            off="topk > 1 returns before checking anything",
        ),
        Fix(
            "swa_hostload_budget",
            27391,
            "fe548f36b057f231e452bc8bf5736a9d61740d16",
            "v0.5.13",
            "_swa_budget_for_req charges ceil(swa_host_hit_length) for the SWA pages init_load_back will allocate",
            off="SWA host hits are a sentinel host_hit_length >= 1 and are not charged",
        ),
        Fix(
            "retract_tail_free",
            22862,
            "ce31934ca80e",
            "v0.5.11",
            "restore_to_req uses prefix_len = min(C, |key|) and frees the orphaned tail [ceil(prefix_len), A)",
            off="prefix_len = min(C, |key| - 1); the row position C-1.. is overwritten and its old slot leaks",
        ),
        Fix(
            "swa_budget_split",
            22597,
            "bc1bfbf60770",
            "v0.5.11",
            "separate rem_swa_tokens budget and _swa_budget_for_req gate",
            off="hybrid SWA admission uses min(full, swa) available+evictable as its only budget",
        ),
        # -- radix cache / SWA window (issue 27; model/radix_cache.py, schedule_batch._evict_swa) --
        Fix(
            "swa_release_page_margin",
            22470,
            "",
            "v0.5.11",
            "ScheduleBatch._evict_swa keeps a page more than the window: E' = floor_page(max(E, pre_len - W - page_size)), "
            "so the frontier never reaches the insert boundary floor_page(seq_len) (a chunk cache too, up to 0.5.13)",
            off="E' = floor_page(max(E, pre_len - W)) (0.5.10.post1:managers/schedule_batch.py::_evict_swa)",
        ),
        Fix(
            "swa_release_threshold",
            29860,
            "",
            "v0.5.15.post1",
            "free_swa_out_of_window_slots keeps max(W, page_size) tokens: E' = floor_page(max(E, pre_len - max(W, ps))); "
            "variant ceil_max_w_ps is v0.5.23 (PR not identified): pre_len - ceil_page(max(W, ps))",
            variants=("max_w_ps", "ceil_max_w_ps"),
            off="page_margin (v0.5.11-v0.5.14, #22470 `swa_release_page_margin`): E' = floor_page(max(E, pre_len - W - page_size))",
        ),
        Fix(
            "swa_leaf_window_cap",
            26919,
            "",
            "v0.5.13",
            "UnifiedRadixCache's SWA component caps a new in-window leaf at T = ceil_page(W): a longer one is split into "
            "[.., end - T) and [end - T, end), both live, so a lock at the leaf pins one window of SWA "
            "(0.5.13:mem_cache/unified_cache_components/swa_component.py::_maybe_split_leaf_for_swa_lock; not in "
            "0.5.12.post1's). A rule of the unified tree only (`leaf_window_cap`): with HiCache from v0.5.13, on every "
            "hybrid-SWA config once the unified tree is the default (`unified_radix_default`, v0.5.16); found by "
            "`kvmc explore --compare-model` on 0.5.13's hybrid_swa_hicache (56 of 300 walks departed without it)",
            off="SWARadixCache: the new in-window part is one node (SGLANG_OPT_SWA_SPLIT_LEAF_ON_INSERT defaults False)",
        ),
        Fix(
            "unified_radix_default",
            30468,
            "",
            "v0.5.16",
            "hybrid SWA without HiCache builds UnifiedRadixCache, so the unified tree's own rules (`leaf_window_cap`) "
            "hold on every hybrid-SWA config; with HiCache the tree is UnifiedRadixCache from v0.5.12.post1 "
            "(UnifiedRadixCache.init_hicache) either way",
            off="hybrid SWA without HiCache builds SWARadixCache",
        ),
        Fix(
            "swa_tombstone_leaf_kept",
            29351,
            "",
            "v0.5.15.post1",
            "a new leaf entirely below swa_evicted_seqlen is inserted as a Full-only tombstone: its full slots stay "
            "the tree's (commit_insert_component_data; the unified cache is the hybrid-SWA default from v0.5.16)",
            off="nothing is inserted and the new part's full slots are freed (SWARadixCache._insert_helper case 3)",
        ),
        Fix(
            "swa_tombstone_parent_kept",
            30468,
            "",
            "v0.5.16",
            "a tombstone whose last child is evicted stays in the tree as a Full-only device leaf, evictable on its "
            "own later: UnifiedRadixCache's _iteratively_delete_tombstone_leaf lets only the Full component decide "
            "(Full on device: keep), every release of it (0.5.12.post1 .. 0.5.23); the hybrid-SWA default cache "
            "since #30468 (found by kvmc conform UnifiedRadixCache/swa on 0.5.18: the model's forced deletion "
            "freed 8 tokens for a need of 1 and allowed no outcome); its SWA pass walks the SWA LRU list deleting "
            "evictable leaves and tombstoning the rest, so a node may be tombstoned before its last child goes in "
            "the same eviction (found by event_loop/swa_mixed on 0.5.18-0.5.23)",
            off="SWARadixCache._iteratively_delete_tombstone_leaf: the childless tombstone is deleted with its last "
            "child, its Full slots freed in the same eviction",
        ),
        Fix(
            "unfinished_swa_release",
            34653,
            "",
            "v0.5.18",
            "cache_unfinished_req first frees the request's out-of-window SWA (free_swa_out_of_window_slots with "
            "pre_len = |key| - 1; #27402's hook, default on by #34653) and inserts with that swa_evicted_seqlen "
            "(#29350): [P, E') becomes a tombstone node; then cache_protected_len := the re-match of the key (variant "
            "rematch, v0.5.18-v0.5.22) or the inserted path (variant path, v0.5.23, PR not identified)",
            variants=("rematch", "path"),
            off="no SWA is released at an unfinished insert (E <= P there); cache_protected_len := the inserted path",
        ),
        Fix(
            "finish_checkpoint",
            0,
            "",
            "v0.5.22",
            "release_kv_cache(checkpoint=True) puts a finished request into the tree through checkpoint_into_tree, "
            "which re-matches the inserted key and asserts new_prefix_len <= len(new_indices) as a stash does "
            "(0.5.22:mem_cache/common.py::release_kv_cache, unified_radix_cache.py::checkpoint_into_tree; PR not "
            "identified). Matters with unfinished_swa_release=rematch (v0.5.22: a short re-match kills the scheduler, "
            "the state outcome OOM_ASSERT); with path (v0.5.23) the finish keeps the inserted path",
            off="cache_finished_req inserts and does not re-match (0.5.18-0.5.21: no assertion at a finish)",
        ),
        Fix(
            "swa_segment_lock",
            36848,
            "",
            "v0.5.20",
            "the SWA lock walk counts every node's length toward the window, tombstones included, and locks each "
            "(acquire_component_lock); only nodes with SWA KV move from evictable to protected",
            off="the walk skips tombstones (skip_lock_node_ids): only live SWA tokens count toward the window",
        ),
        Fix(
            "busy_check_chunked_req",
            37502,
            "",
            "v0.5.20",
            "the busy check's uncached term also counts the chunked request (scheduler.chunked_req, de-duplicated by "
            "identity), also when it is parked outside every batch",
            off="only requests of last_batch and running_batch are counted",
        ),
        Fix(
            "swa_branching_insert",
            0,
            "",
            "v0.5.20",
            "the match records swa_branching_seqlen = floor_page(Full-KV hit) when the Full-KV hit reaches past the "
            "SWA-valid prefix (device + host hit); the request's next insert with branching > P caches only "
            "[0, branching) (at a stash the rest stays the request's, at finish it is freed), re-publishing a live "
            "SWA window there; an unfinished insert then releases its out-of-window SWA again (PR not identified; "
            "first seen in v0.5.20's unified_cache/components/swa.py; #37584 ports it to the Rust core)",
            off="every insert caches [0, floor_page(C))",
        ),
        Fix(
            "prompt_boundary_split",
            0,
            "",
            "v0.5.20",
            "plain RadixCache.cache_finished_req re-inserts the key cut at floor_page(|input|) (topology only), so "
            "the output is its own leaf (PR not identified; first seen in v0.5.20's radix_cache.py; FULL-only "
            "unified caches from v0.5.21); variant checkpoint (v0.5.22): the split moved into "
            "UnifiedRadixCache.checkpoint_into_tree, which a stash (cache_unfinished_req) runs too, so an unfinished "
            "insert past the prompt (a retracted request re-prefilling its output) splits there as well "
            "(0.5.22:mem_cache/unified_radix_cache.py::checkpoint_into_tree; kvmc conform's event_loop/sessions row)",
            variants=("on", "checkpoint"),
            off="the finished request's insert leaves prompt and output in one node when it creates both",
        ),
        Fix(
            "swa_window_headroom",
            32379,
            "69a3c54c7023",
            "v0.5.17",
            "_swa_budget_for_req = max(min(e, rc) - W, 0) + min(e + mnt, W) + page_size (+ host term)",
            off="_swa_budget_for_req = max(min(e, rc), W) + page_size (+ host term)",
        ),
        Fix(
            "admission_page_reserve",
            22495,
            "",
            "v0.5.11",
            "add_one_req's token gate charges extend + max_new + page_size, as _update_prefill_budget deducts",
            off="total_tokens = extend + max_new (admission more optimistic than the deduction)",
        ),
        Fix(
            "chunked_input_gate",
            25741,
            "",
            "v0.5.13",
            "add_one_req's rem_input_tokens gate (max_prefill_tokens) applies only with chunked prefill off",
            off="the gate applies with chunked prefill on too: a second request is refused once its ceil_page(extend) "
            ">= rem_input_tokens",
        ),
        Fix(
            "chunk_end_page_align",
            0,
            "",
            "v0.5.12.post1",
            "a chunk add_one_req truncates ends on a page boundary: trunc = floor_page(prefix + trunc) - prefix "
            "(PR not identified; first seen in v0.5.12.post1's schedule_policy.py)",
            off="trunc = floor_page(rem_chunk_tokens), aligned to truncation_align_size when set, whatever the prefix",
        ),
        Fix(
            "swa_gate_fresh_tail",
            0,
            "",
            "v0.5.17",
            "add_one_req's SWA gate charges ceil_page(extend - host_hit_length), the freshly prefilled tail "
            "(PR not identified; first seen in v0.5.17's schedule_policy.py, with #32379)",
            off="the SWA gate charges the whole extend",
        ),
        Fix(
            "swa_chunk_cap",
            31681,
            "",
            "v0.5.17",
            "add_one_req: a request failing the SWA gate is admitted as a chunk capped by _swa_chunk_cap (chunked "
            "prefill on, cap > 0); variant never_fits is #32700 (v0.5.18): only when its SWA budget >= the SWA pool size",
            variants=("never_fits", "any_shortfall"),
            off="a request failing the SWA gate is NO_TOKEN",
        ),
        # -- speculative decoding (issue 27, model/speculative.py) --
        Fix(
            "eagle_v1_removed",
            25464,
            "",
            "v0.5.13",
            "EAGLE v1 is gone (#25464 'Deprecate Spec V1': no eagle_worker.py in the 0.5.13 wheel); speculative "
            "decoding runs the spec v2 worker: a Spec(version=2) config applies, a Spec(version=1) config does not",
            off="EAGLE v1 (eagle_worker.py) serves speculative decoding on the non-overlap loop: a Spec(version=1) config "
            "applies, a Spec(version=2) config does not",
        ),
        Fix(
            "spec_v2_page_align",
            0,
            "",
            "v0.5.16",
            "eagle_prepare_for_decode over-allocates to A' = max(A, ceil_page(C + 2a)), whole pages "
            "(PR not identified; first seen in v0.5.16's eagle_utils.py, #31616 describes it)",
            off="A' = max(A, C + 2a) (v0.5.13-0.5.15.post1)",
        ),
        Fix(
            "evict_shortfall",
            32016,
            "",
            "v0.5.17",
            "the plain allocator's evict_from_tree_cache asks the tree for the shortfall num_tokens - available_size() "
            "(#32016), as the hybrid-SWA arm always did",
            off="asks the tree for the whole num_tokens whenever available_size() < num_tokens (v0.5.10.post1-0.5.16; "
            "evicts more, never less)",
        ),
        Fix(
            "spec_retract_length_order",
            0,
            "",
            "v0.5.17",
            "retract_decode orders speculative requests like the others, by (len(output_ids), -len(origin_input_ids)) "
            "(PR not identified; _get_decode_retraction_order loses allow_policy_sort in v0.5.17)",
            off="speculative requests are retracted from the back of the batch (allow_policy_sort=False)",
        ),
        Fix(
            "session_record",
            37108,
            "",
            "v0.5.19",
            "a streaming session's KV record (ReqKvInfo) is one object: shared (#37108, v0.5.19-0.5.21) the slot takes the "
            "request's record at the first save and every later turn runs on it; owned_at_alloc (v0.5.22+, PR not "
            "identified) the slot takes record and tree lock at the first turn's row allocation and the busy check counts "
            "every record holding a row as session-held, the borrowing turn not as uncached",
            variants=("owned_at_alloc", "shared"),
            off="copy-on-save / copy-on-restore (SessionSlot keeps its own copy of the row's numbers, v0.5.11-0.5.18)",
        ),
        Fix(
            "session_rewind_page_floor",
            0,
            "",
            "v0.5.19",
            "a session restore whose SWA cursor is past the prefix rewinds the prefix to a page boundary (PR not identified; "
            "try_match_prefix since v0.5.19: free_kv_row_segments splits SWA-dead from SWA-alive at the cursor)",
            off="the prefix is min(C, |key|) whatever the SWA cursor",
        ),
        Fix(
            "enqueue_clip_max_new",
            25126,
            "",
            "v0.5.12.post1",
            "Scheduler.init_req_max_new_tokens clips max_new_tokens at enqueue to max(0, min(max_new, max_req_len - |input| "
            "- 1, max_total_num_tokens - ceil_page(|input|) - page_size - 1)) (max_req_len = max_total_num_tokens - 1: the "
            "context length is not modelled; max_total_num_tokens = the full pool). The max(0, ...) ends finding 11: "
            "before it an over-long prompt (config over_long_prompt) is enqueued with a negative max_new_tokens that the "
            "adder books",
            off="max_new_tokens as the request sent it (with an over-long prompt, config over_long_prompt: min(max_new, "
                "max_req_len - |input| - 1), negative past max_req_len)",
        ),
        Fix(
            "load_back_reselect",
            39283,
            "",
            "v0.5.20",
            "add_one_req asks init_load_back only for an admission _select_prefill_admission selected on the promised "
            "prefix (an input gate that refuses, or a chunk truncated to nothing, is OTHER before any load); when the "
            "load-back loads nothing, it selects the admission again with no host hit: the total, SWA (on "
            "ceil_page(extend), no host term) and input gates and the chunk decision run on the device prefix",
            off="the host hit is loaded back once the token gates pass (before the input gate and the chunk shape); a "
                "failed load-back admits with the device prefix's extend under the gates passed with the host hit",
        ),
        Fix(
            "admission_gates_under_lock",
            39283,
            "",
            "v0.5.20",
            "add_one_req runs its SWA and input gates only under the temporary lock (_select_prefill_admission, #39283; "
            "the pre-lock total gate went in v0.5.21's PrefillBudget, #36729, which changes no verdict): a request that "
            "passes the token gates before the lock but not under it is NO_TOKEN even when the input gate would refuse it",
            off="the total, SWA and input gates run before the lock too: a request the input gate refuses there is OTHER",
        ),
        Fix(
            "pass_budget_break",
            0,
            "",
            "v0.5.23",
            "_get_new_batch_prefill_raw stops before a candidate when budget_state() is OTHER (the pass's input or chunk "
            "budget is spent, e.g. by the resumed chunk) (PR not identified)",
            off="the first waiting request is offered to add_one_req even when the chunked request spent the input budget",
        ),
        Fix(
            "admission_free_rows",
            0,
            "",
            "v0.5.12.post1",
            "get_num_allocatable_reqs bounds the pass by the free request rows, "
            "min(pp_max_micro_batch_size - running_bs, req_to_token_pool.available_size()); before it the free "
            "rows bounded it only under pipeline parallelism (0.5.11:managers/scheduler.py:2540-2544; PR not "
            "identified; found by kvmc conform's event_loop/sessions row: a session slot's row is not free, yet "
            "0.5.11 admits the session's next turn, which restores that row)",
            off="the pass admits up to max_running_requests - |running batch| (kvmc: req_pool_size - running requests)",
        ),
        Fix(
            "admission_rows_held",
            0,
            "",
            "v0.5.23",
            "get_num_allocatable_reqs(num_held_rows): the pass may admit up to free rows + rows that admitted requests already "
            "hold (the continuing chunk, a session borrower) (PR not identified; #37583 reports the starvation)",
            off="the pass stops when |can_run| >= free request rows, counting the chunked request that holds its own row",
        ),
        Fix(
            "swa_req_ring",
            0,
            "",
            "v0.5.20",
            "the SWA allocator may be a per-request ring (DeepSeek-V4 unified_kv, swa_req_ring_size; PR not identified, "
            "#31040 describes the design): a config with swa_ring applies",
            off="no per-request SWA ring: a config with swa_ring does not apply",
        ),
        Fix(
            "swa_extend_exact_pages",
            0,
            "",
            "v0.5.11",
            "SWATokenToKVPoolAllocator.alloc_extend (page_size > 1) checks the new pages it needs (get_num_new_pages) "
            "(PR not identified; first seen in v0.5.11's swa_memory_pool.py)",
            off="v0.5.10: refuses unless extend_num_tokens + batch_size * page_size fits each pool (over-reservation)",
        ),
        Fix(
            "uncached_skips_released_req",
            0,
            "",
            "v0.5.11",
            "the busy check's uncached sum skips a batch request whose req_pool_idx is None, as a finished streaming "
            "turn's is once its row went to the session slot (PR not identified; first seen in v0.5.11's "
            "_get_total_uncached_sizes)",
            off="v0.5.10.post1's _get_batch_uncached_size counts every batch request whose KV is not freed: a finished "
            "turn still in last_batch or running_batch (until update_running_batch filters it) counts as uncached and "
            "as session-held, also after its session closed",
        ),
        Fix(
            "finish_req_detach",
            0,
            "",
            "v0.5.11",
            "a retraction saves a streaming turn into its slot through try_cache_finished_req, which calls "
            "Session.finish_req; finish_req sets `req.session = None` on the Req its req_nodes held, which at the "
            "turn's second retraction is the running turn itself: the re-admitted turn matches, is cached and "
            "finishes through the radix tree with a row of its own, while the slot keeps the record of that "
            "retraction (PR not identified; first seen in v0.5.11's session_controller.py:257-264; open PR #40252 "
            "would stop a retraction from advancing the session)",
            off="v0.5.10.post1: no finish_req; a retracted turn stays in its session however often it is retracted",
        ),
        Fix(
            "allocatable_precheck_unchunked",
            0,
            "",
            "v0.5.11",
            "get_new_batch_prefill's row pre-check (get_num_allocatable_reqs(running_bs) <= 0: batch_is_full, no "
            "prefill) applies when no chunked request exists (PR not identified; first seen in v0.5.11's scheduler.py)",
            off="v0.5.10.post1 tests `chunked_req is not None` there: with no row left the chunked request's next chunk "
            "is skipped and batch_is_full set; without a chunked request the loop's row check sets it instead",
        ),
        Fix(
            "swa_clears_batch_is_full",
            0,
            "",
            "v0.5.12.post1",
            "hybrid SWA clears running_batch.batch_is_full at every prefill pass (`if self.enable_priority_preemption "
            "or self.is_hybrid_swa`) (PR not identified; first seen in v0.5.12.post1's scheduler.py)",
            off="v0.5.10.post1 / v0.5.11 clear it at every pass only for priority preemption: a hybrid-SWA pass after "
            "a NO_TOKEN verdict is skipped until a request leaves the running batch",
        ),
        Fix(
            "batch_is_full_needs_running",
            0,
            "",
            "v0.5.22",
            "a NO_TOKEN verdict sets running_batch.batch_is_full only if a request was admitted or the running batch "
            "is not empty, and an empty running batch clears it at every pass (\"An empty batch never reaches "
            "update_running_batch, the only other place that clears the flag, so admission would stay shut\"; PR not "
            "identified; first seen in v0.5.22's scheduler.py)",
            off="without HiCache a NO_TOKEN verdict sets it always, also with nothing running, and then nothing clears "
            "it: the scheduler admits no request again (docs/findings.md)",
        ),
        Fix(
            "filter_running_every_step",
            0,
            "",
            "v0.5.23",
            "get_next_batch_to_run filters finished requests out of the running batch at every iteration (clearing "
            "batch_is_full when it shrank), not only in update_running_batch (PR not identified; first seen in "
            "v0.5.23's scheduler.py: \"Every step, not only after a merge\")",
            off="a request a decode finished stays in the running batch (counting in running_bs, keeping "
            "batch_is_full set) until the next update_running_batch, which runs only when no prefill batch is built",
        ),
        Fix(
            "mixed_decode_mem_check",
            0,
            "",
            "v0.5.22",
            "with mixed chunked prefill (--enable-mixed-chunk) the running batch's decode joins the prefill batch "
            "only if running_batch.check_decode_mem() passes; otherwise it sits out this step (\"The prefill "
            "admitted above may leave no KV room for the decode rows\"; PR not identified; first seen in v0.5.22's "
            "scheduler.py::get_new_batch_prefill)",
            off="the mixed step runs prepare_for_decode for the running batch unchecked: an extend admitted into "
            "the room the decode needed makes alloc_for_decode fail ('Decode out of memory': the scheduler dies)",
        ),
    ]
}

# The six fixes the issue tracks; the other flags make the presets faithful.
KNOWN_BUG_FIXES = (
    "chunked_swa_page_reserve",
    "swa_hostload_budget",
    "session_active",
    "retract_tail_free",
    "swa_busy_check",
    "spec_topk_busy_check",
)


@dataclass(frozen=True)
class Design:
    """A set of fix variants, planted bugs (mutants) and transition overrides."""

    name: str
    fixes: Mapping[str, str | None]
    mutants: frozenset[str] = frozenset()
    overrides: Mapping[str, object] = field(default_factory=dict)

    def on(self, fix: str) -> bool:
        if fix not in FIXES:
            raise KeyError(f"unknown fix {fix!r}; expected one of {sorted(FIXES)}")
        return self.fixes.get(fix) is not None

    def variant(self, fix: str) -> str | None:
        if fix not in FIXES:
            raise KeyError(f"unknown fix {fix!r}; expected one of {sorted(FIXES)}")
        return self.fixes.get(fix)

    def mutant(self, name: str) -> bool:
        return name in self.mutants

    def with_fix(self, fix: str, variant: str | None) -> "Design":
        if fix not in FIXES:
            raise KeyError(f"unknown fix {fix!r}; expected one of {sorted(FIXES)}")
        if variant is not None and variant not in FIXES[fix].variants:
            raise KeyError(f"unknown variant {variant!r} of fix {fix!r}; expected one of {list(FIXES[fix].variants)}")
        fixes = dict(self.fixes)
        fixes[fix] = variant
        return Design(self.describe_change(fix, variant), fixes, self.mutants, self.overrides)

    def describe_change(self, fix: str, variant: str | None) -> str:
        if variant is None:
            return f"{self.name}-without-{fix}"
        if variant == FIXES[fix].variants[0]:
            return f"{self.name}-with-{fix}"
        return f"{self.name}-with-{fix}={variant}"

    def with_mutants(self, names: frozenset[str]) -> "Design":
        if not names:
            return self
        label = self.name + "".join(f"+{m}" for m in sorted(names))
        return Design(label, self.fixes, self.mutants | names, self.overrides)

    def flags(self) -> dict[str, str | None]:
        return {f: self.fixes.get(f) for f in FIXES}


def _preset(name: str, on: dict[str, str]) -> Design:
    return Design(name, {f: on.get(f) for f in FIXES})


_V0511 = {
    "swa_release_page_margin": "on",  # #22470
    "admission_page_reserve": "on",
    "swa_extend_exact_pages": "on",
    "uncached_skips_released_req": "on",
    "finish_req_detach": "on",
    "allocatable_precheck_unchunked": "on",
    "swa_busy_check": "on",
    "session_active": "active_idx",
    "chunked_swa_page_reserve": "on",
    "retract_tail_free": "on",
    "swa_budget_split": "on",
}
# enqueue_clip_max_new (#25126) ships in 0.5.12.post1 (Scheduler.init_req_max_new_tokens; found by
# `kvmc conform` once the harness enqueues as the scheduler does): on from v0.5.12.post1. `current`
# keeps it off (docs/releases.md §A.9: one of the 0.5.18 facts current lacks).
_V0512 = {**_V0511, "chunk_end_page_align": "on", "enqueue_clip_max_new": "on", "admission_free_rows": "on",
          "chunked_req_scheduled_last_iter": "on", "swa_clears_batch_is_full": "on"}
# swa_leaf_window_cap from v0.5.13: 0.5.13's UnifiedRadixCache (the HiCache + hybrid-SWA tree) caps a new leaf
_V0513 = {**_V0512, "spec_topk_busy_check": "on", "swa_hostload_budget": "on", "chunked_input_gate": "on",
          "swa_leaf_window_cap": "on"}

# The release presets v0.5.18 ... v0.5.23 (issue 27), from docs/releases.md section C: each flag on
# from the first release whose wheel ships it. The flags of a mechanism kvmc does not model in a
# config (spec v2's page alignment with page 1, ...) are on where the release ships them anyway.
_V0518 = {
    **_V0513,
    "swa_window_headroom": "on",  # #32379 (v0.5.17)
    "swa_gate_fresh_tail": "on",  # the SWA gate on ceil_page(e - H) (v0.5.16)
    "swa_chunk_cap": "never_fits",  # #31681 + #32700 (v0.5.18)
    "eagle_v1_removed": "on",  # #25464 (v0.5.13): spec v2 only
    "spec_v2_page_align": "on",  # v0.5.16
    "spec_retract_length_order": "on",  # v0.5.17
    "evict_shortfall": "on",  # #32016 (v0.5.17)
    "enqueue_clip_max_new": "on",  # #25126 (v0.5.12.post1)
    "swa_release_threshold": "max_w_ps",  # #29860 (v0.5.15.post1)
    "unified_radix_default": "on",  # #30468 (v0.5.16): the unified tree for every hybrid-SWA model
    "swa_tombstone_leaf_kept": "on",  # #29351 (v0.5.15.post1)
    "swa_tombstone_parent_kept": "on",  # UnifiedRadixCache (#30468, v0.5.16): kvmc conform on 0.5.18
    "unfinished_swa_release": "rematch",  # #29350 + #27402, default on since #34653 (v0.5.18)
}
_V0519 = {**_V0518, "session_record": "shared", "session_rewind_page_floor": "on"}  # #37108
_V0520 = {
    **_V0519,
    "swa_segment_lock": "on",  # #36848
    "busy_check_chunked_req": "on",  # #37502
    "load_back_reselect": "on",  # #39283
    "admission_gates_under_lock": "on",  # #39283
    "prompt_boundary_split": "on",
    "swa_req_ring": "on",
    "swa_branching_insert": "on",  # PR not identified (0.5.20:mem_cache/unified_cache/components/swa.py)
}
_V0521 = dict(_V0520)  # PrefillBudget (#36729) and the window gate's move: no change kvmc sees
_V0522 = {**_V0521, "session_record": "owned_at_alloc", "finish_checkpoint": "on", "prompt_boundary_split": "checkpoint",
          "batch_is_full_needs_running": "on", "mixed_decode_mem_check": "on"}
# unfinished_swa_release=path from v0.5.23 (as its Fix says): 0.5.22's checkpoint_into_tree still
# re-matches the key and locks the match (0.5.22:mem_cache/unified_radix_cache.py:1197-1227); kvmc
# conform's UnifiedRadixCache/swa row on 0.5.22 disagreed with `path` (a stash whose SWA match stops
# short leaves the inserted Full evictable there)
_V0523 = {**_V0522, "unfinished_swa_release": "path", "swa_release_threshold": "ceil_max_w_ps",
          "pass_budget_break": "on", "admission_rows_held": "on", "filter_running_every_step": "on"}

PRESETS: dict[str, Design] = {
    d.name: d
    for d in [
        _preset("v0.5.10.post1", {}),
        _preset("v0.5.11", _V0511),
        _preset("v0.5.12.post1", _V0512),
        _preset("v0.5.13", _V0513),
        _preset("v0.5.18", _V0518),
        _preset("v0.5.19", _V0519),
        _preset("v0.5.20", _V0520),
        _preset("v0.5.21", _V0521),
        _preset("v0.5.22", _V0522),
        _preset("v0.5.23", _V0523),
        # `current` is the newest release modelled (issue 27): a release, so it conforms to one
        _preset("current", _V0523),
    ]
}


def base_preset(design_name: str) -> str | None:
    """The preset a design's name starts from (a design derived from a preset names it first:
    `v0.5.13-without-X`, `current+mutant`); None for a name no preset begins."""
    return max((p for p in PRESETS if design_name == p or design_name.startswith((p + "-", p + "+"))),
               key=len, default=None)


def sglang_release(design_name: str) -> str | None:
    """The SGLang release a design models: its preset's; None for a name no preset begins."""
    base = base_preset(design_name)
    if base is None:
        return None
    return CURRENT_RELEASE if base == "current" else base.lstrip("v")


def preset(name: str) -> Design:
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown design {name!r}; expected one of {list(PRESETS)}") from None


def leaf_window_cap(cfg: object, design: Design) -> bool:
    """Whether a new in-window leaf is capped at one page-aligned window (`swa_leaf_window_cap`): a rule
    of UnifiedRadixCache, which a hybrid-SWA config runs on with HiCache, or once it is the default."""
    return bool(getattr(cfg, "hybrid_swa")) and design.on("swa_leaf_window_cap") and (
        bool(getattr(cfg, "hicache")) or design.on("unified_radix_default"))
