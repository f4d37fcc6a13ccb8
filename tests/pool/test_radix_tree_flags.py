"""The pool's radix tree on the insert paths the event loop reaches rarely: the partial revive of
a tombstone straddling E (all releases; a model fix, docs/releases.md A.13) and the Full-only
tombstone leaf (`swa_tombstone_leaf_kept`, #29351), with the numbers of the model's scenarios in
tests/unit/test_radix_flags.py (ps = 4, W = 5, both pools 64 tokens)."""

from __future__ import annotations

import torch

from pool.allocator import SWAAllocator
from pool.radix_tree import RadixTree

DEV = torch.device("cpu")


def _tree() -> tuple[SWAAllocator, RadixTree, torch.Tensor]:
    alloc = SWAAllocator(64, 64, 4, DEV)
    tree = RadixTree(alloc, 4, True, 5, None, DEV, next_atom=lambda owner, atom: None if atom is None or atom >= 3 else atom + 1)
    mine = alloc.alloc_extend([0], [8], [-1])  # the request's own [0, 8)
    assert mine is not None
    return alloc, tree, mine


def _tokens(lo: int, hi: int) -> tuple[int, ...]:
    return tuple(range(lo, hi))


def test_partial_revive_splits_the_tombstone_at_E() -> None:
    alloc, tree, mine = _tree()
    old = alloc.alloc_extend([0], [8], [-1])
    assert old is not None
    node = tree.add_node(tree.root, _tokens(0, 8), old, 0, 0)
    tree._tombstone(node)  # the tree's [0, 8) lost its SWA
    alloc.free_swa(mine[:4])  # the request released its SWA of [0, 4): E = 4
    last, owned, _ = tree.insert(0, _tokens, lambda lo, hi: mine[lo:hi], 0, 8, 4, False, lambda n: 1)
    nodes = sorted(tree.nodes(), key=lambda n: n.atom)
    assert [(n.atom, len(n), n.swa_tombstone) for n in nodes] == [(0, 4, True), (1, 4, False)]
    # the tail keeps the tree's full slots and takes the request's SWA (the pool revives as SGLang's
    # RecoverSWAWithLockedFull does; the unlocked branch swaps the full slots instead: the same counts)
    assert last is nodes[1] and owned == 8 and torch.equal(nodes[1].value, old[4:8])
    assert bool((alloc.full_to_swa_index_mapping[old[4:8]] > 0).all())
    assert bool((alloc.full_to_swa_index_mapping[old[0:4]] == 0).all())
    assert (alloc.full_available_size(), alloc.swa_available_size()) == (56, 60)
    assert tree.recount() == (tree.full_evictable_size_, tree.full_protected_size_, tree.swa_evictable_size_,
                              tree.swa_protected_size_) == (8, 0, 4, 0)


def test_tombstone_leaf_kept() -> None:
    for kept in (False, True):
        alloc, tree, mine = _tree()
        tree.tombstone_leaf_kept = kept
        alloc.free_swa(mine)  # E = 8: the whole new part is out of the window
        last, owned, _ = tree.insert(0, _tokens, lambda lo, hi: mine[lo:hi], 0, 8, 8, False, lambda n: 0)
        nodes = list(tree.nodes())
        assert owned == 8 and alloc.swa_available_size() == 64
        if kept:
            assert [(len(n), n.swa_tombstone) for n in nodes] == [(8, True)] and last is nodes[0]
            assert alloc.full_available_size() == 56
        else:
            assert nodes == [] and last is tree.root and alloc.full_available_size() == 64


def test_split_at_the_prompt_boundary() -> None:
    """`prompt_boundary_split`'s topology-only re-insert on the pool's tree: the node holding [0, 12)
    splits at 8 (head keeps its atom, the tail moves one atom down), no slot changes hands."""
    from pool.allocator import PlainAllocator

    alloc = PlainAllocator(64, 4, DEV, "full")
    tree = RadixTree(alloc, 4, False, 0, None, DEV, next_atom=lambda owner, atom: None if atom is None or atom >= 2 else atom + 1)
    idx = alloc.alloc(12)
    assert idx is not None
    tree.add_node(tree.root, _tokens(0, 12), idx, 0, 0)
    tree.split_at(0, _tokens, 8)
    nodes = sorted(tree.nodes(), key=lambda n: n.atom)
    assert [(n.atom, len(n)) for n in nodes] == [(0, 8), (1, 4)] and nodes[1].parent is nodes[0]
    assert torch.equal(torch.cat([nodes[0].value, nodes[1].value]), idx) and alloc.available_size() == 52
    tree.split_at(0, _tokens, 8)  # at a node boundary: nothing to split
    assert len(list(tree.nodes())) == 2


def test_unified_swa_pass_follows_the_swa_lru_order() -> None:
    """The pool's own eviction policy (no trace forcing it) under `tombstone_parent_kept`: UnifiedRadixCache's
    SWA pass (0.5.21 unified_cache/components/swa.py `_evict_device_next_node`) takes the SWA LRU list from
    its tail, deleting an evictable leaf and tombstoning anything else. A chain n0 (4) - n1 (4), an SWA-only
    need of 6: n0 the older is tombstoned and stays a Full-only leaf once n1 goes; n1 the older goes
    first and n0, then a leaf, goes whole."""
    from pool.choices import FunctionChooser

    for n0_older in (True, False):
        alloc = SWAAllocator(64, 64, 4, DEV)
        tree = RadixTree(alloc, 4, True, 5, None, DEV, next_atom=lambda owner, atom: None)
        tree.tombstone_parent_kept = True
        kv = alloc.alloc_extend([0], [8], [-1])
        assert kv is not None
        n0 = tree.add_node(tree.root, _tokens(0, 4), kv[:4], 0, 0)
        n1 = tree.add_node(n0, _tokens(4, 8), kv[4:], 0, 1)
        if not n0_older:
            n0.last_access_time = n1.last_access_time + 1
        free_swa = alloc.swa_available_size()
        tree.evict(0, 6, FunctionChooser(lambda q: False, lambda q, lo, hi: lo))
        left = [(n.atom, len(n), n.swa_tombstone) for n in tree.nodes()]
        if n0_older:
            assert left == [(0, 4, True)]
            assert alloc.full_available_size() == 60
        else:
            assert left == []
            assert alloc.full_available_size() == 64
        assert alloc.swa_available_size() == free_swa + 8


def test_swa_only_lru_eviction_tombstones_then_deletes_the_parent() -> None:
    """SGLang's SWA pass for an SWA-only need (0.5.13 SWARadixCache `evict`; UnifiedRadixCache's
    `_evict_device_next_node`) walks the SWA LRU list over internal nodes too: the older parent
    [0, 4) is tombstoned first, then its leaf [4, 12) goes. SWARadixCache deletes the childless
    tombstone with it (every Full slot free); UnifiedRadixCache keeps it as a Full-only leaf. The
    pool had evicted the leaf alone (SWA held by leaves first), which SGLang never does here."""
    for kept in (False, True):
        alloc = SWAAllocator(64, 64, 4, DEV)
        tree = RadixTree(alloc, 4, True, 5, None, DEV, next_atom=lambda owner, atom: None)
        tree.tombstone_parent_kept = kept
        parent = tree.add_node(tree.root, _tokens(0, 4), alloc.alloc_extend([0], [4], [-1]), 0, 0)
        tree.add_node(parent, _tokens(4, 12), alloc.alloc_extend([4], [12], [-1]), 0, 1)
        tree._evict_lru(0, 8)  # an SWA-only need of 8: the parent's 4 are not enough
        assert alloc.swa_available_size() == 64
        if kept:
            assert [(len(n), n.swa_tombstone) for n in tree.nodes()] == [(4, True)]
            assert alloc.full_available_size() == 60
        else:
            assert list(tree.nodes()) == [] and alloc.full_available_size() == 64
