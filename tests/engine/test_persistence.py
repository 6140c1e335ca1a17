from tribuild.engine import Database
from tribuild.engine.query import REGISTRY
from tribuild.engine.store import codec

from .conftest import run
from .store_queries import (
    TEXTS,
    count,
    length_plus_one,
    opaque,
    run_all,
    set_inputs,
    summary,
    text,
    uses_opaque_key,
    via_opaque,
    words,
)

SALT = "tribuild-test-salt"


def _saved(tmp_path):
    db = Database()
    set_inputs(db)
    expected = run_all(db)
    uses_opaque_key(db)
    report = db.save(tmp_path, SALT)
    return expected, report


def test_unchanged_inputs_execute_nothing_after_load(tmp_path):
    expected, _ = _saved(tmp_path)
    db = Database.load(tmp_path, SALT)
    assert db.store_report.status == "loaded"
    revision = db.revision
    set_inputs(db)
    assert db.revision == revision
    with db.log() as log:
        assert run_all(db) == expected
    assert log.executed == [] and log.validated == []


def test_one_changed_input_executes_only_the_affected_queries(tmp_path):
    _saved(tmp_path)
    db = Database.load(tmp_path, SALT)
    set_inputs(db, {**TEXTS, "b": "bravo charlie"})
    assert run(db, summary) == ((2, 2, 1), [("words", ("b",)), ("count", ("b",)), ("summary", ())])


def test_backdating_compares_against_the_stored_value(tmp_path):
    _saved(tmp_path)
    db = Database.load(tmp_path, SALT)
    set_inputs(db, {**TEXTS, "b": "  bravo   charlie delta "})
    assert run(db, summary) == ((2, 3, 1), [("words", ("b",))])


def test_backdating_compares_encodings_without_decoding(tmp_path, monkeypatch):
    _saved(tmp_path)
    db = Database.load(tmp_path, SALT)
    decoded = []
    real_decode = codec.decode
    monkeypatch.setattr(codec, "decode", lambda data: decoded.append(data) or real_decode(data))
    set_inputs(db, {**TEXTS, "b": "  bravo   charlie delta "})
    assert run(db, count, "b") == (3, [("words", ("b",))])
    assert decoded == [b"3"]  # count's value, which the caller reads; not words' old one
    db.save(tmp_path, SALT)
    again = Database.load(tmp_path, SALT)
    set_inputs(again, {**TEXTS, "b": "  bravo   charlie delta "})
    assert run(again, words, "b")[0].words == ("bravo", "charlie", "delta")


def test_a_value_that_cannot_be_encoded_is_compared_decoded(tmp_path):
    db = Database()
    set_inputs(db)
    assert length_plus_one(db, "c") == 5
    db.save(tmp_path, SALT)
    db = Database.load(tmp_path, SALT)
    set_inputs(db, {**TEXTS, "c": "ech "})  # length 4 again, as an unencodable Number
    assert run(db, length_plus_one, "c") == (5, [("length", ("c",))])
    set_inputs(db, {**TEXTS, "c": "echo "})
    assert run(db, length_plus_one, "c") == (6, [("length", ("c",)), ("length_plus_one", ("c",))])


def test_values_are_decoded_lazily(tmp_path, monkeypatch):
    _saved(tmp_path)
    decoded = []
    real_decode = codec.decode
    monkeypatch.setattr(codec, "decode", lambda data: decoded.append(data) or real_decode(data))
    db = Database.load(tmp_path, SALT)
    assert decoded == []
    assert words(db, "c").words == ("echo",)
    assert len(decoded) == 1


def test_a_load_builds_memos_only_for_the_keys_used(tmp_path):
    _saved(tmp_path)
    db = Database.load(tmp_path, SALT)
    assert db.store_report.keys == len(db.memos) > 4
    assert all(memo is None for memo in db.memos)
    set_inputs(db)
    assert words(db, "c").words == ("echo",)
    assert sorted(m.label() for m in db.memos if m is not None) == [
        "text('a')",
        "text('b')",
        "text('c')",
        "words('c')",
    ]


def test_keys_of_undeclared_queries_are_dropped_with_their_dependents(tmp_path, monkeypatch):
    expected, _ = _saved(tmp_path)
    monkeypatch.delitem(REGISTRY, count.ident)
    db = Database.load(tmp_path, SALT)
    assert db.store_report.problems[0].startswith("dropped 6 keys")
    set_inputs(db)
    with db.log() as log:
        assert run_all(db) == expected
    assert sorted(name for name, _ in log.executed) == [
        "count",
        "count",
        "count",
        "opaque",
        "summary",
        "via_opaque",
    ]


def test_another_salt_or_no_store_gives_an_empty_database(tmp_path):
    _saved(tmp_path)
    other = Database.load(tmp_path, "another salt")
    assert other.store_report.status == "other-salt" and other.revision == 0
    missing = Database.load(tmp_path / "nowhere", SALT)
    assert missing.store_report.status == "missing"
    set_inputs(other)
    assert run(other, summary)[1] == [
        ("words", ("a",)),
        ("count", ("a",)),
        ("words", ("b",)),
        ("count", ("b",)),
        ("words", ("c",)),
        ("count", ("c",)),
        ("summary", ()),
    ]


def test_unencodable_values_are_not_stored_and_are_counted(tmp_path):
    expected, report = _saved(tmp_path)
    assert report.unencodable == {"opaque": 1}
    db = Database.load(tmp_path, SALT)
    set_inputs(db)
    with db.log() as log:
        assert run_all(db) == expected
    assert log.executed == []
    assert run(db, words, "a")[1] == []


def test_a_lost_value_reruns_alone_and_keeps_dependents_green(tmp_path):
    _saved(tmp_path)
    db = Database.load(tmp_path, SALT)
    set_inputs(db, {**TEXTS, "c": "echo foxtrot"})
    assert run(db, via_opaque, "a") == (3, [])
    assert run(db, opaque, "a")[1] == [("opaque", ("a",))]


def test_keys_with_unencodable_args_are_dropped_with_their_dependents(tmp_path):
    _, report = _saved(tmp_path)
    assert report.dropped_keys == 2
    db = Database.load(tmp_path, SALT)
    set_inputs(db)
    value, executed = run(db, uses_opaque_key)
    assert value == 3
    assert [name for name, _ in executed] == ["keyed_by_opaque", "uses_opaque_key"]


def test_saving_again_replaces_the_graph_file(tmp_path):
    _saved(tmp_path)
    db = Database.load(tmp_path, SALT)
    db.set(text, "a", "changed")
    run_all(db)
    db.save(tmp_path, SALT)
    assert len(list(tmp_path.glob("graph-*.json"))) == 1
    again = Database.load(tmp_path, SALT)
    again.set(text, "a", "changed")
    assert run(again, words, "a")[1] == []
    assert not list(tmp_path.glob(".*.tmp"))


def test_keys_with_structured_args_round_trip(tmp_path):
    from .store_queries import Words, keyed_by_words

    db = Database()
    set_inputs(db)
    keys = [Words("a", ("x", "y")), (1, ("b", None)), frozenset({2, 3})]
    values = [keyed_by_words(db, key) for key in keys]
    db.save(tmp_path, SALT)
    loaded = Database.load(tmp_path, SALT)
    with loaded.log() as log:
        assert [keyed_by_words(loaded, key) for key in keys] == values
    assert log.executed == []
