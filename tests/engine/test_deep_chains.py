import sys

from tribuild.engine import Durability, derived, input_query

DEPTH = 20_000


@input_query
def seed(db, name): ...


@derived
def link(db, i):
    return (seed(db, "base") if i == 0 else link(db, i - 1)) + 1


def _build(db):
    for i in range(DEPTH):  # bottom-up, so the first run needs no deep recursion
        link(db, i)


def test_verifying_a_chain_far_deeper_than_the_recursion_limit(db):
    assert DEPTH > 10 * sys.getrecursionlimit()
    db.set(seed, "base", 0)
    db.set(seed, "other", 0)
    _build(db)
    db.set(seed, "other", 1)
    with db.log() as log:
        assert link(db, DEPTH - 1) == DEPTH
    assert len(log.validated) == DEPTH and log.executed == []
    db.set(seed, "base", 1)
    with db.log() as log:
        assert link(db, DEPTH - 1) == DEPTH + 1
    assert log.executed == [("link", (i,)) for i in range(DEPTH)]


def test_durability_skips_the_whole_chain(db):
    db.set(seed, "base", 0, durability=Durability.HIGH)
    db.set(seed, "other", 0)
    _build(db)
    db.set(seed, "other", 1)
    with db.log() as log:
        assert link(db, DEPTH - 1) == DEPTH
    assert log.validated == [("link", (DEPTH - 1,))]
