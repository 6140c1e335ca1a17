from tribuild.engine import Durability, derived, input_query

from .conftest import run


@input_query
def source(db, name): ...


@derived
def level(db, n):
    return source(db, "std") if n == 0 else level(db, n - 1) + 1


@derived
def user(db):
    return level(db, 3) + len(source(db, "user"))


def _setup(db, std_durability):
    db.set(source, "std", 10, durability=std_durability)
    db.set(source, "user", "ab")
    db.set(source, "other", "x")
    assert user(db) == 15


def test_low_change_skips_verifying_a_high_durability_subgraph(db):
    _setup(db, Durability.HIGH)
    db.set(source, "other", "y")
    with db.log() as log:
        assert level(db, 3) == 13
    assert log.validated == [("level", (3,))]
    assert log.executed == []


def test_without_durability_the_same_change_walks_the_whole_chain(db):
    _setup(db, Durability.LOW)
    db.set(source, "other", "y")
    with db.log() as log:
        assert level(db, 3) == 13
    assert log.validated == [("level", (0,)), ("level", (1,)), ("level", (2,)), ("level", (3,))]


def test_a_memo_reading_low_and_high_inputs_is_low(db):
    _setup(db, Durability.HIGH)
    db.set(source, "other", "y")
    with db.log() as log:
        assert user(db) == 15
    assert log.validated == [("level", (3,)), ("user", ())]
    assert db.stats()["level"].validated == 1


def test_high_change_is_seen_through_the_high_subgraph(db):
    _setup(db, Durability.HIGH)
    db.set(source, "std", 20, durability=Durability.HIGH)
    assert run(db, user) == (
        25,
        [("level", (0,)), ("level", (1,)), ("level", (2,)), ("level", (3,)), ("user", ())],
    )


def test_lowering_an_inputs_durability_keeps_later_edits_visible(db):
    _setup(db, Durability.HIGH)
    db.set(source, "std", 10, durability=Durability.LOW)
    user(db)
    db.set(source, "std", 11, durability=Durability.LOW)
    assert run(db, level, 3) == (
        14,
        [("level", (0,)), ("level", (1,)), ("level", (2,)), ("level", (3,))],
    )
