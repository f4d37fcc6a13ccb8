"""An insert that ends inside a node of the request's own chain splits it (SGLang's `_split_node`),
in the model and in the torch pool alike.

The case comes from a retracted request: its chain [0, 7) is left in the tree as two nodes, the
re-admission matches none of it (an SWA tombstone limits the match), and its first chunk ends at 2,
inside the first node. Before kvmc split nodes, that stash stopped at the node and left the
request with P = 0 < C = 2, which SGLang (which splits) never does."""

from __future__ import annotations

import torch

from model.config import concrete_params
from model.designs import preset
from model.ops import Concrete, Infeasible
from model.radix_cache import counters, insert, split_node
from model.state import ROOT
from model.system import System
from pool.radix_tree import WARM
from pool.scheduler import Scheduler
from specs.configs import CONFIGS

CFG = CONFIGS["hybrid_swa"]
PARAMS = concrete_params(CFG, full_tokens=32, swa_tokens=32, sliding_window_size=4, input_len=12)


def _model_with_chain(lens: tuple[int, ...]):  # noqa: ANN202
    system = System(CFG, preset("current"))
    x = system.ctx(Concrete(), PARAMS, check_frames=True)
    s = system.init(x)
    chain = CFG.private_chain(0)
    for a, L in zip(chain, lens):
        s = s.node(a, node_len=L, node_device=True)
    used = sum(lens)
    s = s.set(full_available=s.full_available - used - 2, swa_available=s.swa_available - used - 2)  # + the request's 2
    return x, s, chain


def test_model_insert_splits_the_node_the_chunk_ends_in() -> None:
    x, s, chain = _model_with_chain((4, 3))
    full0, swa0 = s.full_available, s.swa_available
    after, last, owned = insert(x, s, 0, 0, 2, None, "stash[0]")
    assert [after.node_len[a] for a in chain] == [2, 2, 3]  # head, tail, the old child one atom down
    assert (last, owned) == (chain[0], 2)  # the request now holds all of [0, 2) through the tree
    assert (after.full_available, after.swa_available) == (full0 + 2, swa0 + 2)  # its copies were duplicates
    assert counters(x, after).full_evictable == 7  # nothing lost: the same 7 tokens, now in 3 nodes


def test_model_split_moves_locks_down_and_keeps_swa_uuid_on_the_head() -> None:
    x, s, chain = _model_with_chain((4, 3))
    # a lock on the split node stays with its tail; swa_uuid on the split node moves to the head
    s1 = split_node(x, s.req(0, last_node=chain[0], swa_lock_top=chain[0]), 0, 2)
    assert (s1.last_node[0], s1.swa_lock_top[0]) == (chain[1], chain[0])
    s2 = split_node(x, s.req(0, last_node=chain[1], swa_lock_top=chain[1]), 0, 2)
    assert (s2.last_node[0], s2.swa_lock_top[0]) == (chain[2], chain[2])
    # nothing to split: [0, 4) ends at a boundary; ROOT stays ROOT
    s3 = split_node(x, s, 0, 4)
    assert s3 == s and s3.last_node[0] == ROOT


def test_model_split_needs_a_free_atom() -> None:
    x, s, _ = _model_with_chain((4, 3, 2))
    try:
        split_node(x, s, 0, 2)
    except Infeasible as e:
        assert "no free atom" in str(e)
    else:
        raise AssertionError("a split with a full chain must be infeasible (the bounded chain has no room)")


def test_pool_insert_splits_the_same_way() -> None:
    sch = Scheduler(CFG, preset("current"), PARAMS)
    tree = sch.tree
    chain = CFG.private_chain(0)

    def tokens(lo: int, hi: int) -> tuple[int, ...]:
        return tuple(100 + i for i in range(lo, hi))

    n0 = tree.add_node(tree.root, tokens(0, 4), sch.alloc.alloc(4), 0, chain[0])
    n1 = tree.add_node(n0, tokens(4, 7), sch.alloc.alloc(3), 0, chain[1])
    h = tree.inc_lock_ref(n0)  # a lock on the node being split
    mine = sch.alloc.alloc(2)
    full0 = sch.alloc.full_available_size()
    last, owned, _ = tree.insert(0, tokens, lambda lo, hi: mine[lo:hi], 0, 2, None, False, sch.atom_for(0))
    assert owned == 2 and last is not n0 and len(last) == 2 and last.atom == chain[0]
    assert [len(n0), n0.atom, n0.parent is last] == [2, chain[1], True]
    assert [len(n1), n1.atom] == [3, chain[2]]
    assert sch.alloc.full_available_size() == full0 + 2
    assert last.full_lock_ref == 1 and last.swa_lock_ref == n0.swa_lock_ref
    assert tree.recount() == (tree.full_evictable_size_, tree.full_protected_size_,
                              tree.swa_evictable_size_, tree.swa_protected_size_)
    tree.dec_lock_ref(h)  # the split head is released with the tail
    assert [last.full_lock_ref, last.swa_lock_ref, n0.full_lock_ref, n0.swa_lock_ref] == [0, 0, 0, 0]
    assert tree.recount() == (tree.full_evictable_size_, tree.full_protected_size_,
                              tree.swa_evictable_size_, tree.swa_protected_size_)
    assert tree.full_evictable_size_ == 7 and not tree.handles
    assert last.owner == 0 != WARM and isinstance(last.value, torch.Tensor)


# -- a warm-prefix node ---------------------------------------------------------------------------
# hybrid_swa_hicache: a chunk of a request whose match stopped before a warm node (an SWA tombstone,
# a load-back that did not fit) can end inside it; SGLang splits it. The tail takes the next atom
# of the warm chain (the config's spare), and every lock on the warm chain moves with its node:
# other requests lock warm nodes too.
HIC = CONFIGS["hybrid_swa_hicache"]
HIC_PARAMS = concrete_params(HIC, full_tokens=32, swa_tokens=32, sliding_window_size=2, input_len=12,
                             warm_len=(4, 2), warm_device=(1, 1), warm_host=(0, 0))


def _hic_model():  # noqa: ANN202
    system = System(HIC, preset("current"))
    x = system.ctx(Concrete(), HIC_PARAMS, check_frames=True)
    s = system.init(x)
    return x, s.set(full_available=s.full_available - 2, swa_available=s.swa_available - 2)  # the request's 2


def test_model_insert_splits_a_warm_node_and_moves_every_lock_on_the_warm_chain() -> None:
    x, s = _hic_model()
    w = HIC.warm_chain()
    assert len(w) == 3 and [s.node_len[a] for a in w] == [4, 2, 0]  # two warm nodes and the spare
    # request 1 holds the whole warm prefix; request 0's uuid sits on the node being split
    s = s.req(1, last_node=w[1], swa_lock_top=w[0]).req(0, last_node=w[0], swa_lock_top=w[0])
    full0 = s.full_available
    after, last, owned = insert(x, s, 0, 0, 2, None, "stash[0]")
    assert [after.node_len[a] for a in w] == [2, 2, 2]  # head, tail, the old second node one atom down
    assert (last, owned) == (w[0], 2) and after.full_available == full0 + 2  # duplicates freed
    assert (after.last_node[1], after.swa_lock_top[1]) == (w[2], w[0])  # request 1's lock moved down, its uuid is the head
    assert (after.last_node[0], after.swa_lock_top[0]) == (w[1], w[0])  # the tail keeps the lock, the head the uuid
    assert counters(x, after).full_protected == 6  # request 1 still protects all six warm tokens


def test_model_a_second_warm_split_needs_another_spare() -> None:
    x, s = _hic_model()
    s1, _, _ = insert(x, s, 0, 0, 2, None, "stash[0]")
    try:
        insert(x, s1, 1, 0, 3, None, "stash[1]")  # ends inside [2, 4), the chain is full
    except Infeasible as e:
        assert "warm_spare_atoms=1" in str(e), e
    else:
        raise AssertionError("a warm split with no free warm atom must be infeasible")


def test_pool_splits_a_warm_node_the_same_way() -> None:
    sch = Scheduler(HIC, preset("current"), HIC_PARAMS)
    tree = sch.tree
    w = HIC.warm_chain()
    n0 = next(c for c in tree.root.children if c.owner == WARM)
    n1 = n0.children[0]
    other = tree.inc_lock_ref(n1)  # request 1's lock on the whole warm prefix
    mine = sch.alloc.alloc(2)
    full0 = sch.alloc.full_available_size()
    last, owned, _ = tree.insert(0, sch.tokens_of(0), lambda lo, hi: mine[lo:hi], 0, 2, None, False, sch.atom_for(0))
    assert owned == 2 and last.owner == WARM and (len(last), last.atom) == (2, w[0])
    assert [len(n0), n0.atom, n0.parent is last] == [2, w[1], True]
    assert [len(n1), n1.atom] == [2, w[2]]
    assert sch.alloc.full_available_size() == full0 + 2
    assert tree.full_protected_size_ == 6 and last.full_lock_ref == 1
    tree.dec_lock_ref(other)
    assert tree.recount() == (tree.full_evictable_size_, tree.full_protected_size_,
                              tree.swa_evictable_size_, tree.swa_protected_size_)
    assert tree.full_evictable_size_ == 6 and tree.full_protected_size_ == 0
