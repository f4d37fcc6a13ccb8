"""Who owns each pool's token slots at every step of a trace, and the stacked chart that shows it.

For every state of a trace and every pool (full; SWA when the config is hybrid) the slots are split
into available (allocator free list), evictable and protected (radix-tree nodes on the device,
unlocked / locked), request-owned, session-held and leaked. The split is the ownership ledger of
specs/properties.py (`ledger`) and the tree's lock split of model/radix_cache.py (`counters`),
evaluated by the concrete interpretation of the model (model/ops.py `Concrete`) on the recorded
states: nothing here re-derives a model rule. `leaked` is the pool size minus every owner; a
negative value means slots owned twice (a double free). Beside it, each step carries SGLang's own
busy-check sum (model/invariant_checker.py `self_check_during_busy`), so a false alarm (ledger
exact, busy check off) is as visible as a real leak.

Abstracted away: which slots (only how many), the req_to_token slot pool (the step table has it).
SGLang release modelled: the trace's design (see model/designs.py).

Rendering: `svg()` (inline in the HTML report, no dependency) and `png()` (matplotlib).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from model.invariant_checker import self_check_during_busy
from model.ops import Concrete
from model.radix_cache import counters
from model.system import System
from specs.properties import ledger

from checker.traces.trace import Trace

# stacking order, bottom to top, and the colours used by both renderers (and the HTML legend)
SEGMENTS: tuple[tuple[str, str, str], ...] = (
    ("available", "#9ccc65", "free in the allocator (available_size)"),
    ("evictable", "#4fc3f7", "radix tree, unlocked (evictable)"),
    ("protected", "#1565c0", "radix tree, locked by a request (protected)"),
    ("request", "#ffb74d", "owned by a running / chunked request's row"),
    ("session", "#ab47bc", "held by a streaming-session slot"),
    ("leaked", "#e53935", "owned by nobody (leaked)"),
)
COLORS = {name: c for name, c, _ in SEGMENTS}
DOUBLE_COLOR = "#212121"  # slots owned twice: drawn above the pool size


@dataclass
class PoolStep:
    available: int
    evictable: int
    protected: int
    request: int
    session: int
    total: int
    busy_sum: int | None = None  # SGLang's busy-check left-hand side, when the check ran and did not crash

    @property
    def owned(self) -> int:
        return self.available + self.evictable + self.protected + self.request + self.session

    @property
    def leaked(self) -> int:
        """Slots owned by nobody; negative = slots owned twice."""
        return self.total - self.owned

    def values(self) -> dict[str, int]:
        return {"available": self.available, "evictable": self.evictable, "protected": self.protected,
                "request": self.request, "session": self.session, "leaked": max(self.leaked, 0)}


@dataclass
class StepInfo:
    pools: dict[str, PoolStep]
    busy: str  # "not run" / "passed" / "fired" / "crashed"
    ledger_exact: bool
    slots: tuple[int, int, int, int] = (0, 0, 0, 0)  # free, requests, sessions, size


@dataclass
class Breakdown:
    pool_names: list[str]
    steps: list[StepInfo] = field(default_factory=list)

    def series(self, pool: str) -> list[PoolStep]:
        return [s.pools[pool] for s in self.steps]


def breakdown(trace: Trace) -> Breakdown:
    """Evaluate the ledger, the tree counters and the busy check on each recorded state."""
    system = System(trace.cfg, trace.design)
    p = trace.params
    hybrid = trace.cfg.hybrid_swa
    out = Breakdown(["full", "swa"] if hybrid else ["full"])
    for s in trace.states:
        x = system.ctx(Concrete(), p)
        L = ledger(x, s)
        cnt = counters(x, s)
        b = self_check_during_busy(x, s)
        # true lock split: the counters minus a planted bug's bookkeeping drift, so that
        # evictable + protected is exactly the tree's device tokens of the ledger
        f_prot = int(cnt.full_protected) - int(s.full_protected_drift)
        pools = {"full": PoolStep(int(L.full_free), int(L.full_tree) - f_prot, f_prot, int(L.full_reqs),
                                  int(L.full_sessions), int(p.full_tokens))}
        if hybrid:
            s_prot = int(cnt.swa_protected) - int(s.swa_protected_drift)
            pools["swa"] = PoolStep(int(L.swa_free), int(L.swa_tree) - s_prot, s_prot, int(L.swa_reqs),
                                    int(L.swa_sessions), int(p.swa_tokens))
        if not b.ran:
            busy = "not run"
        elif b.crashed:
            busy = "crashed"
        else:
            busy = "fired" if b.fired else "passed"
            t = b.terms
            pools["full"].busy_sum = int(t["sum"])
            if hybrid and trace.design.variant("swa_busy_check") == "on":  # otherwise SGLang never sums the SWA pool
                pools["swa"].busy_sum = int(t["swa_sum"])
        exact = bool(L.full_ok) and bool(L.swa_ok)
        out.steps.append(StepInfo(pools, busy, exact, (int(L.slots_free), int(L.slots_reqs), int(L.slots_sessions),
                                                       int(p.req_pool_size))))
    return out


def pool_title(pool: str, trace: Trace) -> str:
    if pool == "full":
        return f"full pool (F = {trace.params.full_tokens} token slots)"
    return f"SWA pool (S = {trace.params.swa_tokens} token slots, window {trace.params.sliding_window_size})"


def nice_step(hi: float, ticks: int = 5) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... that spans `hi` in at most `ticks` steps."""
    step = 1
    while True:
        for m in (1, 2, 5):
            if step * m * ticks >= hi:
                return step * m
        step *= 10


# -- SVG (inline in the HTML page) ---------------------------------------------------------------
def svg(trace: Trace, bd: Breakdown, pool: str, width: int = 620, height: int = 300) -> str:
    """A stacked bar per step; the pool size as a dashed line; slots owned twice above it in black;
    SGLang's busy-check sum as a diamond (off the line = the check fires)."""
    series = bd.series(pool)
    n = len(series)
    left, right, top, bottom = 48, 12, 28, 34
    pw, ph = width - left - right, height - top - bottom
    hi = max(max(max(s.owned, s.total, s.busy_sum or 0) for s in series), 1)
    tick = nice_step(hi * 1.04 + 1)
    ymax = tick * -(-int(hi * 1.04 + 1) // tick)
    slot = pw / max(n, 1)
    bw = max(min(slot * 0.7, 60), 2)

    def y(v: float) -> float:
        return top + ph - v / ymax * ph

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-pool="{pool}" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(pool_title(pool, trace))}">',
             f'<text x="{left}" y="16" class="ctitle">{escape(pool_title(pool, trace))}</text>']
    for i in range(int(ymax / tick) + 1):  # y grid
        v = tick * i
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" class="grid"/>'
                     f'<text x="{left - 6}" y="{y(v) + 4:.1f}" class="tick" text-anchor="end">{v:.0f}</text>')
    for t, s in enumerate(series):
        cx = left + slot * (t + 0.5)
        x0 = cx - bw / 2
        acc = 0
        tip = [f"step {t}"] + [f"{k}: {v}" for k, v in s.values().items()] + [f"total: {s.total}"]
        if s.leaked < 0:
            tip.append(f"owned twice: {-s.leaked}")
        if s.busy_sum is not None:
            tip.append(f"busy-check sum: {s.busy_sum}")
        parts.append(f'<g class="bar" data-step="{t}"><title>{escape(chr(10).join(tip))}</title>')
        for name, color, _ in SEGMENTS:
            v = s.values()[name]
            if v <= 0:
                continue
            parts.append(f'<rect x="{x0:.1f}" y="{y(acc + v):.1f}" width="{bw:.1f}" height="{y(acc) - y(acc + v):.1f}" '
                         f'fill="{color}" class="seg-{name}"/>')
            acc += v
        if s.leaked < 0:  # owned twice: the bar overshoots the pool size
            parts.append(f'<rect x="{x0:.1f}" y="{y(s.owned):.1f}" width="{bw:.1f}" height="{y(s.total) - y(s.owned):.1f}" '
                         f'fill="{DOUBLE_COLOR}" class="seg-double"/>')
        if s.busy_sum is not None:
            by = y(s.busy_sum)
            cls = "busy-ok" if s.busy_sum == s.total else "busy-bad"
            parts.append(f'<path d="M{cx:.1f},{by - 6:.1f} l6,6 l-6,6 l-6,-6 z" class="{cls}"/>')
        busy = bd.steps[t].busy
        if busy in ("fired", "crashed"):  # SGLang's check reports a leak, or raises, after this step
            parts.append(f'<text x="{cx:.1f}" y="{min(y(max(s.owned, s.total, s.busy_sum or 0)) - 9, top + ph - 4):.1f}" '
                         f'class="alarm" text-anchor="middle">{busy}</text>')
        parts.append(f'<text x="{cx:.1f}" y="{height - bottom + 16}" class="tick" text-anchor="middle">{t}</text></g>')
    tot = series[0].total if series else 0
    parts.append(f'<line x1="{left}" x2="{width - right}" y1="{y(tot):.1f}" y2="{y(tot):.1f}" class="total"/>')
    parts.append(f'<text x="{left + 4}" y="{y(tot) - 4:.1f}" class="tick" text-anchor="start">pool size {tot}</text>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{height - 4}" class="tick" text-anchor="middle">step</text>')
    parts.append("</svg>")
    return "".join(parts)


# -- PNG (matplotlib) ------------------------------------------------------------------------------
def png(trace: Trace, path: str | Path, bd: Breakdown | None = None) -> Path:
    """The stacked chart of every pool, one panel each, written atomically as a PNG."""
    import os
    import tempfile

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError as e:  # pragma: no cover - matplotlib is a dependency
        raise RuntimeError(f"--png needs matplotlib ({e}); install it with `pip install matplotlib`") from e
    bd = bd or breakdown(trace)
    path = Path(path)
    npools = len(bd.pool_names)
    fig, axes = plt.subplots(npools, 1, figsize=(8, 3.2 * npools), squeeze=False)
    for ax, pool in zip(axes[:, 0], bd.pool_names):
        series = bd.series(pool)
        xs = list(range(len(series)))
        bottom = [0] * len(series)
        for name, color, label in SEGMENTS:
            vals = [s.values()[name] for s in series]
            ax.bar(xs, vals, bottom=bottom, color=color, label=f"{name}: {label}", width=0.7)
            bottom = [b + v for b, v in zip(bottom, vals)]
        over = [max(-s.leaked, 0) for s in series]
        if any(over):
            ax.bar(xs, over, bottom=[s.total for s in series], color=DOUBLE_COLOR, label="owned twice", width=0.7)
        ax.axhline(series[0].total, color="#424242", linestyle="--", linewidth=1)
        bx = [t for t, s in enumerate(series) if s.busy_sum is not None]
        if bx:
            ax.scatter(bx, [series[t].busy_sum for t in bx], marker="D", color="#000000", zorder=3, s=22,
                       label="SGLang busy-check sum (off the dashed line = it fires)")
        hi = max(max(s.owned, s.total, s.busy_sum or 0) for s in series)
        ax.set_ylim(0, hi * 1.15 + 0.5)
        for t, s in enumerate(series):  # SGLang's busy check reports a leak, or raises, after this step
            if bd.steps[t].busy in ("fired", "crashed"):
                ax.text(t, max(s.owned, s.total, s.busy_sum or 0) + hi * 0.03, bd.steps[t].busy, ha="center",
                        va="bottom", color="#c62828", fontsize=8, fontweight="bold")
        ax.set_title(pool_title(pool, trace), fontsize=10)
        ax.set_xlabel("step")
        ax.set_ylabel("token slots")
        ax.set_xticks(xs)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    h, lab = axes[0, 0].get_legend_handles_labels()
    fig.legend(h, lab, loc="lower center", ncol=2, fontsize=7, frameon=False)
    fig.suptitle(f"{trace.design.name} | {trace.cfg.name} | {trace.prop or ''}", fontsize=10)
    fig.tight_layout(rect=(0, 0.2 if npools == 1 else 0.1, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".kvmc-", suffix=".png", dir=path.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=110)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        plt.close(fig)
    return path


def summary(bd: Breakdown) -> dict[str, Any]:
    """The worst leak / double ownership per pool, for the page header and tests."""
    out: dict[str, Any] = {}
    for pool in bd.pool_names:
        ser = bd.series(pool)
        out[pool] = {"max_leaked": max(max(s.leaked, 0) for s in ser), "max_double": max(max(-s.leaked, 0) for s in ser),
                     "first_leak_step": next((t for t, s in enumerate(ser) if s.leaked != 0), None)}
    return out
