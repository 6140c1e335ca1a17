from .conftest import run
from .pipelines import count, text


def test_first_call_executes_each_query_once_in_order(db):
    db.set(text, "a", "x y z")
    assert run(db, count, "a") == (3, [("words", ("a",)), ("count", ("a",))])


def test_second_call_is_a_hit_and_executes_nothing(db):
    db.set(text, "a", "x y z")
    count(db, "a")
    with db.log() as log:
        assert count(db, "a") == 3
    assert log.executed == [] and log.validated == []
    assert log.hits == [("count", ("a",))]


def test_distinct_args_are_distinct_keys(db):
    db.set(text, "a", "x y z")
    db.set(text, "b", "p")
    count(db, "a")
    assert run(db, count, "b") == (1, [("words", ("b",)), ("count", ("b",))])


def test_unrelated_input_change_revalidates_without_executing(db):
    db.set(text, "a", "x y z")
    db.set(text, "b", "p")
    count(db, "a")
    db.set(text, "b", "q")
    with db.log() as log:
        assert count(db, "a") == 3
    assert log.executed == []
    assert log.validated == [("words", ("a",)), ("count", ("a",))]
