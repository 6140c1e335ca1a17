"""`tribuild graph`: the file graph of the targets, or (``--queries``) the query graph of the
last build, as dot or JSON on stdout (``tribuild.driver.explain``)."""

from __future__ import annotations

import sys

from tribuild.cli import shared
from tribuild.project import EXIT_OK

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("dot", "json"), default="dot")
    p.add_argument(
        "--queries",
        action="store_true",
        help="the query graph of the last build instead of the file graph",
    )


def run(args) -> int:
    import json

    from tribuild.driver import explain

    graph = explain.graph(shared.project(), args.queries)
    if args.queries and not graph["nodes"]:
        print(
            "tribuild graph: the cache holds no queries yet: run `tribuild build` first",
            file=sys.stderr,
        )
    sys.stdout.write(explain.dot(graph) if args.format == "dot" else json.dumps(graph, indent=1))
    return EXIT_OK
