"""Counterexample reports people would rather look at than read: the step table in colour for a
terminal, and one self-contained HTML page (inline CSS, JS and SVG; nothing fetched).

The page shows the trace as a table (per step: the action's choices, only the fields that changed,
who owns each pool's slots, SGLang's busy check) with the violated property last, its equation and
values (checker/traces/explain.py), and above it a stacked chart per pool (checker/reports/chart.py) so a leak, a
slot owned twice or a false alarm of the busy check stands out. Every number is the model's own
(ledger, counters, busy check evaluated concretely on the recorded states); nothing re-derives it.
SGLang release modelled: the trace's own (`#meta.sglang_release`; model/designs.py).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from html import escape
from pathlib import Path
from typing import IO, Any

from model.designs import CURRENT_RELEASE
from model.system import System

from checker.reports import chart
from checker.traces.trace import Trace, describe_picks, diff, initial_summary, step_table

KVMC_VERSION = "0.1.0"


# -- terminal ------------------------------------------------------------------------------------
def use_color(stream: IO[str], mode: str = "auto") -> bool:
    """`always` / `never`, or `auto`: a terminal, NO_COLOR unset (https://no-color.org), TERM not dumb."""
    if mode == "always":
        return True
    if mode == "never":
        return False
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("TERM") == "dumb":
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


_BOLD, _DIM, _RED, _GREEN, _CYAN, _YELLOW, _RESET = "\033[1m", "\033[2m", "\033[31m", "\033[32m", "\033[36m", "\033[33m", "\033[0m"
_CHANGE = re.compile(r"^(\s+)([^=\s]+)=(.*)->(.*)$")


def colorize(table: str) -> str:
    """ANSI colour for `step_table`'s text: step headers, old -> new values, the violation."""
    out = []
    for line in table.splitlines():
        m = _CHANGE.match(line)
        if m:
            ind, name, old, new = m.groups()
            out.append(f"{ind}{_DIM}{name}={_RESET}{_RED}{old}{_RESET}{_DIM}->{_RESET}{_GREEN}{new}{_RESET}")
        elif line.startswith("step "):
            head, _, rest = line.partition("  [")
            out.append(f"{_BOLD}{_CYAN}{head}{_RESET}" + (f"  {_YELLOW}[{rest}{_RESET}" if rest else ""))
        elif line.startswith("violated"):
            out.append(f"{_BOLD}{_RED}{line}{_RESET}")
        elif line.startswith(("design ", "params ", "state 0")):
            out.append(f"{_DIM}{line}{_RESET}")
        else:
            out.append(line)
    return "\n".join(out)


def terminal(trace: Trace, color: bool) -> str:
    table = step_table(trace, str(trace.meta.get("violation", "")))
    return colorize(table) if color else table


# -- HTML ----------------------------------------------------------------------------------------
_CSS = """
body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#212121;background:#fafafa}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:24px 0 8px}
.meta{color:#616161;font-size:12px} code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
.verdict{background:#ffebee;border-left:4px solid #c62828;padding:8px 12px;margin:12px 0;font-family:ui-monospace,monospace;font-size:12px;white-space:pre-wrap}
.ok{background:#e8f5e9;border-left-color:#2e7d32}
.charts{display:flex;flex-wrap:wrap;gap:16px}
.chart{background:#fff;border:1px solid #e0e0e0;border-radius:4px}
.chart .ctitle{font-size:13px;font-weight:600;fill:#212121}
.chart .tick{font-size:10px;fill:#616161} .chart .alarm{font-size:11px;font-weight:700;fill:#c62828}
.chart .grid{stroke:#eeeeee} .chart .total{stroke:#424242;stroke-dasharray:5 3}
.chart .busy-ok{fill:#000;opacity:.55} .chart .busy-bad{fill:#000;stroke:#ff1744;stroke-width:2}
.chart .bar.hl rect{stroke:#000;stroke-width:1.5}
.legend{display:flex;flex-wrap:wrap;gap:12px;font-size:12px;margin:8px 0}
.legend span{display:inline-flex;align-items:center;gap:4px}
.legend i{display:inline-block;width:12px;height:12px;border-radius:2px}
table{border-collapse:collapse;background:#fff;width:100%}
th,td{border:1px solid #e0e0e0;padding:4px 8px;vertical-align:top;text-align:left}
th{background:#f5f5f5;font-size:12px}
td.num{text-align:right;font-family:ui-monospace,monospace;font-size:12px}
tr.hl td{background:#fff8e1}
tr.violation td{background:#ffebee;font-family:ui-monospace,monospace;font-size:12px;white-space:pre-wrap}
.chg{font-family:ui-monospace,monospace;font-size:12px;margin:0;padding:0;list-style:none}
.old{color:#c62828} .new{color:#2e7d32}
.leak{color:#c62828;font-weight:700} .badge{padding:1px 6px;border-radius:8px;font-size:11px}
.b-fired,.b-crashed{background:#ffcdd2} .b-passed{background:#c8e6c9} .b-notrun{background:#eeeeee}
"""

_JS = """
(function(){
  function mark(step,on){
    document.querySelectorAll('[data-step="'+step+'"]').forEach(function(e){e.classList.toggle('hl',on);});
  }
  document.querySelectorAll('[data-step]').forEach(function(e){
    var s=e.getAttribute('data-step');
    e.addEventListener('mouseenter',function(){mark(s,true);});
    e.addEventListener('mouseleave',function(){mark(s,false);});
    if(e.tagName.toLowerCase()==='g'){e.style.cursor='pointer';e.addEventListener('click',function(){
      var row=document.getElementById('step-'+s); if(row){row.scrollIntoView({block:'center'});}});}
  });
})();
"""


def _change_html(change: str) -> str:
    name, _, rest = change.partition("=")
    old, _, new = rest.rpartition("->")
    return f'<li>{escape(name)}=<span class="old">{escape(old)}</span>&rarr;<span class="new">{escape(new)}</span></li>'


def _pool_cells(ps: chart.PoolStep) -> str:
    leak = ps.leaked
    if leak > 0:
        lk = f'<span class="leak">{leak} leaked</span>'
    elif leak < 0:
        lk = f'<span class="leak">{-leak} owned twice</span>'
    else:
        lk = "0"
    return (f'<td class="num">{ps.available}</td><td class="num">{ps.evictable}/{ps.protected}</td>'
            f'<td class="num">{ps.request}</td><td class="num">{ps.session}</td><td class="num">{lk}</td>')


def html(trace: Trace) -> str:
    """The whole page, as a string."""
    bd = chart.breakdown(trace)
    system = System(trace.cfg, trace.design)
    m = trace.meta
    violation = str(m.get("violation", "")) or _explain(system, trace)
    off = [f for f, v in trace.design.flags().items() if v is None] if hasattr(trace.design, "flags") else []
    title = f"kvmc: {trace.prop or 'trace'} on {trace.design.name} / {trace.cfg.name}"
    params = {k: v for k, v in trace.params.as_dict().items() if not (isinstance(v, tuple) and len(v) == 0)}
    summ = chart.summary(bd)
    leak_lines = []
    for pool, info in summ.items():
        if info["max_leaked"]:
            leak_lines.append(f"{pool} pool: up to {info['max_leaked']} slot(s) owned by nobody, from step {info['first_leak_step']}")
        if info["max_double"]:
            leak_lines.append(f"{pool} pool: up to {info['max_double']} slot(s) owned twice, from step {info['first_leak_step']}")
    if not leak_lines:
        leak_lines.append("the ownership ledger is exact at every step (no leak, no double ownership)")

    h: list[str] = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
                    '<meta name="viewport" content="width=device-width, initial-scale=1">',
                    f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>"]
    h.append(f"<h1>{escape(title)}</h1>")
    h.append(f'<div class="meta">design <b>{escape(trace.design.name)}</b>'
             + (f" (fixes off: {escape(', '.join(off))})" if off else "")
             + (f", mutants: {escape(', '.join(sorted(trace.design.mutants)))}" if trace.design.mutants else "")
             + f" &middot; config <b>{escape(trace.cfg.name)}</b> (page_size={trace.cfg.page_size})"
             + f" &middot; {trace.depth} step(s) &middot; engine {escape(trace.engine or '?')}"
             + f" &middot; sglang {escape(str(m.get('sglang_release') or str(m.get('sglang_commit', CURRENT_RELEASE))[:12]))}"
             + f" &middot; kvmc {escape(str(m.get('kvmc_version', KVMC_VERSION)))}</div>")
    h.append('<div class="meta mono">params ' + escape(" ".join(f"{k}={v}" for k, v in params.items())) + "</div>")
    if violation:
        h.append(f'<div class="verdict" id="verdict">{escape(violation)}</div>')
    h.append(f'<div class="verdict ok" id="ledger-summary">{escape("; ".join(leak_lines))}</div>'
             if not any(i["max_leaked"] or i["max_double"] for i in summ.values())
             else f'<div class="verdict" id="ledger-summary">{escape("; ".join(leak_lines))}</div>')

    h.append("<h2>Who owns each pool's slots, per step</h2>")
    h.append('<div class="legend">' + "".join(
        f'<span><i style="background:{c}"></i>{escape(n)}: {escape(d)}</span>' for n, c, d in chart.SEGMENTS)
        + f'<span><i style="background:{chart.DOUBLE_COLOR}"></i>owned twice (above the pool size)</span>'
        + '<span>&#9670; SGLang busy-check sum (off the dashed pool-size line = the check fires)</span></div>')
    h.append('<div class="charts">' + "".join(chart.svg(trace, bd, pool) for pool in bd.pool_names) + "</div>")

    h.append("<h2>Trace</h2>")
    pool_heads = "".join(f'<th colspan="5">{escape(p)} pool</th>' for p in bd.pool_names)
    sub = "".join("<th>avail</th><th>evict/prot</th><th>req</th><th>session</th><th>leaked</th>" for _ in bd.pool_names)
    h.append(f'<table id="trace"><thead><tr><th rowspan="2">step</th><th rowspan="2">action and choices</th>'
             f'<th rowspan="2">what changed</th>{pool_heads}<th rowspan="2">busy check</th></tr><tr>{sub}</tr></thead><tbody>')
    states = trace.states
    for t, info in enumerate(bd.steps):
        if t == 0:
            action = "initial state"
            changes = f'<span class="mono">{escape(initial_summary(trace))}</span>'
        else:
            st = trace.steps[t - 1]
            picks = describe_picks(st.picks)
            action = f"{escape(st.action)}" + (f'<div class="mono">[{escape(picks)}]</div>' if picks else "")
            ch = diff(states[t - 1], states[t], trace.cfg)
            changes = '<ul class="chg">' + "".join(_change_html(c) for c in ch) + "</ul>" if ch else "(nothing)"
        pools = "".join(_pool_cells(info.pools[p]) for p in bd.pool_names)
        badge = info.busy.replace(" ", "")
        h.append(f'<tr id="step-{t}" data-step="{t}"><td class="num">{t}</td><td>{action}</td><td>{changes}</td>{pools}'
                 f'<td><span class="badge b-{badge}">{escape(info.busy)}</span></td></tr>')
    ncols = 4 + 5 * len(bd.pool_names)
    if violation:
        h.append(f'<tr class="violation" id="violation"><td colspan="{ncols}">{escape(violation)}</td></tr>')
    h.append("</tbody></table>")
    h.append(f"<script>{_JS}</script></body></html>")
    return "\n".join(h)


def _explain(system: System, trace: Trace) -> str:
    if not trace.prop:
        return ""
    from checker.traces.explain import explain

    try:
        return explain(system, trace.prop, trace.params, trace.states[-1])
    except Exception:  # a hand-written trace may name a property explain() does not know
        return ""


def write_atomic(path: str | Path, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".kvmc-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_html(trace: Trace, path: str | Path) -> Path:
    return write_atomic(path, html(trace))


def show(trace: Trace, out: Any = None, color_mode: str = "auto") -> None:
    out = out or sys.stdout
    out.write(terminal(trace, use_color(out, color_mode)) + "\n")
