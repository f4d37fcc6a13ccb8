"""Reverting one fix inside a release, with SGLang's own `debug_utils.source_patcher` (the mechanism
behind `SGLANG_DEBUG_REVERT_PR`, present in every release kvmc replays on): the patched function's
source is edited and recompiled in place, nothing else changes.

A design "current minus fix X" is not a release; a replay runs either on the last release before
the fix, or on a release that has it with that one fix reverted. Each revert below states what the
fix changed (kvmc's own description, see model/designs.py) and the edits that undo it, written
against the function as it stands in the releases listed; applying it to another release, or to
a function whose text moved, fails with the patcher's own "match text not found" (one line, the
replay reports it and stops).

`match` lines are compared stripped, so the YAML's indentation need not follow the source's.
"""

from __future__ import annotations

from dataclasses import dataclass


class RevertError(Exception):
    """A revert that does not apply to the imported release."""


@dataclass(frozen=True)
class Revert:
    fix: str
    pr: int
    releases: tuple[str, ...]  # releases whose function text the edits match (checked by tests)
    what: str
    yaml: str


_ALL: list[Revert] = [
        Revert(
            "chunked_swa_page_reserve", 23174, ("0.5.11", "0.5.12.post1", "0.5.13"),
            "add_chunked_req: the chunk budget takes rem_swa_tokens without reserving a page, and a budget <= 0 "
            "falls back to rem_chunk_tokens instead of deferring the chunk",
            """
patches:
  - target: sglang.srt.managers.schedule_policy.PrefillAdder.add_chunked_req
    edits:
      - match: |
          _rem_tokens = min(
              _rem_tokens, int(self.rem_swa_tokens) - self.page_size
          )
        replacement: |
          _rem_tokens = min(_rem_tokens, int(self.rem_swa_tokens))
      - match: |
          if self.is_hybrid_swa:
              return req
        replacement: ""
""",
        ),
        Revert(
            "retract_tail_free", 22862, ("0.5.11", "0.5.12.post1", "0.5.13"),
            "StreamingSession match: prefix_len = min(C, |key| - 1) and the orphaned tail [prefix_len, A) is not freed "
            "(the assertion that prefix_len never drops below the slot's tree prefix, which holds only with the fixed "
            "formula, goes with it: 0.5.10.post1's SessionAwareCache had neither)",
            """
patches:
  - target: sglang.srt.session.streaming_session.StreamingSession.try_match_prefix
    edits:
      - match: |
          prefix_len = min(req.kv_committed_len, len(params.key.token_ids))
        replacement: |
          prefix_len = min(req.kv_committed_len, max(len(params.key.token_ids) - 1, 0))
      - match: |
          assert prefix_len >= slot.cache_protected_len, (
              f"streaming session prefix shrank: {prefix_len=} < "
              f"{slot.cache_protected_len=}"
          )
        replacement: ""
      - match: |
          self._free_tail(slot, req, prefix_len)
        replacement: ""
""",
        ),
        Revert(
            "session_active", 22753, ("0.5.11", "0.5.12.post1"),
            "busy check: every session slot holding KV is counted as session-held, also while its turn runs",
            """
patches:
  - target: sglang.srt.managers.scheduler_runtime_checker_mixin.SchedulerRuntimeCheckerMixin._active_pool_idxs
    edits:
      - match: |
          idxs = set()
        prepend: |
          return set()
""",
        ),
        Revert(
            "session_active", 22753, ("0.5.13",),
            "busy check: every session slot holding KV is counted as session-held, also while its turn runs "
            "(0.5.13 moved the check into scheduler_components/pool_stats_observer.py)",
            """
patches:
  - target: sglang.srt.managers.scheduler_components.pool_stats_observer.SchedulerPoolStatsObserver.active_pool_idxs
    edits:
      - match: |
          idxs = set()
        prepend: |
          return set()
""",
        ),
]
REVERTS: dict[str, list[Revert]] = {}
for _r in _ALL:
    REVERTS.setdefault(_r.fix, []).append(_r)


def available(fix: str, version: str) -> Revert | None:
    """The revert of `fix` written for `version`, if any."""
    return next((r for r in REVERTS.get(fix, []) if version in r.releases), None)


def apply(fixes: list[str], version: str) -> tuple[list[str], list]:
    """Apply the reverts of `fixes` to the imported release `version`. Returns what was applied
    (one line each) and the patcher's states (`restore(states)` undoes them). Raises RevertError
    (the patcher's message) when one does not apply; nothing stays applied then."""
    if not fixes:
        return [], []
    import contextlib
    import io

    from sglang.srt.debug_utils.source_patcher import apply_patches_from_config

    done: list[str] = []
    states: list = []
    for fix in fixes:
        r = available(fix, version)
        if r is None:
            restore(states)
            raise RevertError(f"no revert of fix {fix!r} is written for SGLang {version}; revertible there: "
                              f"{sorted(f for f in REVERTS if available(f, version))}")
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the patcher prints each target
                states += apply_patches_from_config(r.yaml)
        except Exception as e:  # noqa: BLE001 - the patcher raises several types; each is one line of bad input
            restore(states)
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise RevertError(f"reverting {fix} (#{r.pr}) does not apply to SGLang {version}: {first}") from None
        done.append(f"{fix} (#{r.pr}): {r.what}")
    return done, states


def restore(states: list) -> None:
    """Undo applied reverts (SGLang's PatchState.restore puts the original code back)."""
    for st in reversed(states):
        st.restore()


# -- a revert as a source edit ----------------------------------------------------------------------------
def edit_tree(fixes: list[str], version: str, parent: str) -> list[str]:
    """Apply the reverts of `fixes` as edits of the files of the SGLang source tree whose `sglang`
    package lies under `parent`, as a developer's uncommitted change would (parent side: reads text,
    imports no SGLang). Each edit is matched as the runtime patch matches it (lines compared
    stripped, once within the target function, found with `ast`), the replacement indented like
    the first matched line. Returns the files edited; RevertError when a fix has no revert for
    `version` or an edit does not match (nothing is written then)."""
    import ast
    import textwrap
    from pathlib import Path

    import yaml

    texts: dict[Path, str] = {}
    for fix in fixes:
        r = available(fix, version)
        if r is None:
            raise RevertError(f"no revert of fix {fix!r} is written for SGLang {version}")
        for patch in yaml.safe_load(r.yaml)["patches"]:
            mod, cls, fn = _split_target(patch["target"])
            f = Path(parent, *mod.split(".")).with_suffix(".py")
            src = texts.get(f)
            if src is None:
                if not f.is_file():
                    raise RevertError(f"reverting {fix} (#{r.pr}): {f} does not exist")
                src = f.read_text()
            lines = src.splitlines()
            lo, hi = _function_span(ast.parse(src), cls, fn, f)
            for e in patch["edits"]:
                match = [ln.strip() for ln in e["match"].strip().splitlines()]
                starts = [i for i in range(lo, hi - len(match) + 1)
                          if [ln.strip() for ln in lines[i:i + len(match)]] == match]
                if len(starts) != 1:
                    raise RevertError(f"reverting {fix} (#{r.pr}) in {f}: the text {match[0]!r} is found "
                                      f"{len(starts)} times in {patch['target']}, expected once")
                i = starts[0]
                indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
                if e.get("prepend"):
                    new = [indent + ln if ln else ln for ln in textwrap.dedent(e["prepend"]).strip("\n").splitlines()]
                    new += lines[i:i + len(match)]
                else:
                    body = textwrap.dedent(e.get("replacement") or "").strip("\n")
                    new = [indent + ln if ln else ln for ln in body.splitlines()] if body else []
                lines[i:i + len(match)] = new
                hi += len(new) - len(match)
            texts[f] = "\n".join(lines) + ("\n" if src.endswith("\n") else "")
    for f, text in texts.items():
        tmp = f.with_name(f".{f.name}.kvmc-tmp")
        tmp.write_text(text)
        tmp.replace(f)  # a new file: a hard link to the release's copy is not written through
    return [str(f) for f in texts]


def _split_target(target: str) -> tuple[str, str, str]:
    """'sglang.srt.m.Class.method' -> ('sglang.srt.m', 'Class', 'method') (a class is capitalised)."""
    parts = target.split(".")
    k = next(i for i, p in enumerate(parts) if p[:1].isupper())
    return ".".join(parts[:k]), parts[k], parts[k + 1]


def _function_span(tree: object, cls: str, fn: str, f: object) -> tuple[int, int]:
    import ast

    for node in ast.walk(tree):  # type: ignore[arg-type]
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == fn:
                    return item.lineno - 1, item.end_lineno or item.lineno
    raise RevertError(f"{f}: no {cls}.{fn}")
