"""`kvmc graph`: export the explicit engine's reachable state graph as graphviz DOT.

    kvmc graph --design current --config small --depth 3 --out small.dot

Violating states are filled red and labelled with the properties they violate; initial states are
boxes; an edge is labelled with its successor index (the deterministic order of checker/engines/explicit.py,
by which a trace replays). Above `--max-states` nothing is written and the command says how deep
the graph would fit (exit status 2).
"""

from __future__ import annotations

import argparse
from typing import Any


def cmd_graph(args: argparse.Namespace) -> int:
    from specs.configs import CONFIGS
    from specs.properties import PROPERTIES

    from checker.cli.common import UsageError, _choices, build_design, publish, writable_file

    design = build_design(args.design, args.without, args.with_, args.mutant)
    _choices("config", args.config, list(CONFIGS))
    props = args.property or list(PROPERTIES)
    for p in props:
        _choices("property", p, list(PROPERTIES))
    if args.depth <= 0:
        raise UsageError(f"--depth {args.depth} must be a positive number of scheduler iterations")
    if args.max_states <= 0:
        raise UsageError(f"--max-states {args.max_states} must be a positive number of states")
    if not args.out.endswith(".dot"):
        raise UsageError(f"--out {args.out!r} must name a .dot file")
    writable_file(args.out, "--out")  # before the search
    from checker.engines.explicit import StateCapExceeded, export_graph

    try:
        search = export_graph(design, CONFIGS[args.config], props, args.depth, args.out, args.max_states)
    except StateCapExceeded as e:
        raise UsageError(str(e)) from e
    publish(args.out)
    bad = sorted({n for nodes in search.violating.values() for n in nodes})
    print(f"wrote {args.out}: {search.distinct_states} states, {search.graph.number_of_edges()} edges, "
          f"{len(search.points)} parameter points, depth {search.depth_reached}"
          + (f" (every reachable state: exhausted at depth {search.exhausted_at})" if search.exhausted_at is not None else "")
          + f"; {len(bad)} violating state(s)"
          + (f" ({', '.join(f'{k}: {len(v)}' for k, v in search.violating.items())})" if bad else ""))
    return 0


def add_parser(sub: Any) -> None:
    from checker.cli.common import add_design_options
    from checker.engines.explicit import DEFAULT_GRAPH_CAP  # only `kvmc graph` builds this parser

    pg = sub.add_parser("graph", help="write the explicit engine's reachable state graph as graphviz DOT")
    add_design_options(pg)
    pg.add_argument("--property", action="append", default=[], metavar="NAME", help="mark states violating these (default: all)")
    pg.add_argument("--config", required=True, metavar="NAME", help="the bounded config (its explicit bounds are enumerated)")
    pg.add_argument("--depth", type=int, default=3, help="scheduler iterations to explore (default 3)")
    pg.add_argument("--max-states", type=int, default=DEFAULT_GRAPH_CAP, help=f"refuse bigger graphs (default {DEFAULT_GRAPH_CAP})")
    pg.add_argument("--out", required=True, metavar="FILE.dot")
    pg.set_defaults(fn=cmd_graph)
