"""``queries.walks`` on random directed graphs: the shortest cycle through each node equals a
brute-force search, whatever order the nodes are asked in, before and after edits of the
edges; and the work over a chain is linear in its length."""

from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.budget import examples
from tribuild.engine import Database, derived, input_query
from tribuild.queries.walks import acyclic_and_settled, settle_deepest_first, shortest_cycle


@input_query
def edges(db, node: int): ...  # an input: set by the tests, never computed


READS = [0]  # how many times a walk listed a node's successors


def _successors(db, node: tuple[int]) -> list[tuple[int]]:
    READS[0] += 1
    return [(n,) for n in edges(db, node[0])]


@derived
def cycle(db, node: int) -> tuple[int, ...] | None:
    start = (node,)
    settle_deepest_first(
        db, cycle, start, lambda n: _successors(db, n), acyclic_and_settled(db, cycle)
    )
    found = shortest_cycle(db, cycle, start, lambda n: _successors(db, n))
    return tuple(n for (n,) in found) if found else None


def _brute_length(graph: dict[int, tuple[int, ...]], start: int) -> int | None:
    """The number of edges of the shortest cycle through ``start``, by breadth-first search."""
    distance = {start: 0}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for after in graph[node]:
            if after == start:
                return distance[node] + 1
            if after not in distance:
                distance[after] = distance[node] + 1
                queue.append(after)
    return None


def _assert_cycle(graph: dict[int, tuple[int, ...]], start: int, found) -> None:
    length = _brute_length(graph, start)
    if length is None:
        assert found is None
        return
    assert found is not None and found[0] == found[-1] == start
    assert len(found) - 1 == length
    assert all(b in graph[a] for a, b in zip(found, found[1:], strict=False))


def _graph(n: int) -> st.SearchStrategy[dict[int, tuple[int, ...]]]:
    targets = st.lists(st.integers(0, n - 1), max_size=3, unique=True).map(tuple)
    return st.fixed_dictionaries({i: targets for i in range(n)})


@st.composite
def _cases(draw):
    n = draw(st.integers(1, 9))
    graphs = draw(st.lists(_graph(n), min_size=1, max_size=3))
    orders = [draw(st.permutations(range(n))) for _ in graphs]
    return graphs, orders


@settings(max_examples=examples(150), deadline=None)
@given(_cases())
def test_shortest_cycle_matches_a_brute_force_search_in_any_order(case):
    graphs, orders = case
    db = Database()
    for graph, order in zip(graphs, orders, strict=True):
        for node, targets in graph.items():
            db.set(edges, node, targets)
        for node in order:
            _assert_cycle(graph, node, cycle(db, node))


def test_a_chain_is_walked_once():
    """Asked from the deepest node up, or from the top down, each node's successors are listed
    a bounded number of times: a search afresh from each node listed n²/2 of them."""
    n = 2000
    for order in (range(n), reversed(range(n))):
        db = Database()
        for node in range(n):
            db.set(edges, node, (node + 1,) if node + 1 < n else ())
        READS[0] = 0
        for node in order:
            assert cycle(db, node) is None
        assert READS[0] <= 3 * n, READS[0]


def test_closing_a_chain_makes_every_node_cyclic():
    """Verifying the old answers after the edit re-runs each node's search while its
    neighbour's old answer is being verified: no node on a cycle is asked by another."""
    n = 200
    db = Database()
    for node in range(n):
        db.set(edges, node, (node + 1,) if node + 1 < n else ())
    assert all(cycle(db, node) is None for node in reversed(range(n)))
    db.set(edges, n - 1, (0,))
    assert cycle(db, n // 2) == (*range(n // 2, n), *range(n // 2 + 1))
    assert all(cycle(db, node) == (*range(node, n), *range(node + 1)) for node in range(n))
