"""Random DAGs of derived queries over random inputs, under random batches of input edits:
1. every value equals a clean recomputation;
2. the executed set is exactly the queries with a dependency that changed (an input set to a
   different value, or a query whose value differs from before): minimality, as in "Build
   Systems à la Carte"; coarsening operations (``% 3``, parity) make backdating happen;
3. the same holds when the database is saved and loaded into a fresh one between batches.
"""

import tempfile
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.budget import examples
from tribuild.engine import Database, Durability, derived, input_query

OPS = {
    "sum": sum,
    "mod3": lambda vs: sum(vs) % 3,
    "max": lambda vs: max(vs, default=0),
    "parity": lambda vs: sum(vs) % 2,
}


@dataclass(frozen=True)
class Node:
    op: str
    nodes: tuple[int, ...]
    inputs: tuple[int, ...]


@dataclass(frozen=True)
class Case:
    nodes: tuple[Node, ...]
    durabilities: tuple[Durability, ...]
    initial: tuple[int, ...]
    batches: tuple[tuple[tuple[int, int], ...], ...]
    reload: tuple[bool, ...]


@st.composite
def cases(draw, max_nodes=8, max_inputs=4, max_batches=5):
    n_inputs = draw(st.integers(1, max_inputs))
    n_nodes = draw(st.integers(1, max_nodes))
    nodes = tuple(
        Node(
            draw(st.sampled_from(sorted(OPS))),
            tuple(draw(st.sets(st.integers(0, i - 1), max_size=3))) if i else (),
            tuple(draw(st.sets(st.integers(0, n_inputs - 1), max_size=2))),
        )
        for i in range(n_nodes)
    )
    values = st.integers(0, 4)
    edit = st.tuples(st.integers(0, n_inputs - 1), values)
    batches = draw(
        st.lists(
            st.lists(edit, min_size=1, max_size=3).map(tuple), min_size=1, max_size=max_batches
        )
    )
    return Case(
        nodes,
        tuple(draw(st.lists(st.sampled_from(Durability), min_size=n_inputs, max_size=n_inputs))),
        tuple(draw(st.lists(values, min_size=n_inputs, max_size=n_inputs))),
        tuple(batches),
        tuple(draw(st.lists(st.booleans(), min_size=len(batches), max_size=len(batches)))),
    )


def clean_values(case, inputs):
    values = []
    for node in case.nodes:
        values.append(
            OPS[node.op]([values[d] for d in node.nodes] + [inputs[k] for k in node.inputs])
        )
    return values


def make_queries(case):
    @input_query
    def prop_input(db, k): ...

    @derived
    def prop_node(db, i):
        node = case.nodes[i]
        return OPS[node.op](
            [prop_node(db, d) for d in node.nodes] + [prop_input(db, k) for k in node.inputs]
        )

    return prop_input, prop_node


def check(case):
    prop_input, prop_node = make_queries(case)
    db = Database()
    inputs = list(case.initial)
    for k, value in enumerate(inputs):
        db.set(prop_input, k, value, durability=case.durabilities[k])
    old = clean_values(case, inputs)
    assert [prop_node(db, i) for i in reversed(range(len(case.nodes)))] == old[::-1]
    with tempfile.TemporaryDirectory() as store:
        for batch, reload in zip(case.batches, case.reload, strict=True):
            if reload:
                db.save(store, "prop")
                db = Database.load(store, "prop")
                assert db.store_report.status == "loaded"
                for k, value in enumerate(inputs):
                    db.set(prop_input, k, value, durability=case.durabilities[k])
            changed_inputs = set()
            for k, value in batch:
                if value != inputs[k]:
                    changed_inputs.add(k)
                    inputs[k] = value
                db.set(prop_input, k, value, durability=case.durabilities[k])
            new = clean_values(case, inputs)
            with db.log() as log:
                got = [prop_node(db, i) for i in reversed(range(len(case.nodes)))]
            assert got == new[::-1]
            expected = {
                i
                for i, node in enumerate(case.nodes)
                if changed_inputs & set(node.inputs) or any(old[d] != new[d] for d in node.nodes)
            }
            executed = [args[0] for _, args in log.executed]
            assert sorted(executed) == sorted(expected)
            assert len(executed) == len(set(executed))
            old = new


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_incremental_equals_clean_and_is_minimal(case):
    check(case)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(max_nodes=30, max_inputs=8, max_batches=12))
def test_incremental_equals_clean_and_is_minimal_long(case):
    check(case)
