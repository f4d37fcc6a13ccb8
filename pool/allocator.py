"""Token allocators and the request-to-token table, on torch tensors.

Implements (in our own code) the mechanisms of SGLang 0.5.10.post1 .. 0.5.23 (where releases
differ, the design's flags choose, as in model/), python/sglang/srt/mem_cache/ as 0.5.23 has it:
* `allocator/token.py::TokenToKVPoolAllocator` and `allocator/paged.py::PagedTokenToKVPoolAllocator`
  (one class here, `PagedAllocator`: page_size 1 is the token allocator): a free list of page
  indices (page 0 reserved for padded writes), `alloc`, `alloc_extend` (fill the partial last page
  from `last_loc`, then whole pages; None when short), `alloc_decode`, `free` (frees every page a
  token index touches), `backup_state` / `restore_state` (EAGLE draft);
* `allocator/swa.py::SWATokenToKVPoolAllocator` (`SWAAllocator`): a full and an SWA sub-allocator
  of the same page size and a `full_to_swa_index_mapping` tensor; `free` frees the full pages and,
  through the mapping, the SWA slots not already released; `free_swa` releases only SWA slots;
* `memory_pool.py::ReqToTokenPool`: an int32 `req_to_token` table and its free rows;
* `memory_pool_host.py` (`HostPool`): the HiCache host tier, a tensor of host slots.

Abstracted: `need_sort` / release pages and `free_group_begin/end` (they only reorder frees).
Every tensor lives on the device the pool was built for; nothing here has a CPU-only path.
"""

from __future__ import annotations

from typing import Sequence

import torch

I64 = torch.int64


class PoolError(RuntimeError):
    """The pool was driven into a state SGLang would assert on (a double free, a bad index)."""


class PagedAllocator:
    """`TokenToKVPoolAllocator` (page_size 1) / `PagedTokenToKVPoolAllocator` (page_size > 1).

    Token index t lives in page t // page_size; a request's row position i always sits at page
    offset i % page_size (alloc_extend continues the partial page from last_loc), so a page is
    owned as a whole."""

    def __init__(self, size: int, page_size: int, device: torch.device, name: str = "full") -> None:
        if size % page_size:
            raise PoolError(f"{name} pool size={size} is not a multiple of page_size={page_size}")
        self.size, self.page_size, self.device, self.name = size, page_size, device, name
        self.num_pages = size // page_size
        self.free_pages = torch.arange(1, self.num_pages + 1, dtype=I64, device=device)
        self._page_offsets = torch.arange(page_size, dtype=I64, device=device)  # token offsets within a page

    # -- sizes --------------------------------------------------------------------------------
    def available_size(self) -> int:
        return int(self.free_pages.numel()) * self.page_size

    # -- alloc --------------------------------------------------------------------------------
    def _take(self, pages: int) -> torch.Tensor | None:
        if pages > self.free_pages.numel():
            return None
        out, self.free_pages = self.free_pages[:pages], self.free_pages[pages:]
        return out

    def _tokens_of(self, pages: torch.Tensor) -> torch.Tensor:
        ps = self.page_size
        if ps == 1:  # token index == page index; a copy, so the result never aliases the free list
            return pages.clone()
        return (pages[:, None] * ps + self._page_offsets[None, :]).reshape(-1)

    def alloc(self, n: int) -> torch.Tensor | None:
        """n tokens (a page multiple) as whole pages; None when short."""
        if n % self.page_size:
            raise PoolError(f"alloc({n}) on {self.name}: not a multiple of page_size={self.page_size}")
        pages = self._take(n // self.page_size)
        return None if pages is None else self._tokens_of(pages)

    def alloc_extend(self, prefix_lens: Sequence[int], seq_lens: Sequence[int], last_locs: Sequence[int]) -> torch.Tensor | None:
        """Indices for positions [prefix, seq) of every request, concatenated. The partial last
        prefix page continues from last_loc; the rest takes whole pages. None (nothing taken) iff
        the new pages needed exceed the free pages."""
        ps = self.page_size
        need = sum(-(-s // ps) - -(-p // ps) for p, s in zip(prefix_lens, seq_lens))
        pages = self._take(need)
        if pages is None:
            return None
        out, used = [], 0
        for p, s, last in zip(prefix_lens, seq_lens, last_locs):
            if s <= p:
                continue
            head = min(s, -(-p // ps) * ps) - p  # positions that fit in the partial last page
            if head > 0:
                if last < 0:
                    raise PoolError(f"alloc_extend: prefix {p} is not page aligned but last_loc={last}")
                out.append(torch.arange(last + 1, last + 1 + head, dtype=I64, device=self.device))
            n_new = -(-s // ps) - -(-p // ps)
            if n_new:
                toks = self._tokens_of(pages[used : used + n_new])
                used += n_new
                out.append(toks[: s - p - head])
        if not out:
            return torch.empty(0, dtype=I64, device=self.device)
        return torch.cat(out)

    def alloc_decode(self, seq_lens: Sequence[int], last_locs: Sequence[int]) -> torch.Tensor | None:
        """One token per request at position seq_len - 1: a new page iff it starts one."""
        ps = self.page_size
        starts = [(s - 1) % ps == 0 for s in seq_lens]
        pages = self._take(sum(starts))
        if pages is None:
            return None
        out, used = [], 0
        for st, last in zip(starts, last_locs):
            if st:
                out.append(int(pages[used]) * ps)
                used += 1
            else:
                out.append(last + 1)
        return torch.tensor(out, dtype=I64, device=self.device)

    # -- free ---------------------------------------------------------------------------------
    def pages_of(self, idx: torch.Tensor) -> torch.Tensor:
        if idx.numel() == 0:
            return idx
        return torch.unique(idx.to(I64) // self.page_size)

    def free(self, idx: torch.Tensor) -> None:
        """Free every page any of `idx` touches (freeing one token of a page frees the page). The
        padding page 0 goes on the free list like any other, as SGLang's `free` puts it there (a row
        entry that was never allocated reads 0: v0.5.11's phantom stash, #24252); the ownership check
        reports it (`reserved_used`)."""
        pages = self.pages_of(idx)
        if pages.numel() == 0:
            return
        if bool((pages < 0).any()) or bool((pages > self.num_pages).any()):
            raise PoolError(f"{self.name}.free: page out of range in {pages.tolist()}")
        self.free_pages = torch.cat([self.free_pages, pages])

    def backup_state(self) -> torch.Tensor:
        return self.free_pages.clone()

    def restore_state(self, state: torch.Tensor) -> None:
        self.free_pages = state

    def slot_capacity(self) -> int:
        """Length of an index space covering every token index (page 0 included)."""
        return (self.num_pages + 1) * self.page_size


class SWAAllocator:
    """`SWATokenToKVPoolAllocator`: full and SWA sub-allocators plus `full_to_swa_index_mapping`
    (0 = no SWA slot). Returned indices are full-pool indices."""

    def __init__(self, full_size: int, swa_size: int, page_size: int, device: torch.device) -> None:
        self.page_size, self.device = page_size, device
        self.full = PagedAllocator(full_size, page_size, device, "full")
        self.swa = PagedAllocator(swa_size, page_size, device, "swa")
        self.full_to_swa_index_mapping = torch.zeros(self.full.slot_capacity() + 1, dtype=I64, device=device)
        self.full_to_swa_index_mapping[-1] = -1  # last_loc = -1 maps to -1

    def full_available_size(self) -> int:
        return self.full.available_size()

    def swa_available_size(self) -> int:
        return self.swa.available_size()

    def available_size(self) -> int:
        return min(self.full.available_size(), self.swa.available_size())

    def _map(self, full_idx: torch.Tensor, swa_idx: torch.Tensor) -> None:
        self.full_to_swa_index_mapping[full_idx] = swa_idx

    def alloc(self, n: int) -> torch.Tensor | None:
        if n > self.full.available_size() or n > self.swa.available_size():
            return None
        f = self.full.alloc(n)
        s = self.swa.alloc(n)
        assert f is not None and s is not None
        self._map(f, s)
        return f

    def alloc_full_only(self, n: int) -> torch.Tensor | None:
        """HiCache load-back: full device indices, SWA assigned separately (`assign_swa`)."""
        return self.full.alloc(n)

    def assign_swa(self, full_idx: torch.Tensor) -> bool:
        s = self.swa.alloc(int(full_idx.numel()))
        if s is None:
            return False
        self._map(full_idx, s)
        return True

    def alloc_extend(self, prefix_lens: Sequence[int], seq_lens: Sequence[int], last_locs: Sequence[int]) -> torch.Tensor | None:
        ps = self.page_size
        need = sum(-(-s // ps) - -(-p // ps) for p, s in zip(prefix_lens, seq_lens)) * ps
        if need > self.full.available_size() or need > self.swa.available_size():
            return None
        swa_last = [int(self.full_to_swa_index_mapping[last]) if last >= 0 else -1 for last in last_locs]
        f = self.full.alloc_extend(prefix_lens, seq_lens, last_locs)
        s = self.swa.alloc_extend(prefix_lens, seq_lens, swa_last)
        assert f is not None and s is not None
        self._map(f, s)
        return f

    def alloc_decode(self, seq_lens: Sequence[int], last_locs: Sequence[int]) -> torch.Tensor | None:
        swa_last = [int(self.full_to_swa_index_mapping[last]) if last >= 0 else -1 for last in last_locs]
        f = self.full.alloc_decode(seq_lens, last_locs)
        if f is None:
            return None
        s = self.swa.alloc_decode(seq_lens, swa_last)
        if s is None:  # SGLang: the full pages are already taken; the caller raises anyway
            return None
        self._map(f, s)
        return f

    def _page_tokens(self, idx: torch.Tensor) -> torch.Tensor:
        pages = self.full.pages_of(idx)
        return self.full._tokens_of(pages)

    def free_swa(self, idx: torch.Tensor) -> None:
        """Release the SWA slots of full indices `idx` (whole pages); their full KV stays."""
        if idx.numel() == 0:
            return
        toks = self._page_tokens(idx) if self.page_size > 1 else idx.to(I64)
        swa_idx = self.full_to_swa_index_mapping[toks]
        live = swa_idx[swa_idx > 0]
        if live.numel():
            self.swa.free(live)
        self.full_to_swa_index_mapping[toks] = 0

    def free(self, idx: torch.Tensor) -> None:
        if idx.numel() == 0:
            return
        self.free_swa(idx)
        self.full.free(idx)

    def backup_state(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return (self.full.backup_state(), self.swa.backup_state(), self.full_to_swa_index_mapping.clone())

    def restore_state(self, st: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> None:
        self.full.restore_state(st[0])
        self.swa.restore_state(st[1])
        self.full_to_swa_index_mapping = st[2]


class RingSWAAllocator(SWAAllocator):
    """`SWATokenToKVPoolAllocator` with a per-request SWA ring (v0.5.20+, `swa_req_ring_size`): the
    ring is owned by the request row, so the allocator pages full-attention KV only, never maps an
    SWA slot (`full_to_swa_index_mapping` stays 0), `free_swa` is a no-op, and
    `swa_available_size()` is the free rows times the ring cost (mem_cache/allocator/swa.py)."""

    def __init__(self, full_size: int, page_size: int, device: torch.device, req_pool: "ReqToTokenPool",
                 ring_cost: int) -> None:
        super().__init__(full_size, 0, page_size, device)
        self.req_pool, self.ring_cost = req_pool, ring_cost

    def swa_available_size(self) -> int:
        return self.req_pool.available_size() * self.ring_cost

    def available_size(self) -> int:
        return self.full.available_size()

    def alloc(self, n: int) -> torch.Tensor | None:
        return self.full.alloc(n)

    def assign_swa(self, full_idx: torch.Tensor) -> bool:
        return True

    def alloc_extend(self, prefix_lens: Sequence[int], seq_lens: Sequence[int], last_locs: Sequence[int]) -> torch.Tensor | None:
        return self.full.alloc_extend(prefix_lens, seq_lens, last_locs)

    def alloc_decode(self, seq_lens: Sequence[int], last_locs: Sequence[int]) -> torch.Tensor | None:
        return self.full.alloc_decode(seq_lens, last_locs)

    def free_swa(self, idx: torch.Tensor) -> None:
        return None

    def free(self, idx: torch.Tensor) -> None:
        if idx.numel():
            self.full.free(idx)


class PlainAllocator(PagedAllocator):
    """A non-hybrid model's allocator, with the SWA allocator's method names so the rest of the
    pool is written once."""

    def full_available_size(self) -> int:
        return self.available_size()

    def swa_available_size(self) -> int:
        return 0

    def alloc_full_only(self, n: int) -> torch.Tensor | None:
        return self.alloc(n)

    def assign_swa(self, full_idx: torch.Tensor) -> bool:
        return True

    def free_swa(self, idx: torch.Tensor) -> None:
        return None


class ReqToTokenPool:
    """`ReqToTokenPool`: `req_to_token[size, max_context_len]` (int32) and the free rows."""

    def __init__(self, size: int, max_context_len: int, device: torch.device) -> None:
        self.size = size
        self.req_to_token = torch.zeros(size, max_context_len, dtype=torch.int32, device=device)
        self.free_slots = list(range(size))

    def available_size(self) -> int:
        return len(self.free_slots)

    def alloc(self) -> int | None:
        return self.free_slots.pop(0) if self.free_slots else None

    def free(self, row: int) -> None:
        if row in self.free_slots:
            raise PoolError(f"ReqToTokenPool.free: row {row} freed twice")
        self.free_slots.append(row)

    def row(self, r: int, lo: int, hi: int) -> torch.Tensor:
        return self.req_to_token[r, lo:hi].to(I64)

    def write(self, r: int, lo: int, idx: torch.Tensor) -> None:
        if idx.numel():
            self.req_to_token[r, lo : lo + idx.numel()] = idx.to(torch.int32)


class HostPool:
    """The HiCache host tier (`MHATokenToKVPoolHost`): host slots, copied to on `write_backup`.
    Sized generously: the model treats the host pool as unbounded."""

    def __init__(self, size: int, device: torch.device) -> None:
        self.free_slots = torch.arange(1, size + 1, dtype=I64, device=device)

    def alloc(self, n: int) -> torch.Tensor:
        if n > self.free_slots.numel():
            raise PoolError(f"host pool exhausted ({n} > {self.free_slots.numel()}); enlarge HostPool")
        out, self.free_slots = self.free_slots[:n], self.free_slots[n:]
        return out
