import json

import pytest

from tribuild.engine import Database
from tribuild.engine.store import columns
from tribuild.engine.store import disk as engine_store

from .conftest import run
from .store_queries import TEXTS, run_all, set_inputs, summary, words

SALT = "corruption-test-salt"


@pytest.fixture
def store(tmp_path):
    db = Database()
    set_inputs(db)
    run_all(db)
    db.save(tmp_path, SALT)
    return tmp_path


def _only(store, pattern):
    (path,) = store.glob(pattern)
    return path


def _fresh_results():
    db = Database()
    set_inputs(db)
    return run_all(db)


def _edit(path, change):
    data = bytearray(path.read_bytes())
    path.write_bytes(bytes(change(data)))


def test_a_flipped_entry_is_dropped_reported_once_and_recomputed(store):
    def flip(data):
        data[data.index(b'["bravo"') + 2] ^= 0x01  # inside words('b'), not text('b')
        return data

    _edit(_only(store, "values-*.pack"), flip)
    db = Database.load(store, SALT)
    set_inputs(db)
    assert run(db, summary) == ((2, 3, 1), [])
    assert run(db, words, "b")[1] == [("words", ("b",))]
    assert words(db, "b").words == ("bravo", "charlie", "delta")
    assert len(db.store_report.problems) == 1 and "words('b')" in db.store_report.problems[0]
    assert run_all(db) == _fresh_results()
    assert len(db.store_report.problems) == 1


def test_a_damaged_entry_compared_with_a_new_value_counts_as_changed(store):
    def flip(data):
        data[data.index(b'["bravo"') + 2] ^= 0x01  # inside words('b')
        return data

    _edit(_only(store, "values-*.pack"), flip)
    db = Database.load(store, SALT)
    set_inputs(db, {**TEXTS, "b": "bravo  charlie delta"})  # words('b') re-runs, same value
    assert run(db, summary) == ((2, 3, 1), [("words", ("b",)), ("count", ("b",))])
    db.save(store, SALT)
    again = Database.load(store, SALT)
    set_inputs(again, {**TEXTS, "b": "bravo  charlie delta"})
    assert run(again, words, "b") == (words(db, "b"), [])
    assert db.store_report.problems == again.store_report.problems == []


def test_a_truncated_pack_loses_only_the_entries_past_the_end(store):
    pack = _only(store, "values-*.pack")
    _edit(pack, lambda data: data[: len(data) // 2])
    db = Database.load(store, SALT)
    set_inputs(db)
    assert run_all(db) == _fresh_results()
    for name in TEXTS:
        words(db, name)
    assert 0 < len(db.store_report.problems) < len(TEXTS) + 4


def test_a_deleted_pack_means_values_are_recomputed(store):
    _only(store, "values-*.pack").unlink()
    db = Database.load(store, SALT)
    assert db.store_report.status == "loaded"
    assert "missing" in db.store_report.problems[0]
    set_inputs(db)
    value, executed = run(db, summary)
    assert value == (2, 3, 1)
    # the inputs' stored values are gone too, so setting them counts as a change
    assert len(executed) == 7 and executed[-1] == ("summary", ())


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) - 7],
        lambda data: data[:40] + bytes([data[40] ^ 0x04]) + data[41:],
        lambda data: data[-30:],
        lambda data: b"",
    ],
    ids=["truncated", "flipped", "headless", "empty"],
)
def test_a_damaged_graph_file_means_an_empty_database(store, damage):
    _edit(_only(store, "graph-*.json"), damage)
    db = Database.load(store, SALT)
    assert db.store_report.status == "corrupt"
    assert db.revision == 0 and db.graph().number_of_nodes() == 0
    set_inputs(db)
    assert run_all(db) == _fresh_results()


def test_a_pack_named_outside_the_store_is_refused(store):
    graph = _only(store, "graph-*.json")
    _edit(graph, lambda data: data.replace(b'"packs":[["values-', b'"packs":[["../values-'))
    assert Database.load(store, SALT).store_report.status == "corrupt"


def _rewrite_graph(store, change) -> None:
    """Apply ``change`` to the graph file's JSON part and integer columns and write it back
    with a valid digest (as a crafted file would be)."""
    graph = _only(store, "graph-*.json")
    body = engine_store.read_graph(graph.read_bytes())
    text = body.pop("elements")
    ints = {name: list(body.pop(name)) for name, _ in body["layout"]}
    change(body, ints)
    layout, data = columns.pack(ints)
    meta = json.dumps(body | {"layout": layout}).encode()
    part = len(meta).to_bytes(8, "little") + meta + data + text
    graph.write_bytes(
        b"TRIBUILD-ENGINE %d %s\n" % (engine_store.FORMAT, engine_store.digest(part).encode())
        + part
    )


def test_argument_slices_out_of_key_order_are_refused(store):
    def swap(body, ints):  # keys 0 and 1 list each other's argument ids
        starts = ints["args_start"]
        assert ints["args_len"][:2] == [1, 1]
        starts[0], starts[1] = starts[1], starts[0]

    _rewrite_graph(store, lambda body, ints: None)
    assert Database.load(store, SALT).store_report.status == "loaded"
    _rewrite_graph(store, swap)
    db = Database.load(store, SALT)
    assert db.store_report.status == "corrupt" and "key order" in db.store_report.reason
    set_inputs(db)
    assert run_all(db) == _fresh_results()
