import pytest

from tribuild.engine import CycleError, derived, input_query

from .conftest import run


@input_query
def edges(db, node): ...


@derived
def reach(db, node):
    """Number of nodes reachable from ``node`` (the edges input must be acyclic)."""
    return 1 + sum(reach(db, n) for n in edges(db, node))


@derived
def selfish(db):
    return selfish(db)


def test_self_cycle_names_the_query_twice(db):
    with pytest.raises(CycleError) as info:
        selfish(db)
    assert info.value.cycle == ["selfish()", "selfish()"]


def test_cycle_message_names_every_query_in_order(db):
    db.set(edges, "a", ("b",))
    db.set(edges, "b", ("c",))
    db.set(edges, "c", ("a",))
    with pytest.raises(CycleError) as info:
        reach(db, "a")
    assert info.value.cycle == ["reach('a')", "reach('b')", "reach('c')", "reach('a')"]
    assert "reach('a') -> reach('b') -> reach('c') -> reach('a')" in str(info.value)


def test_db_is_usable_after_a_cycle(db):
    db.set(edges, "a", ("b",))
    db.set(edges, "b", ("a",))
    db.set(edges, "z", ())
    with pytest.raises(CycleError):
        reach(db, "a")
    assert reach(db, "z") == 1
    db.set(edges, "b", ())
    assert run(db, reach, "a") == (2, [("reach", ("b",)), ("reach", ("a",))])


def test_cycle_found_while_verifying_old_dependencies(db):
    db.set(edges, "a", ("b",))
    db.set(edges, "b", ())
    assert reach(db, "a") == 2
    db.set(edges, "b", ("a",))
    with pytest.raises(CycleError) as info:
        reach(db, "a")
    assert info.value.cycle == ["reach('a')", "reach('b')", "reach('a')"]
    db.set(edges, "b", ())
    assert run(db, reach, "a") == (2, [("reach", ("b",))])
