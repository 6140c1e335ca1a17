from tribuild.engine import derived, input_query

from .conftest import run


@input_query
def number(db, i): ...


@derived(lru=2)
def square(db, i):
    return number(db, i) ** 2


@derived
def total(db, n):
    return sum(square(db, i) for i in range(n))


def _setup(db, n=4):
    for i in range(n):
        db.set(number, i, i)
    assert total(db, n) == sum(i * i for i in range(n))


def test_only_the_most_recent_values_are_held(db):
    _setup(db)
    assert run(db, square, 3) == (9, [])
    assert run(db, square, 2) == (4, [])
    assert run(db, square, 1) == (1, [("square", (1,))])


def test_evicted_memos_still_verify_dependents_green(db):
    _setup(db)
    db.set(number, 99, 0)
    with db.log() as log:
        assert total(db, 4) == 14
    assert log.executed == []
    assert sorted(log.validated) == [("square", (i,)) for i in range(4)] + [("total", (4,))]


def test_asking_an_evicted_value_reruns_only_it(db):
    _setup(db)
    assert run(db, square, 0) == (0, [("square", (0,))])
    assert run(db, total, 4) == (14, [])


def test_a_recent_hit_protects_a_value_from_eviction(db):
    _setup(db)
    square(db, 2)
    square(db, 0)
    assert run(db, square, 2) == (4, [])
    assert run(db, square, 3) == (9, [("square", (3,))])


def test_changed_input_under_an_evicted_memo_reruns_it_and_its_dependents(db):
    _setup(db)
    db.set(number, 0, 5)
    # square(0) re-runs (changed) while verifying total; total re-runs and, with only two
    # values held at a time, must recompute the other squares' values too.
    assert run(db, total, 4) == (
        39,
        [("square", (0,)), ("square", (1,)), ("square", (2,)), ("square", (3,)), ("total", (4,))],
    )
    assert db.explain(square, 1) == (
        "square(1) ran at revision 5\n  because its value was not held"
    )
