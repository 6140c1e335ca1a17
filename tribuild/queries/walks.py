"""Walks over graphs whose shape the user writes (imports, constants naming constants) that stay
iterative and linear in the graph's size.

Why: a query that asks for its successors' answers by plain recursion runs out of Python's stack
on a chain of about 90 files or constants, and a query that walks its whole reach afresh does
n²/2 work over a chain of n (the cycle checks of a 10,000-file import chain took minutes). Here
each node's answer is computed once, from its successors' answers, deepest first.

Terms:
- *node*: a query's argument tuple; its *successors* are the nodes it names directly (the files
  it imports, the items a constant's value names).
- *settled*: the query's memo for a node is fresh (``Database.fresh``): asking is a plain hit.
- *acyclic node*: one on no cycle. If a node ``s`` reaches ``t`` and ``t`` is acyclic, ``t``
  does not reach ``s`` (else the two would share a cycle), so a search for a cycle through
  ``s`` may stop at ``t``.

Settledness only decides how much is walked, never an answer: a walk that finds nothing
settled does more work for the same result. The dependencies recorded differ, and each set is
sound: stopping at ``t`` records the dependency on ``t``'s answer that justifies it.
"""

from __future__ import annotations

import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable
    from typing import Any, TypeVar

    Node = TypeVar("Node", bound=tuple[Hashable, ...])

_active = threading.local()  # .queries: the queries a settle walk is under way for, per thread


def acyclic_and_settled(db: Any, query: Any) -> Callable[[Node], bool]:
    """For a query that answers None exactly for acyclic nodes: a node whose answer is settled
    and None. Nothing the walk looks for lies behind it: no cycle passes through it, and the
    nodes it reaches were settled when it was answered."""
    return lambda node: db.fresh(query, *node) and query(db, *node) is None


def settle_deepest_first(
    db: Any,
    query: Any,
    start: Node,
    successors: Callable[[Node], Iterable[Node]],
    settled: Callable[[Node], bool],
) -> None:
    """Ask ``query`` of every node reachable from ``start`` that lies on no cycle (``start``
    excepted), each after its successors, so that each evaluation finds the answers it reads
    settled and nests one query deep. The walk is Tarjan's strongly connected components, with
    an explicit stack; it does not walk into ``settled`` nodes.

    Nodes on a cycle are not asked: one of them could be the one being computed or verified
    further up the stack, and asking it would be a cycle of queries (a chain that an edit
    closes: verifying the old answers re-runs a node that then asks its neighbour). They are
    answered by their own search when asked. The evaluations this walk starts do not walk
    again."""
    walking: set[Any] = _active.__dict__.setdefault("queries", set())
    if query in walking:
        return
    walking.add(query)
    try:
        index = {start: 0}  # the order nodes were reached in
        low = {start: 0}  # the earliest node reachable back from each, while on the stack
        component_stack = [start]
        on_stack = {start}
        named_itself: set[Node] = set()
        work = [(start, iter(successors(start)))]
        while work:
            node, rest = work[-1]
            after = next(rest, None)
            if after is not None:
                if after == node:
                    named_itself.add(node)
                if after in index:
                    if after in on_stack:
                        low[node] = min(low[node], index[after])
                elif not settled(after):
                    index[after] = low[after] = len(index)
                    component_stack.append(after)
                    on_stack.add(after)
                    work.append((after, iter(successors(after))))
                continue
            work.pop()
            if work:
                above = work[-1][0]
                low[above] = min(low[above], low[node])
            if low[node] != index[node]:
                continue
            top = component_stack.pop()
            on_stack.discard(top)
            if top == node:  # a component of one node: asked unless it names itself
                if node != start and node not in named_itself:
                    query(db, *node)
                continue
            while top != node:
                top = component_stack.pop()
                on_stack.discard(top)
    finally:
        walking.discard(query)


def shortest_cycle(
    db: Any, query: Any, start: Node, successors: Callable[[Node], Iterable[Node]]
) -> list[Node] | None:
    """The shortest chain of nodes from ``start`` back to itself (first and last ``start``), or
    None. ``query(node)`` must be None exactly for acyclic nodes: the breadth-first search stops
    at each node ``acyclic_and_settled`` accepts."""
    settled = acyclic_and_settled(db, query)
    parent: dict[Node, Node] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for after in successors(node):
                if after == start:
                    back = []
                    while node != start:
                        back.append(node)
                        node = parent[node]
                    return [start, *reversed(back), start]
                if after in parent:
                    continue
                parent[after] = node
                if settled(after):
                    continue
                following.append(after)
        frontier = following
    return None
