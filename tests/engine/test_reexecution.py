import pytest

from tribuild.engine import MissingInput, derived

from .conftest import run
from .pipelines import length, text


@derived
def both(db):
    return length(db, "a") + length(db, "b")


@derived
def length_or_minus_one(db, name):
    try:
        return len(text(db, name))
    except MissingInput:
        return -1


def test_input_change_reexecutes_exactly_its_dependents(db):
    db.set(text, "a", "xx")
    db.set(text, "b", "yyy")
    assert both(db) == 5
    db.set(text, "a", "xxxx")
    assert run(db, both) == (7, [("length", ("a",)), ("both", ())])


def test_setting_an_equal_value_is_a_noop(db):
    db.set(text, "a", "xx")
    db.set(text, "b", "yyy")
    both(db)
    revision = db.revision
    db.set(text, "a", "xx")
    assert db.revision == revision
    assert run(db, both) == (5, [])


def test_each_effective_change_bumps_the_revision_once(db):
    assert db.revision == 0
    db.set(text, "a", "x")
    db.set(text, "a", "y")
    db.remove(text, "a")
    db.remove(text, "a")
    assert db.revision == 3


def test_reading_an_unset_input_names_the_key(db):
    with pytest.raises(MissingInput, match=r"text\('nope'\)"):
        length(db, "nope")


def test_removed_input_raises_and_dependents_rerun(db):
    db.set(text, "a", "xx")
    assert length_or_minus_one(db, "a") == 2
    db.remove(text, "a")
    assert run(db, length_or_minus_one, "a") == (-1, [("length_or_minus_one", ("a",))])
    with pytest.raises(MissingInput):
        text(db, "a")


def test_a_query_that_read_a_missing_input_reruns_when_it_is_set(db):
    assert length_or_minus_one(db, "new") == -1
    db.set(text, "new", "abc")
    assert run(db, length_or_minus_one, "new") == (3, [("length_or_minus_one", ("new",))])


def test_failed_execution_stores_nothing_and_runs_again(db):
    with pytest.raises(MissingInput):
        length(db, "a")
    db.set(text, "a", "xyz")
    assert run(db, length, "a") == (3, [("length", ("a",))])


def test_inputs_cannot_be_set_from_inside_a_query(db):
    @derived
    def sneaky(db):
        db.set(text, "a", "x")

    with pytest.raises(RuntimeError, match="inside a query"):
        sneaky(db)


def test_only_input_queries_can_be_set(db):
    with pytest.raises(TypeError):
        db.set(length, "a", 3)
