"""`kvmc mutate`: how strong is the checker? Mutants of the model, each checked by kvmc's own
engines, killed or not, and every survivor explained.

Per mutant (checker/mutation/operators.py):

    unreached   no config's step executes the mutated line under the run's preset (`--design`,
                default current; checker/mutation/coverage.py); the evidence names the presets
                whose configs do (a fix's "off" side runs only under the releases before it)
    invalid     the mutated model raises a Python error: every engine stops on it (not counted)
    killed      an engine found a property violated, or left vacuous where the model is not
                (checker/mutation/runner.py), within the budget; or, with `--conform VERSION`, a
                survivor disagrees with that SGLang release where the model agrees
                (checker/mutation/conformance.py, engine "conform")
    equivalent  z3 proves the mutant's step equal to the model's from every state the lemmas
                allow, on every config that runs it (checker/mutation/equivalence.py)
    survived    none of the above; the report says which kind of gap, with evidence:
                restriction   the mutant only drops successors of the model's (checked on the
                              reachable states of the explicit points, checker/mutation/diff.py
                              `inclusion`): it reaches no new state, so no safety property can
                              see it; progress (liveness) or a lost witness might
                property gap  the mutant diverges from the model on a reachable state
                              (checker/mutation/diff.py) and its explicit search saw every
                              reachable state of those parameter points: no property tells the
                              difference
                search gap    the mutant diverges (or z3 shows its step differs) but the searches
                              did not cover where: a deeper or wider search may kill it
                unclassified  no divergence found and z3 gave no answer

Kill rate = killed / (killed + survived): equivalent, unreached and invalid mutants are not
counted (they cannot be killed, or need no property to be seen).
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from checker.mutation.operators import OPERATORS, Mutant, generate

DEFAULT_BUDGET_S = 300.0
EQUIV_TIMEOUT_S = 60.0
DIVERGENCE_S = 60.0
FINDINGS_DEPTH = 1  # the model's own violations looked for before the hunt (prompt_prefilled is at depth 1)
FINDINGS_S = 60.0
CONFORM_EXAMPLES = 100  # scenarios per conformance row for a survivor (and for the model's own baseline)
CONFORM_SEED = 29


@dataclass
class Outcome:
    mutant: Mutant
    configs: list[str]
    status: str  # unreached | invalid | killed | equivalent | survived | error
    seconds: float = 0.0
    kill: dict[str, Any] | None = None
    searched: list[dict[str, Any]] = field(default_factory=list)
    stopped: str = ""
    error: str = ""
    gap: str = ""  # survivors: restriction | property gap | search gap | unclassified
    evidence: str = ""
    equivalence: list[dict[str, Any]] = field(default_factory=list)
    divergence: dict[str, Any] | None = None
    live: list[str] | None = None  # the configs where its step differs from the model's (as terms)
    excluded: dict[str, list[str]] | None = None  # per config, properties the model breaks (no kill by them)

    @property
    def module(self) -> str:
        return self.mutant.module.split(".", 1)[1]

    def as_dict(self) -> dict[str, Any]:
        return dict(mutant=self.mutant.as_dict(), module=self.module, configs=self.configs, status=self.status,
                    live=self.live, excluded=self.excluded, seconds=round(self.seconds, 2), kill=self.kill,
                    gap=self.gap or None,
                    evidence=self.evidence or None,
                    searched=self.searched, stopped=self.stopped or None, error=self.error or None,
                    equivalence=self.equivalence, divergence=self.divergence)


def select(module: str | None, seed: int, max_mutants: int | None, ops: tuple[str, ...] = OPERATORS,
           ids: list[str] | None = None, per_module: int | None = None,
           names: list[str] | None = None) -> list[Mutant]:
    """The mutants to run: all of `module` (all modules; only those of the transitions `names`),
    or a seeded sample of them."""
    ms = generate(module, ops=ops)
    if names:
        ms = [m for m in ms if m.transition in names]
    if ids:
        known = {m.id: m for m in ms}
        missing = [i for i in ids if i not in known]
        if missing:
            raise KeyError(f"unknown mutant(s) {missing}; `kvmc mutate --list` shows them")
        return [known[i] for i in ids]
    rng = random.Random(seed)
    if per_module is not None:
        by: dict[str, list[Mutant]] = {}
        for m in ms:
            by.setdefault(m.module, []).append(m)
        picked = [m for group in by.values() for m in rng.sample(group, min(per_module, len(group)))]
        ms = [m for m in ms if m in picked]
    if max_mutants is not None and len(ms) > max_mutants:
        keep = set(rng.sample(range(len(ms)), max_mutants))
        ms = [m for i, m in enumerate(ms) if i in keep]
    return ms


def _classify(mid: str, configs: list[str], searched: list[dict[str, Any]], equiv_timeout_s: float,
              divergence_s: float, preset: str = "current",
              tell: Callable[[dict[str, Any]], None] = lambda d: None) -> dict[str, Any]:
    """A survivor of preset `preset`: equivalent (z3), or which gap, with evidence (module docstring)."""
    from model.designs import PRESETS

    from checker.mutation import equivalence
    from checker.mutation.diff import divergence, inclusion
    from checker.mutation.operators import design_for, parse_id

    m = parse_id(mid)
    base = PRESETS[preset]
    design = design_for(m, base)
    eqs = []
    for c in configs:
        tell(dict(engine="equivalence", config=c))
        e = equivalence.check(c, design, base, int(equiv_timeout_s * 1000))
        eqs.append(dict(config=c, verdict=e.verdict, how=e.how, seconds=round(e.seconds, 1), fields=e.fields[:8],
                        witness={k: list(v) for k, v in list(e.witness.items())[:6]}, reason=e.reason))
        if e.verdict != "equivalent":
            break  # one config where the step differs is enough: it is not equivalent
    if all(e["verdict"] == "equivalent" for e in eqs):
        how = sorted({e["how"] for e in eqs})
        return dict(status="equivalent", equivalence=eqs,
                    evidence=f"the step equals the model's on {', '.join(configs)} ({' and '.join(how)})")
    # (config, point): the explicit search saw every reachable state of that one point (None: of all)
    exhausted = {(s["config"], s.get("point")) for s in searched if s["engine"] == "explicit" and s.get("exhausted")}
    div = None
    t_div = time.perf_counter()
    for i, c in enumerate(configs):  # cheapest first; the time split over what is left
        left = divergence_s - (time.perf_counter() - t_div)
        if left < 5:
            break
        tell(dict(engine="divergence", config=c))
        d = divergence(c, base, design, max(5.0, left / (len(configs) - i)))
        if d.get("found"):
            div = dict(d, config=c)
            break
    depths = "; ".join(f"{s['engine']} on {s['config']}"
                       + (f" point {s['point']}" if s.get("point") is not None else "") + f" to depth {s['depth']}"
                       + (" (every reachable state of its points)" if s.get("exhausted") else "") for s in searched)
    lemmas = sorted({f"{d} on {s['config']}" for s in searched for d in s.get("lemmas_dropped") or []})
    if lemmas:  # `kvmc check` reports these as findings: a fact of the model the mutant breaks
        depths += f"; lemmas it breaks (a finding of kvmc check): {', '.join(lemmas)}"
    if div is not None and div.get("only_mutant") == 0 and div.get("only_model"):
        # at its first divergence the mutant only lacks successors: is it a restriction everywhere?
        left = max(10.0, divergence_s - (time.perf_counter() - t_div))
        tell(dict(engine="inclusion", config=div["config"]))
        inc = inclusion(div["config"], base, design, left)
        if not inc["extra"]:
            scope = ("every reachable state of its explicit points" if inc["complete"] else
                     f"the {inc['states']} reachable states compared to depth {inc['depth']}")
            return dict(status="survived", gap="restriction", equivalence=eqs, divergence=div,
                        evidence=f"a restriction: on {div['config']}, from {scope}, every successor of the mutant's is "
                                 f"one of the model's ({inc['fewer']} states lose some; first at parameter point "
                                 f"{div['point']}, depth {div['depth']}), so it reaches no state the model does not and "
                                 f"no safety property can see it: only progress, or a witness it no longer meets; "
                                 f"searched: {depths}")
    if div is not None:
        where = (f"on {div['config']}, parameter point {div['point']}, at depth {div['depth']} ({div['note']}"
                 + (f"; fields {', '.join(f'{k}: {a} -> {b}' for k, (a, b) in div['fields'].items())}" if div.get("fields")
                    else "") + ")")
        if (div["config"], None) in exhausted or (div["config"], div.get("point")) in exhausted:
            return dict(status="survived", gap="property gap", equivalence=eqs, divergence=div,
                        evidence=f"diverges {where}, and the mutant's explicit search saw every reachable state of "
                                 f"those points without a property failing")
        return dict(status="survived", gap="search gap", equivalence=eqs, divergence=div,
                    evidence=f"diverges {where}; searched: {depths}")
    z3_differs = [e for e in eqs if e["verdict"] == "differs"]
    if z3_differs:
        e = z3_differs[0]
        wit = ", ".join(f"{k}: {a} vs {b}" for k, (a, b) in list(e["witness"].items())[:4])
        return dict(status="survived", gap="search gap", equivalence=eqs, divergence=div,
                    evidence=f"no divergence on the reachable states of the explicit points, but z3 finds a state the "
                             f"lemmas allow where the step differs on {e['config']} ({wit}): outside the explicit "
                             f"points, deeper, or unreachable (then the lemmas are too weak to prove it equivalent); "
                             f"searched: {depths}")
    return dict(status="survived", gap="unclassified", equivalence=eqs, divergence=div,
                evidence=f"no divergence on the explicit points and z3 gave no answer "
                         f"({'; '.join(e['reason'] for e in eqs if e['reason'])}); searched: {depths}")


def mutate(mutants: list[Mutant], configs: list[str], budget_s: float = DEFAULT_BUDGET_S, workers: int = 1,
           equiv_timeout_s: float = EQUIV_TIMEOUT_S, divergence_s: float = DIVERGENCE_S,
           progress: Callable[[str], None] | None = None, into: list[Outcome] | None = None,
           cache: Any = None, conform: str | None = None, conform_examples: int = CONFORM_EXAMPLES,
           design: str = "current") -> list[Outcome]:
    """Every mutant's outcome (module docstring). `into`: a list the outcomes are put in as they
    are created (status "pending" until settled), so an interrupted run can report what it settled.
    `cache` (baseline_cache.BaselineCache): the model's own baseline searches and first-step BMC,
    reused from an earlier run on the same sources. `conform` (a SGLang release, installed): the
    survivors are run through `kvmc conform` against it before they are classified
    (checker/mutation/conformance.py); one whose rows disagree with SGLang where the model agrees
    is killed by conformance. `design`: the preset the mutants are made of and measured against
    (its release is the one `conform` must name); a mutant of a line no config of it runs is
    `unreached`, and its evidence names the presets whose configs do run it."""
    from checker.mutation import runner
    from checker.mutation.coverage import configs_running, presets_running

    say = progress or (lambda msg: None)
    outcomes: list[Outcome] = into if into is not None else []
    for m in mutants:
        run_in = configs_running(m.file, m.line, configs, design)
        outcomes.append(Outcome(m, run_in, "unreached" if not run_in else "pending"))
    unreached = [o for o in outcomes if o.status == "unreached"]
    if unreached:
        say(f"coverage: {len(unreached)} mutant(s) of lines no config of {design} runs; which presets run them")
        elsewhere = presets_running([(o.mutant.file, o.mutant.line) for o in unreached], configs, design)
        for o in unreached:
            names = elsewhere[(o.mutant.file, o.mutant.line)]
            o.evidence = (f"no config of {design} runs {o.mutant.file}:{o.mutant.line}; "
                          + (f"the configs of {', '.join(names)} do: `kvmc mutate --design {names[0]}` checks it"
                             if names else f"nor do they under any other preset ({len(configs)} config(s) looked at)"))
    used = sorted({c for o in outcomes for c in o.configs}, key=configs.index)
    baselines = {}
    for c in used:
        say(f"baseline: the model's explicit search on {c}")
        baselines[c] = runner.baseline(c, min(120.0, budget_s), cache, design)
        # a release's own findings (docs/findings.md; `current` has one on aligned_page1 and
        # aligned_chunk_cache, finding 12): they kill nothing there
        for p, why in baselines[c].model_violates.items():
            say(f"baseline: {p} on {c}: {why}; kills by it there do not count")
    todo = [o for o in outcomes if o.status == "pending"]
    # what the model itself breaks at the first steps of each config's full bounds, known before
    # the hunt (the check after it, below, covers deeper kills)
    hunted_in = sorted({c for o in todo for c in o.configs}, key=configs.index)

    held: dict[tuple[str, str], int] = {}  # (config, property) -> depth the model holds it to

    def found(j: runner.Job) -> None:
        from specs.properties import PROPERTIES

        r = j.result or {}
        for p in PROPERTIES:
            if p not in (r.get("violated") or {}) and r.get("reached", -1) >= 0:
                held[(j.key, p)] = r["reached"]
        for p, d in (r.get("violated") or {}).items():
            baselines[j.key].model_violates[p] = f"the model violates it at depth {d} (BMC)"
            say(f"model check: {p} on {j.key}: the model violates it at depth {d} (BMC); kills by it there do not count")

    if todo:
        findings_s = min(FINDINGS_S, budget_s)
        fresh = []
        for c in hunted_in:
            hit = cache.get("findings", c, FINDINGS_DEPTH, findings_s, design) if cache is not None else None
            if hit is None:
                fresh.append(c)
            else:
                found(runner.Job(c, runner.model_findings, (), findings_s, result=hit))
        say(f"model check: the model's BMC to depth {FINDINGS_DEPTH} on {len(fresh)} config(s)"
            + (f" ({len(hunted_in) - len(fresh)} from the baseline cache)" if len(fresh) < len(hunted_in) else ""))

        def found_fresh(j: runner.Job) -> None:
            found(j)
            r = j.result or {}
            if cache is not None and set(r) == {"violated", "reached"}:  # not an error or a stopped job
                cache.put("findings", j.key, (FINDINGS_DEPTH, findings_s, design), r)

        runner.run_jobs([runner.Job(c, runner.model_findings, (c, FINDINGS_DEPTH, findings_s, design), findings_s)
                         for c in fresh], workers, found_fresh)
    by_id = {o.mutant.id: o for o in todo}
    count = [0]

    def hunted(j: runner.Job) -> None:
        o = by_id[j.key]
        r = j.result or {}
        count[0] += 1
        o.status = {"stopped": "survived"}.get(r.get("status", "error"), r.get("status", "error"))
        o.seconds, o.kill, o.searched = r.get("seconds", 0.0), r.get("kill"), r.get("searched", [])
        o.stopped, o.error = r.get("stopped", ""), r.get("error", "") + (f" at {r['where']}" if r.get("where") else "")
        o.evidence = r.get("evidence", "")
        if r.get("live") is not None:
            o.live = r["live"]
        what = o.status + (f" by {o.kill['engine']} on {o.kill['config']}: {o.kill['property']} {o.kill['how']}"
                           f" at depth {o.kill['depth']}" if o.kill else "") + (f" ({o.error})" if o.error else "")
        say(f"[{count[0]}/{len(todo)}] {o.mutant.id}: {what}, {o.seconds:.1f}s")

    jobs = [runner.Job(o.mutant.id, runner.hunt, (o.mutant.id, o.configs, budget_s, baselines, design), budget_s)
            for o in todo]
    runner.run_jobs(jobs, workers, hunted)
    # a kill on the full bounds (BMC, random runs) counts only if the model holds that property
    # there to that depth (runner.model_check, once per config and property), or, where that BMC
    # cannot reach the depth and found no violation, on the kill's own instance (runner.confirm_at:
    # the model's explicit search of the counterexample's parameters to its depth); the mutants
    # whose kill the model shares, or that neither check confirms, are checked again without that
    # property on that config
    def unconfirmed(o: Outcome) -> bool:
        k = o.kill
        return bool(o.status == "killed" and k and k["engine"] in ("bmc", "random") and k["how"] == "violated"
                    and not k.get("confirmed"))

    for _round in range(3):
        need: dict[tuple[str, str], int] = {}
        unfinished: dict[tuple[str, str], str] = {}
        for o in todo:
            k = o.kill
            if unconfirmed(o) and k and held.get((k["config"], k["property"]), -1) < k["depth"]:
                key = (k["config"], k["property"])
                need[key] = max(need.get(key, 0), k["depth"])
        if not need:
            break

        def checked(j: runner.Job) -> None:
            c, p = j.key.split("/", 1)
            r = j.result or {}
            d = need[(c, p)]
            if r.get("violated") is not None:
                baselines[c].model_violates[p] = f"the model violates it at depth {r['violated']} (BMC)"
            elif r.get("reached", -1) >= d:
                held[(c, p)] = d
                return
            else:
                unfinished[(c, p)] = (f"the model's BMC did not finish depth {d} in the time "
                                      f"({r.get('stopped') or r.get('error') or 'reached ' + str(r.get('reached'))})")
                say(f"model check: {p} on {c}: {unfinished[(c, p)]}; each kill by it there is checked on its own instance")
                return
            say(f"model check: {p} on {c}: {baselines[c].model_violates[p]}; kills by it there do not count")

        runner.run_jobs([runner.Job(f"{c}/{p}", runner.model_check, (c, p, d, budget_s, design), budget_s)
                         for (c, p), d in need.items()], workers, checked)
        at = [o for o in todo if unconfirmed(o) and o.kill and (o.kill["config"], o.kill["property"]) in unfinished
              and o.kill.get("point")]

        def confirmed(j: runner.Job) -> None:
            o = by_id[j.key]
            k = o.kill or {}
            if (j.result or {}).get("holds"):
                k["confirmed"] = (f"the model holds {k['property']} on the kill's instance to depth {k['depth']} "
                                  "(its explicit search of those parameters)")
            say(f"model check: {o.mutant.id}'s kill ({k['property']} on {k['config']}, depth {k['depth']}) "
                + ("confirmed on its instance" if k.get("confirmed") else "not confirmed on its instance")
                + f" ({(j.result or {}).get('stopped') or 'explicit search of the model'})")

        runner.run_jobs([runner.Job(o.mutant.id, runner.confirm_at, (o.kill["config"], o.kill["point"], o.kill["property"],
                                                                     o.kill["depth"], budget_s, design), budget_s)
                         for o in at if o.kill], workers, confirmed)
        for (c, p), why in unfinished.items():
            if any(unconfirmed(o) and o.kill and (o.kill["config"], o.kill["property"]) == (c, p) for o in todo):
                baselines[c].model_violates[p] = why
                say(f"model check: {p} on {c}: {why}, and a kill by it is not confirmed on its instance; "
                    "kills by it there do not count")
        redo = [o for o in todo if unconfirmed(o) and o.kill
                and o.kill["property"] in baselines[o.kill["config"]].model_violates]
        if not redo:
            break
        count[0] -= len(redo)
        for o in redo:
            say(f"{o.mutant.id}: its kill ({o.kill['property']} on {o.kill['config']}) is the model's own: checked again")
            o.status, o.kill = "pending", None
        runner.run_jobs([runner.Job(o.mutant.id, runner.hunt, (o.mutant.id, o.configs, budget_s, baselines, design),
                                    budget_s) for o in redo], workers, hunted)
    findings = {c: dict(b.model_violates) for c, b in baselines.items() if b.model_violates}
    for o in todo:  # the report says which kills a finding of the model's would have faked
        if findings and o.status in ("killed", "survived") and set(o.configs) & set(findings):
            o.excluded = {c: sorted(findings[c]) for c in o.configs if c in findings}
    survivors = [o for o in todo if o.status == "survived"]
    if survivors and conform is not None:
        from checker.mutation import conformance
        from upstream.serve import shared_workers

        say(f"conformance: the model against SGLang {conform} ({conform_examples} scenarios a row), then "
            f"{len(survivors)} survivor(s)")
        # one cpu conformance worker on one release, one call at a time (jobs=1), for the baseline and every
        # survivor: SGLang is imported once and each call forks from its set-up state (upstream/serve.py)
        with shared_workers():
            base = conformance.baseline(conform, conform_examples, CONFORM_SEED)
            for o in survivors:
                k = conformance.conform_kill(o.mutant.id, conform, conform_examples, CONFORM_SEED, base)
                if k is not None:
                    o.status, o.kill, o.evidence = "killed", k, k.pop("evidence", "")
                    o.seconds += k["seconds"]  # the hunt's budget, then the conformance run
                    say(f"  {o.mutant.id}: killed by conformance ({k['property']}: {k['disagreed']} of {k['scenarios']} "
                        f"scenarios disagree), {k['seconds']:.1f}s")
                else:
                    say(f"  {o.mutant.id}: agrees with SGLang {conform} wherever the model does")
        survivors = [o for o in survivors if o.status == "survived"]
    if survivors:
        say(f"classifying {len(survivors)} survivor(s): equivalence (z3) and divergence")

    def classified(j: runner.Job) -> None:
        o = by_id[j.key]
        r = j.result or {}
        if r.get("status") == "equivalent":
            o.status = "equivalent"
        elif r.get("status") == "survived":
            o.gap = r.get("gap", "unclassified")
        else:
            o.gap = "unclassified"
            r = dict(r, evidence=f"classification {r.get('status')}: {r.get('stopped') or r.get('error')}")
        o.evidence = r.get("evidence", "")
        o.equivalence, o.divergence = r.get("equivalence", []), r.get("divergence")
        say(f"  {o.mutant.id}: {o.status}{' (' + o.gap + ')' if o.gap else ''}")

    cjobs = []
    for o in survivors:  # where its step differs (as terms), cheapest config first
        cs = sorted(o.live if o.live else o.configs, key=lambda c: baselines[c].seconds if c in baselines else 0.0)
        cjobs.append(runner.Job(o.mutant.id, _classify, (o.mutant.id, cs, o.searched, equiv_timeout_s, divergence_s, design),
                                equiv_timeout_s * len(cs) + divergence_s + 60))
    runner.run_jobs(cjobs, workers, classified)
    return outcomes


# -- the report --------------------------------------------------------------------------------
STATUSES = ("killed", "survived", "equivalent", "unreached", "invalid", "error")


def summary(outcomes: list[Outcome], key: Callable[[Outcome], str]) -> list[dict[str, Any]]:
    """One row per group: counts per status, the kill rate, kill times."""
    groups: dict[str, list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault(key(o), []).append(o)
    rows = []
    for g, os_ in groups.items():
        row: dict[str, Any] = {"group": g, "mutants": len(os_)}
        for st in STATUSES:
            row[st] = sum(o.status == st for o in os_)
        counted = row["killed"] + row["survived"]
        row["kill_rate"] = round(row["killed"] / counted, 3) if counted else None
        times = [o.seconds for o in os_ if o.status == "killed"]
        row["median_kill_s"] = round(statistics.median(times), 1) if times else None
        row["max_kill_s"] = round(max(times), 1) if times else None
        rows.append(row)
    return rows


def _rate(rows: list[dict[str, Any]]) -> str:
    k = sum(r["killed"] for r in rows)
    s = sum(r["survived"] for r in rows)
    return f"{k}/{k + s} = {k / (k + s):.0%}" if k + s else "n/a"


def render_text(outcomes: list[Outcome], budget_s: float) -> str:
    rows = summary(outcomes, lambda o: o.module)
    out = [f"{len(outcomes)} mutants, budget {budget_s:.0f}s each: kill rate {_rate(rows)} "
           "(killed / (killed + survived); equivalent, unreached and invalid not counted)", ""]
    head = f"{'module':16s} {'mutants':>7s} {'killed':>6s} {'surv.':>5s} {'equiv.':>6s} {'unreach.':>8s} {'invalid':>7s} " \
           f"{'rate':>5s} {'median kill':>11s}"
    out.append(head)
    for r in rows:
        rate = f"{r['kill_rate']:.0%}" if r["kill_rate"] is not None else "-"
        med = f"{r['median_kill_s']}s" if r["median_kill_s"] is not None else "-"
        out.append(f"{r['group']:16s} {r['mutants']:7d} {r['killed']:6d} {r['survived']:5d} {r['equivalent']:6d} "
                   f"{r['unreached']:8d} {r['invalid'] + r['error']:7d} {rate:>5s} {med:>11s}")
    surv = [o for o in outcomes if o.status == "survived"]
    if surv:
        out += ["", "survivors:"]
        for o in surv:
            out.append(f"  {o.mutant.id} [{o.gap}] {o.mutant.describe()}")
            out.append(f"      {o.evidence}" + (f"; {o.stopped}" if o.stopped else ""))
    eq = [o for o in outcomes if o.status == "equivalent"]
    if eq:
        out += ["", "equivalent:"]
        out += [f"  {o.mutant.id}: {o.mutant.describe()} ({o.evidence})" for o in eq]
    far = [o for o in outcomes if o.status == "unreached"]
    if far:
        out += ["", "unreached:"]
        out += [f"  {o.mutant.id}: {o.evidence or o.mutant.describe()}" for o in far]
    bad = [o for o in outcomes if o.status in ("invalid", "error")]
    if bad:
        out += ["", "invalid (the mutated model raises) or errors:"]
        out += [f"  {o.mutant.id}: {o.error}" for o in bad]
    return "\n".join(out)


def render_markdown(outcomes: list[Outcome], budget_s: float, command: str, machine: str) -> str:
    rows = summary(outcomes, lambda o: o.module)
    crows = summary([o for o in outcomes if o.configs], lambda o: o.kill["config"] if o.kill else
                    (o.configs[0] if len(o.configs) == 1 else "several (not killed)"))
    orows = summary(outcomes, lambda o: o.mutant.op)
    out = [f"Command: `{command}`; {machine}. Kill rate {_rate(rows)} (killed / (killed + survived)).", ""]

    def table(rs: list[dict[str, Any]], first: str) -> list[str]:
        lines = [f"| {first} | mutants | killed | survived | equivalent | unreached | invalid | kill rate | median / max s to kill |",
                 "|---|---|---|---|---|---|---|---|---|"]
        for r in rs:
            rate = f"{r['kill_rate']:.0%}" if r["kill_rate"] is not None else "-"
            t = f"{r['median_kill_s']} / {r['max_kill_s']}" if r["median_kill_s"] is not None else "-"
            lines.append(f"| {r['group']} | {r['mutants']} | {r['killed']} | {r['survived']} | {r['equivalent']} | "
                         f"{r['unreached']} | {r['invalid'] + r['error']} | {rate} | {t} |")
        return lines

    found: dict[str, set[str]] = {}
    for o in outcomes:
        for c, ps in (o.excluded or {}).items():
            found.setdefault(c, set()).update(ps)
    if found:
        out += ["Properties the model itself breaks (or could not be shown to hold to a kill's depth), which kill no "
                "mutant on that config: " + "; ".join(f"{', '.join(sorted(ps))} on {c}" for c, ps in sorted(found.items())) + ".",
                ""]
    out += ["By module:", ""] + table(rows, "module") + [""]
    out += ["By config (the config that killed it; survivors by the config that runs them):", ""] + table(crows, "config") + [""]
    out += ["By operator:", ""] + table(orows, "operator") + [""]
    surv = [o for o in outcomes if o.status == "survived"]
    if surv:
        out += ["Survivors:", "", "| mutant | change | gap | evidence |", "|---|---|---|---|"]
        for o in surv:
            ev = (o.evidence + (f"; {o.stopped}" if o.stopped else "")).replace("|", "\\|")
            out.append(f"| `{o.mutant.id}` | `{o.mutant.before}` -> `{o.mutant.after}` | {o.gap} | {ev} |".replace("\n", " "))
        out.append("")
    eq = [o for o in outcomes if o.status == "equivalent"]
    if eq:
        out += ["Equivalent (proved):", "", "| mutant | change | how |", "|---|---|---|"]
        out += [f"| `{o.mutant.id}` | `{o.mutant.before}` -> `{o.mutant.after}` | {o.evidence} |".replace("\n", " ") for o in eq]
        out.append("")
    return "\n".join(out)
