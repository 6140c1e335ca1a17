"""Answers about the graph: why a query re-ran, and the graph itself for networkx.

Terms:
- *step*: one key of a why-chain, ``Step(query_name, args, revision)``: for the first step the
  revision it last ran at, for the others the revision their value changed at.
- *why-chain*: from a derived key back to the input whose change made it run last: each step
  is the dependency its predecessor found changed. The chain follows a dependency's own
  cause only while that record still describes the run that produced the change
  (``executed_at`` equals the revision the predecessor saw it change at).
"""

from __future__ import annotations

from tribuild.base.record import record
from tribuild.engine.memo import FIRST_RUN, key_label

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from tribuild.engine.database import Database
    from tribuild.engine.memo import Memo
    from tribuild.engine.query import Query

NEVER_RAN = "it had never run"  # the reason of a chain of one step: a key new to the store


@record
class Step:
    query: str
    args: tuple[Any, ...]
    revision: int


def why(db: Database, query: Query, args: tuple[Any, ...]) -> list[Step]:
    """The chain for the last run of ``query(*args)``; [] if it never ran in this database."""
    with db.gate.cond:
        return _chain(db, db.find_memo(query, args))


def _chain(db: Database, memo: Memo | None) -> list[Step]:
    if memo is None or memo.deps is None or memo.query.is_input:
        return []
    chain = [Step(memo.query.name, memo.args, memo.executed_at)]
    while memo.cause >= 0:
        dep = db.memo_at(memo.cause)
        chain.append(Step(dep.query.name, dep.args, memo.cause_rev))
        if dep.query.is_input or dep.executed_at != memo.cause_rev:
            break
        memo = dep
    return chain


def explain(
    db: Database,
    query: Query,
    args: tuple[Any, ...],
    label: Callable[[str, tuple[Any, ...]], str] = key_label,
) -> str:
    """``why`` as sentences, one step a line; ``label(query_name, args)`` names a key (the
    engine's default is the call, ``ir(InstanceKey(...))``; a client may say it in its own
    words)."""
    chain = why(db, query, args)
    if not chain:
        return f"{label(query.name, args)} has not run in this database"
    head, *rest = chain
    lines = [f"{label(head.query, head.args)} ran at revision {head.revision}"]
    for step in rest:
        lines.append(
            f"  because {label(step.query, step.args)} changed at revision {step.revision}"
        )
    if not rest:
        memo = db.find_memo(query, args)
        assert memo is not None  # it ran: ``chain`` is not empty
        reason = NEVER_RAN if memo.cause == FIRST_RUN else "its value was not held"
        lines.append(f"  because {reason}")
    return "\n".join(lines)


def graph(db: Database) -> Any:
    """A networkx DiGraph of every key, ``(query_name, args)``, with an edge from each
    dependency to the key that read it; nodes carry ``changed_at``, ``verified_at``,
    ``durability`` and ``input``."""
    import networkx as nx

    g = nx.DiGraph()
    with db.gate.cond:
        memos = list(db.every_memo())
    nodes = [(m.query.name, m.args) for m in memos]
    for node, memo in zip(nodes, memos, strict=True):
        g.add_node(
            node,
            changed_at=memo.changed_at,
            verified_at=memo.verified_at,
            durability=memo.durability,
            input=memo.query.is_input,
        )
    for node, memo in zip(nodes, memos, strict=True):
        for dep in memo.deps or ():
            g.add_edge(nodes[dep], node)
    return g
