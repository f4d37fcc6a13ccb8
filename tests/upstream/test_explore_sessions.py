"""`kvmc explore`'s oracle on a streaming turn that finishes in its own prefill (0.5.23, config
`sessions`): the save hands the turn's KV record to its session slot (`Req.detach_kv`, the Req
keeps a fresh empty ReqKvInfo), so `prompt_prefilled` reads the turn's committed KV from the slot
(upstream/sched/abstraction.py::committed_len). Reading the Req's own record reported a cut prompt
(kv_committed_len 0 of a 1 + 1 fill) at walk seed 4 of `--config sessions` on 0.5.23. 0.5.23 is no
CI release: skipped where it is not installed. One iteration on SGLang's scheduler, seconds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
from specs.configs import CONFIGS
from model.designs import PRESETS
from model.config import concrete_params
from upstream.sched import harness, explore as ex
from upstream.sched.abstraction import _sessions, committed_len, req_len, status, to_state
from model.state import FINISHED
harness.setup()
cfg = CONFIGS['sessions']
p = concrete_params(cfg, full_tokens=9, swa_tokens=0, sliding_window_size=0, chunked_prefill_size=0,
                    max_prefill_tokens=23, req_pool_size=1, input_len=(1, 1), max_new_tokens=(1, 1))
h = harness.RealScheduler(cfg, p, force=False)
h.forcing.observe = False
h.step({'recv.arrive[0]': True})  # session 0's first turn: a 1-token prompt, done by its prefill
sl = h.slots[0]
print('MODE', h.last_mode, 'FINISHED', status(h, sl) == FINISHED)
print('OWN', req_len(sl.req, 'kv_committed_len'), 'READ', committed_len(h, sl), 'STATE', to_state(h).kv_committed_len[0])
print('VERDICT', ex.Oracle(['prompt_prefilled'], 4, PRESETS['v0.5.23']).judge(h, {}))
_sessions(h)[sl.session_id].kv.kv_committed_len = 0  # a slot record cut short is still a cut prompt
print('CUT', [s.r for s in ex._cut_short(h)])
"""


def test_a_streaming_turn_done_by_its_prefill_is_read_from_its_session_slot(tmp_path: Path) -> None:
    import pytest

    from upstream.install import default_dir, is_installed, release_env
    from upstream.sched import replay as sr
    from upstream.sched.replay import worker_path

    root = default_dir()
    if not is_installed(root, "0.5.23") or not (sr.extras_dir(root) / ".kvmc-complete").exists():
        pytest.skip(f"SGLang 0.5.23 is not installed under {root} (kvmc sglang install 0.5.23; not a CI release)")
    env = release_env(worker_path(root, "0.5.23"))
    p = subprocess.run([sys.executable, "-W", "ignore", "-c", SCRIPT], capture_output=True, text=True, env=env,
                       cwd=str(REPO), timeout=300)
    out = p.stdout
    assert p.returncode == 0, out + p.stderr[-2000:]
    # the case at work: the turn finished in the extend, its Req's own record emptied by the save
    assert "MODE extend FINISHED True" in out, out
    assert "OWN 0 READ 1 STATE 1" in out, out  # fill 2, committed fill - 1 = 1 in the slot's record
    assert "VERDICT None" in out, out
    assert "CUT [0]" in out, out


# A turn retracted twice (first turn of session 0, two forced decode retractions, each followed by
# its re-prefill): the second save's `Session.finish_req` meets the Req itself in req_nodes and sets
# `req.session = None`, so the third prefill runs the turn like a request without a session, on a
# record of its own, and its finish releases it through the tree; the slot keeps the stale record of
# the second save (9 of the 11-token fill). The turn's KV is its Req's record (10 = fill - 1): reading
# the slot's reported `prompt_prefilled` violated (kv_committed_len 9, prompt + output 11) at depth 5
# of `kvmc explore --search bfs --seed 0 --config sessions` on 0.5.23. A turn retracted once is
# detached at its finish's save, after `detach_kv`: its record is the slot's (ONCE).
SCRIPT_RETRACTED = """
from specs.configs import CONFIGS
from model.designs import PRESETS
from model.config import concrete_params
from upstream.sched import harness, explore as ex
from upstream.sched.abstraction import _sessions, committed_len, req_len, status, to_state
from model.state import FINISHED
harness.setup()
cfg = CONFIGS['sessions']
p = concrete_params(cfg, full_tokens=29, swa_tokens=0, sliding_window_size=0, chunked_prefill_size=0,
                    max_prefill_tokens=16, req_pool_size=3, input_len=(8, 7), max_new_tokens=(3, 4))
A, R = {'recv.arrive[0]': True, 'recv.arrive[1]': True}, {'decode.test_retract': True}
for name, steps in (('TWICE', [A, R, {}, R, {}]), ('ONCE', [A, R, {}, {}])):
    h = harness.RealScheduler(cfg, p, force=False)
    h.forcing.observe = False
    oracle = ex.Oracle(['prompt_prefilled'], 4, PRESETS['v0.5.23'])
    verdicts = []
    for picks in steps:
        h.step(picks)
        verdicts.append(oracle.judge(h, picks))
    sl = h.slots[0]
    q = sl.req
    print(name, 'MODE', h.last_mode, 'FINISHED', status(h, sl) == FINISHED, 'RETRACTED', q.retraction_count,
          'SESSION', q.session is not None, 'FILL', len(q.origin_input_ids) + len(q.output_ids))
    print(name, 'OWN', req_len(q, 'kv_committed_len'), 'SLOT', _sessions(h)[sl.session_id].kv.kv_committed_len,
          'READ', committed_len(h, sl), 'STATE', to_state(h).kv_committed_len[0])
    print(name, 'VERDICTS', verdicts)
"""


def test_a_turn_retracted_twice_is_read_from_its_own_record(tmp_path: Path) -> None:
    import pytest

    from upstream.install import default_dir, is_installed, release_env
    from upstream.sched import replay as sr
    from upstream.sched.replay import worker_path

    root = default_dir()
    if not is_installed(root, "0.5.23") or not (sr.extras_dir(root) / ".kvmc-complete").exists():
        pytest.skip(f"SGLang 0.5.23 is not installed under {root} (kvmc sglang install 0.5.23; not a CI release)")
    env = release_env(worker_path(root, "0.5.23"))
    p = subprocess.run([sys.executable, "-W", "ignore", "-c", SCRIPT_RETRACTED], capture_output=True, text=True,
                       env=env, cwd=str(REPO), timeout=300)
    out = p.stdout
    assert p.returncode == 0, out + p.stderr[-2000:]
    # the case at work: the third prefill finished the turn, which lost its session at its second save
    assert "TWICE MODE extend FINISHED True RETRACTED 2 SESSION False FILL 11" in out, out
    assert "TWICE OWN 10 SLOT 9 READ 10 STATE 10" in out, out  # its own record, fill - 1; the slot's is stale
    assert "TWICE VERDICTS [None, None, None, None, None]" in out, out
    # retracted once: finished by a decode, detached by that save after detach_kv handed the slot its record
    assert "ONCE MODE decode FINISHED True RETRACTED 1 SESSION False FILL 11" in out, out
    assert "ONCE OWN 0 SLOT 10 READ 10 STATE 10" in out, out
    assert "ONCE VERDICTS [None, None, None, None]" in out, out
