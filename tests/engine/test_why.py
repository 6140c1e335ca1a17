from tribuild.engine import Step, derived

from .pipelines import count, text, words


@derived
def summary(db):
    return count(db, "a") + count(db, "b")


def _setup(db):
    db.set(text, "a", "x y")
    db.set(text, "b", "z")
    summary(db)


def test_why_follows_the_chain_back_to_the_changed_input(db):
    _setup(db)
    db.set(text, "b", "z w")
    summary(db)
    assert db.why(summary) == [
        Step("summary", (), 3),
        Step("count", ("b",), 3),
        Step("words", ("b",), 3),
        Step("text", ("b",), 3),
    ]
    assert [(step.query, step.args) for step in db.why(words, "b")] == [
        ("words", ("b",)),
        ("text", ("b",)),
    ]


def test_explain_says_it_in_words(db):
    _setup(db)
    db.set(text, "a", "x y q")
    summary(db)
    assert db.explain(count, "a") == (
        "count('a') ran at revision 3\n"
        "  because words('a') changed at revision 3\n"
        "  because text('a') changed at revision 3"
    )


def test_first_run_has_a_one_step_chain(db):
    _setup(db)
    assert db.why(count, "a") == [Step("count", ("a",), 2)]
    assert db.explain(count, "a").endswith("because it had never run")


def test_never_run_key_has_no_chain(db):
    assert db.why(count, "zzz") == []
    assert db.explain(count, "zzz") == "count('zzz') has not run in this database"


def test_chain_stops_where_a_later_run_replaced_the_record(db):
    _setup(db)
    db.set(text, "a", "x y q")
    summary(db)
    db.set(text, "a", "q r s")
    words(db, "a")
    assert db.why(summary) == [
        Step("summary", (), 3),
        Step("count", ("a",), 3),
        Step("words", ("a",), 3),
    ]
