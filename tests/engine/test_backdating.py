from tribuild.engine import Step, derived

from .conftest import run
from .pipelines import text, words


@derived
def shout(db, name):
    return tuple(w.upper() for w in words(db, name))


@derived
def first(db, name):
    return shout(db, name)[0]


@derived
def greeting(db, name):
    return "hello " + first(db, name)


def test_equal_result_cuts_off_dependents(db):
    db.set(text, "a", "x y")
    first(db, "a")
    db.set(text, "a", "x    y\n")
    with db.log() as log:
        assert first(db, "a") == "X"
    assert log.executed == [("words", ("a",))]
    assert log.validated == [("shout", ("a",)), ("first", ("a",))]


def test_cutoff_midway_stops_the_chain_there(db):
    db.set(text, "a", "x y")
    first(db, "a")
    greeting(db, "a")
    db.set(text, "a", "x z")
    with db.log() as log:
        assert greeting(db, "a") == "hello X"
    assert log.executed == [("words", ("a",)), ("shout", ("a",)), ("first", ("a",))]
    assert log.validated == [("greeting", ("a",))]


def test_backdated_memo_keeps_its_change_revision(db):
    db.set(text, "a", "x y")
    first(db, "a")
    db.set(text, "a", "x  y")
    first(db, "a")
    assert db.why(words, "a")[0] == Step("words", ("a",), 2)
    assert db.graph().nodes["words", ("a",)]["changed_at"] == 1


def test_real_change_reaches_the_top(db):
    db.set(text, "a", "x y")
    first(db, "a")
    db.set(text, "a", "w y")
    assert run(db, first, "a") == ("W", [("words", ("a",)), ("shout", ("a",)), ("first", ("a",))])
