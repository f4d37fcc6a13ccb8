"""A store of settled step-case queries, so a long proof can be stopped and resumed.

A k-induction step query that z3 cannot answer whole is split into cases (checker/engines/induction.py);
on `hybrid_swa_hicache` one property's step is thousands of case queries and hours of solver
time, more than one sitting. With `kvmc check --proof-cache DIR`, every case query z3 answers
`unsat` is recorded under a SHA-256 of the query itself: the z3 version, the whole encoded formula (model,
properties, lemmas, parameters: a structural digest of its terms, `Digest`), the case's
constraints, the candidate whose failure is asked and the active candidates. A later run that asks the same query takes the
recorded answer instead of asking z3 again; any change to the model, a lemma, a property, the
config's shape or z3 gives other terms, so another key, and the query is asked afresh.

Only `unsat` is stored as an answer: it is a fact about that exact formula (no state breaks the
candidate in that case), so reusing it claims nothing that was not checked. `sat` needs its model
(the CTI) and `unknown` is not an answer; both are asked again. A case z3 gave up on before its
last split is recorded too, as a hint with the time it had (`DIR/ab/cdef....unknown`): a resumed
run splits that case at once instead of spending the same time on it again (on
`hybrid_swa_hicache` every resume re-asked hundreds of such cases, 15 s each). A hint only
changes the order of work: splitting is always sound, the cases below are asked or taken from
the store as usual. A pass invariant's link (`KInduction._prove_pass_invariants`) is stored the
same way; there a hint means the link is not asked again with no more time than it had, and the
pass invariant stays unproved (not asserted: fewer facts, never a claim). Like Dafny's or Boogie's verification cache:
sound as long as the digest identifies the query, which it does by construction (a SHA-256 per
term over its declaration, sort and arguments).

One empty file per key (`DIR/ab/cdef...`), written by whichever process answered it, so the forked
case workers need no lock.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import z3

from checker.engines.dag import fold


class ProofCache:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.hits = 0  # queries answered from the store in this process
        self.stored = 0  # unsat answers this process recorded
        self.hinted = 0  # cases split unasked because a run before gave up on them

    @staticmethod
    def open(root: str | Path) -> "ProofCache":
        """The store at `root`, created if needed; ValueError (one line) if it cannot be."""
        p = Path(root)
        try:
            p.mkdir(parents=True, exist_ok=True)
            probe = p / ".kvmc-proof-cache"
            probe.touch()
        except OSError as e:
            raise ValueError(f"--proof-cache {str(root)!r}: cannot create or write the directory ({e.strerror}); "
                             f"expected a writable directory") from None
        return ProofCache(p)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / key[2:]

    def settled(self, key: str) -> bool:
        if self._path(key).exists():
            self.hits += 1
            return True
        return False

    def record(self, key: str) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        self.stored += 1

    def _hint(self, key: str) -> Path:
        p = self._path(key)
        return p.with_name(p.name + ".unknown")

    def gave_up(self, key: str, ms: int) -> None:
        """Record that z3 gave up on this query after `ms` milliseconds (a scheduling hint, not an answer)."""
        path = self._hint(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}")
        tmp.write_text(str(ms))
        tmp.replace(path)  # atomic: a reader sees the old hint or the new one, never half of it

    def given_up(self, key: str, ms: int) -> bool:
        """A run before gave up on this query with at least `ms` milliseconds."""
        try:
            had = int(self._hint(key).read_text())
        except (OSError, ValueError):
            return False
        if had >= ms:
            self.hinted += 1
            return True
        return False


class Digest:
    """SHA-256 of z3 terms by their structure: an application's digest covers its declaration's
    name and sort and its arguments' digests, a numeral its value, a constant its name and sort.
    Equal digests mean equal terms. Walks the term DAG once per node (a memo shared by every term
    it is asked about); z3's own SMT-LIB text of the same formula is far larger, as it does not
    share subterms (5 MB and 5 s for the `small` step query with no lemma; here 3,000 nodes in 0.5 s, and 14,000 in about 2 s for `hybrid_swa_hicache` with every lemma)."""

    def __init__(self) -> None:
        # z3 term id -> (the term, its digest); the term is kept so that its id is not reused by
        # another term while the memo lives
        self.memo: dict[int, tuple[Any, bytes]] = {}

    def of(self, e: Any) -> bytes:
        return fold(e, self.memo, _digest)

    def formula(self, solver: Any) -> str:
        """The digest of a solver's assertions, in order, with the z3 version."""
        h = hashlib.sha256(z3.get_full_version().encode())
        for a in solver.assertions():
            h.update(self.of(a))
        return h.hexdigest()

    def key(self, base: str, *parts: Any) -> str:
        """The key of one query on a formula whose digest is `base`: its extra terms and names, in order."""
        h = hashlib.sha256(base.encode())
        for p in parts:
            h.update(b"\0")
            h.update(self.of(p) if isinstance(p, z3.ExprRef) else str(p).encode())
        return h.hexdigest()


def _digest(x: Any, kids: list[bytes]) -> bytes:
    h = hashlib.sha256()
    if z3.is_int_value(x) or z3.is_rational_value(x):
        h.update(b"#" + x.as_string().encode())
    else:
        h.update(f"{x.decl().name()}:{x.sort()}/{len(kids)}".encode())
    for c in kids:
        h.update(c)
    return h.digest()


ACTIVE: ProofCache | None = None  # set by `kvmc check --proof-cache DIR`; forked case workers inherit it


def use(root: str | Path | None) -> ProofCache | None:
    """Make the store at `root` the one proofs in this process (and its forks) consult; None: none."""
    global ACTIVE
    ACTIVE = ProofCache.open(root) if root is not None else None
    return ACTIVE
