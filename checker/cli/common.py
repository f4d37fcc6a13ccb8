"""What every `kvmc` subcommand shares: the usage error (one line, exit 2), the parser that raises
it, the checks of a design, a property/config selection, a lemma set, a timeout and an output
path (all before any work), and the progress lines on stderr (text, or JSON lines for CI logs).

Imports of the model are inside the functions: `kvmc --help` loads none of it."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Sequence

if TYPE_CHECKING:
    from model.designs import Design


class UsageError(Exception):
    """Bad input: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not argparse's usage block
        where = self.prog[len("kvmc "):] if self.prog.startswith("kvmc ") else ""
        raise UsageError(f"{where + ': ' if where else ''}{message} (see {self.prog} --help)")


def _choices(kind: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise UsageError(f"unknown {kind} {value!r}; expected one of: {', '.join(allowed)}")


def build_design(name: str, without: list[str], with_: list[str], mutants: list[str]) -> "Design":
    """checker/designs.py::build, its `DesignError` as a usage error (one line, exit 2)."""
    from checker.designs import DesignError, build

    try:
        return build(name, without, with_, mutants)
    except DesignError as e:
        raise UsageError(str(e)) from None


def add_design_options(p: argparse.ArgumentParser, mutant_help: str = "plant a bug (kvmc list)") -> None:
    """--design/--without/--with/--mutant, as `check` and `graph` take them (see build_design)."""
    p.add_argument("--design", default="current", help="release preset (kvmc list; default current)")
    p.add_argument("--without", action="append", default=[], metavar="FIX", help="turn a fix off")
    p.add_argument("--with", dest="with_", action="append", default=[], metavar="FIX[=VARIANT]", help="turn a fix on")
    p.add_argument("--mutant", action="append", default=[], metavar="NAME", help=mutant_help)


# -- numbers ----------------------------------------------------------------------------------------
TIMEOUT_MIN_S = 0.01  # z3 counts in milliseconds; below this every query would be unknown at once
TIMEOUT_MAX_S = 4_000_000.0  # z3's limit is an unsigned 32-bit count of milliseconds (49 days)


def positive_int(text: str) -> int:
    """An option that counts something (`--examples`): a whole number of at least 1."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text} is not at least 1")
    return v


def timeout_seconds(text: str) -> float:
    """`--timeout`'s type: a finite number of seconds within [TIMEOUT_MIN_S, TIMEOUT_MAX_S]
    (`nan`, `inf`, `0.0001` used to mean no limit at all)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of seconds (leave --timeout out for no limit)")
    if v < TIMEOUT_MIN_S or v > TIMEOUT_MAX_S:
        raise argparse.ArgumentTypeError(f"{text} seconds is outside {TIMEOUT_MIN_S}..{TIMEOUT_MAX_S:.0f} "
                                         "(leave --timeout out for no limit)")
    return v


def timeout_ms(seconds: float | None) -> int:
    """Milliseconds for z3 (0: no limit)."""
    return 0 if seconds is None else max(1, int(round(seconds * 1000)))


# -- output paths -----------------------------------------------------------------------------------
def _probe_dir(d: Path, what: str) -> None:
    """Create `d` (and its parents) if needed, write and remove a file in it, and remove the
    directories this created: an unwritable place fails now, in milliseconds, not after the work."""
    created: list[Path] = []
    p = d
    while not p.exists() and p != p.parent:
        created.append(p)
        p = p.parent
    try:
        if d.exists() and not d.is_dir():
            raise UsageError(f"{what} {str(d)!r} is a file, not a directory; give a directory")
        d.mkdir(parents=True, exist_ok=True)
        probe = d / f".kvmc-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise UsageError(f"{what} {str(d)!r} is not writable ({e.strerror or e}); give a writable directory") from None
    finally:
        for c in created:  # deepest first
            try:
                c.rmdir()
            except OSError:
                break


def writable_dir(path: str | Path, what: str) -> Path:
    """Check that `path` is, or can be made, a writable directory (UsageError: one line, exit 2).
    Leaves nothing behind."""
    _probe_dir(Path(path), what)
    return Path(path)


def writable_file(path: str | Path, what: str) -> Path:
    """Check that the file `path` can be written (its directory writable, itself not a directory
    nor read-only). Leaves nothing behind."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{what} {str(p)!r} is a directory; give a file name")
    _probe_dir(p.parent if str(p.parent) else Path("."), what + " directory")
    if p.exists() and not os.access(p, os.W_OK):
        raise UsageError(f"{what} {str(p)!r} is not writable; give a writable path")
    return p


def corpus_dir() -> Path:
    """The checked-in regression corpus (counterexamples/), which only `kvmc regen` writes."""
    return Path(__file__).resolve().parents[2] / "counterexamples"


def refuse_corpus(out: str | Path, what: str = "--out") -> None:
    """`kvmc check`/`review` write under a run directory, never into the regression corpus."""
    try:
        p = Path(out).resolve()
    except OSError:
        return
    c = corpus_dir()
    if p == c or c in p.parents:
        raise UsageError(f"{what} {str(out)!r} is inside the regression corpus {c}; it is updated only by "
                         "`kvmc regen --update` (give another directory, e.g. the default kvmc-out/)")


def keep_hypothesis_in(out: str | Path) -> None:
    """Hypothesis (the random engine, the BMC's seed hunts) keeps a cache under `.hypothesis/` of
    the current directory; a run keeps it under its run directory instead (forked workers and
    subprocesses inherit the variable; one the user set is kept)."""
    os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(Path(out).resolve() / ".hypothesis"))


def publish(path: str | Path) -> None:
    """Make a written file readable by others (0644 less the umask): temporary files start 0600."""
    um = os.umask(0)
    os.umask(um)
    try:
        os.chmod(path, 0o666 & ~um)
    except OSError:
        pass


def validate_selection(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The checks `check`, `check --all` and `review` share: properties, configs, depth, jobs,
    timeout and engine; returns (properties, configs). Raises UsageError (one line, exit 2)."""
    from specs.configs import CONFIGS
    from specs.liveness import LIVENESS
    from specs.properties import PROPERTIES

    from checker.engines.run import EngineUnavailable, engine_check_config

    props = args.property or list(PROPERTIES)  # liveness properties (specs/liveness.py) only when named
    for p in props:
        _choices("property", p, list(PROPERTIES) + list(LIVENESS))
    configs = args.config or list(CONFIGS)
    for c in configs:
        _choices("config", c, list(CONFIGS))
    for p in args.property or []:
        prop = PROPERTIES.get(p)
        if prop is not None and prop.applies is not None and not any(prop.applies(CONFIGS[c]) for c in configs):
            fit = [c for c in CONFIGS if prop.applies(CONFIGS[c])]
            raise UsageError(f"property {p!r} applies only to {prop.applies_meaning} ({', '.join(fit)}); "
                             f"--config {' '.join(configs)} has none: name one of those")
    if args.depth <= 0:
        raise UsageError(f"--depth {args.depth} must be a positive number of scheduler iterations")
    if getattr(args, "jobs", None) is not None and args.jobs <= 0:
        raise UsageError(f"--jobs {args.jobs} must be a positive number of processes")
    if args.timeout is not None and not (TIMEOUT_MIN_S <= args.timeout <= TIMEOUT_MAX_S):  # (called from Python too)
        raise UsageError(f"--timeout {args.timeout} must be between {TIMEOUT_MIN_S} and {TIMEOUT_MAX_S:.0f} seconds")
    try:
        engine_check_config(args.engine)
    except EngineUnavailable as e:
        raise UsageError(str(e)) from e
    return props, configs


def refuse_unshipped(args: argparse.Namespace, designs: list[Any]) -> None:
    """A `--config` named on the command line whose mechanism none of `designs` ships (EAGLE v1 after
    v0.5.12.post1, spec v2 before v0.5.13, the SWA ring before v0.5.20): one line, exit 2. Unnamed
    configs are skipped per design instead (reported `not checked`)."""
    from model.designs import PRESETS
    from specs.configs import CONFIGS

    for c in args.config or []:
        whys = [CONFIGS[c].not_modelled_by(d) for d in designs]
        if all(whys):
            fit = [n for n, d in PRESETS.items() if not CONFIGS[c].not_modelled_by(d)]
            raise UsageError(f"{whys[0]}; run it with a design that ships it (--design {' / '.join(fit)})")


def lemma_selection(args: argparse.Namespace) -> list[str] | None:
    """The lemmas the proofs may assume: all, less each `--without-lemma` (None: all)."""
    from specs.lemmas import LEMMAS

    if not args.without_lemma:
        return None
    for n in args.without_lemma:
        _choices("lemma", n, list(LEMMAS))
    if args.engine not in ("bmc", "induction", "portfolio"):
        raise UsageError(f"--without-lemma applies to the proofs of the bmc and induction engines, not --engine {args.engine}")
    return [n for n in LEMMAS if n not in args.without_lemma]


# -- progress ---------------------------------------------------------------------------------------
def add_progress_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress", choices=("text", "json", "none"), default="text",
                   help="progress on stderr: text lines (a live line on a terminal), json (one JSON object a "
                        "line, for CI logs) or none (default text)")
    p.add_argument("--no-progress", dest="progress", action="store_const", const="none", help="same as --progress none")


def warn(msg: str) -> None:
    print(f"kvmc: note: {msg}", file=sys.stderr, flush=True)


class Lines:
    """Progress output on stderr: `line(text, **fields)` prints the text (on a terminal, as one
    live line rewritten in place) or, in json mode, one JSON object with the fields."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.tty = mode == "text" and sys.stderr.isatty()
        self.lock = threading.Lock()
        self.live = False

    @property
    def enabled(self) -> bool:
        return self.mode != "none"

    def line(self, text: str, event: str, live: bool = False, **fields: Any) -> None:
        if self.mode == "none":
            return
        with self.lock:
            if self.mode == "json":
                sys.stderr.write(json.dumps({"event": event, **fields, "text": text}) + "\n")
            elif self.tty:
                sys.stderr.write("\r\033[K" + text + ("" if live else "\n"))
                self.live = live
            else:
                sys.stderr.write(text + "\n")
            sys.stderr.flush()

    def end(self) -> None:
        with self.lock:
            if self.tty and self.live:
                sys.stderr.write("\n")
                sys.stderr.flush()
                self.live = False


def beat_every(lines: Lines) -> float:
    """Seconds between heartbeat lines: 1 on a terminal (a live line), 10 piped; `KVMC_HEARTBEAT_S`
    overrides both (CI logs that want more or fewer, the interrupt tests)."""
    env = os.environ.get("KVMC_HEARTBEAT_S")
    if env:
        try:
            v = float(env)
            if math.isfinite(v) and v > 0:
                return v
        except ValueError:
            pass
        warn(f"KVMC_HEARTBEAT_S={env!r} ignored; expected a positive number of seconds")
    return 1.0 if lines.tty else 10.0


# Held by a heartbeat while it prints and by the interrupt's last line: a beat that sees no
# interrupt prints before that line, one that comes after it sees the interrupt and prints nothing
# (the heartbeat's join can time out on a loaded machine, session 42: a beat came after the line)
_LAST_LINE = threading.Lock()


def say_interrupted(text: str) -> None:
    """The last line on stderr of an interrupted command."""
    with _LAST_LINE:
        print(text, file=sys.stderr, flush=True)


class Heartbeat:
    """A thread that calls `beat()` every `every_s` seconds until stopped (a long query or a long
    job between two progress lines still shows that the run is alive, and where)."""

    def __init__(self, beat: Any, every_s: float) -> None:
        self.beat = beat
        self.every_s = every_s
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self._run, name="kvmc-progress", daemon=True)

    def _run(self) -> None:
        from checker import interrupt

        while not self.stop_ev.wait(self.every_s):
            with _LAST_LINE:
                if interrupt.requested() or self.stop_ev.is_set():  # stopping: the last line is the interrupt's
                    return
                try:
                    self.beat()
                except Exception:  # progress never breaks a run
                    pass

    def __enter__(self) -> "Heartbeat":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop_ev.set()
        # a beat already past its wait would print after the caller's last line (an interrupted run's
        # "kvmc: interrupted by ..." must be the last line on stderr): let it finish first
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(timeout=5.0)


def fmt_s(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{seconds:.1f}s"


class JobsProgress:
    """Progress of (design or side, config) jobs run in parallel (`check --jobs/--all`, `review`):
    done / running / queued, the jobs running and for how long, and an estimate of the time left
    (the mean time of a finished job, times the jobs left, over the processes)."""

    def __init__(self, lines: Lines, total: int, workers: int, what: str = "checks") -> None:
        self.lines = lines
        self.total = total
        self.workers = max(1, min(workers, total))
        self.what = what
        self.t0 = time.monotonic()
        self.done = 0
        self.running: dict[str, float] = {}  # job label -> started
        self.durations: list[float] = []
        self.lock = threading.Lock()
        self.alive: Any = None  # `--executor ray`: a callable, the cluster's worker slots alive now

    def started(self, label: str) -> None:
        with self.lock:
            self.running[label] = time.monotonic()
        self.report(f"started {label}")

    def finished(self, label: str, summary: str = "") -> None:
        with self.lock:
            t = self.running.pop(label, None)
            if t is not None:
                self.durations.append(time.monotonic() - t)
            self.done += 1
        self.report(f"finished {label}" + (f": {summary}" if summary else ""))

    def eta(self) -> float | None:
        if not self.durations:
            return None
        left = self.total - self.done
        mean = sum(self.durations) / len(self.durations)
        longest_running = max((time.monotonic() - t for t in self.running.values()), default=0.0)
        return max(0.0, mean * left / self.workers - min(longest_running, mean))

    def report(self, what: str = "", live: bool = False) -> None:
        with self.lock:
            queued = self.total - self.done - len(self.running)
            now = time.monotonic()
            cur = sorted(self.running.items(), key=lambda kv: kv[1])
            current = ", ".join(f"{k} ({fmt_s(now - t)})" for k, t in cur[:3]) + (" ..." if len(cur) > 3 else "")
            eta = self.eta()
        el = now - self.t0
        alive = self.alive() if self.alive is not None else None
        text = (f"[{self.done}/{self.total} {self.what} done, {len(cur)} running, {queued} queued"
                + (f", {alive} workers alive" if alive is not None else "") + f", {fmt_s(el)}"
                + (f", about {fmt_s(eta)} left" if eta is not None else "") + "]"
                + (f" {what}" if what else "") + (f"; running: {current}" if current and not what else ""))
        self.lines.line(text, "jobs", live=live, done=self.done, total=self.total, running=[k for k, _ in cur],
                        queued=queued, elapsed_s=round(el, 1), eta_s=None if eta is None else round(eta, 1),
                        **({"workers_alive": alive} if alive is not None else {}),
                        message=what or None)
