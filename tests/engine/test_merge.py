"""export / merge: a worker (a copy of the database at the same revision) computes keys, the
main database absorbs its records so that reading them executes nothing, and from then on
behaves exactly like a database that computed everything itself."""

import itertools
import os

import pytest

from tribuild.engine import Database, Durability, derived
from tribuild.engine.memo import NO_VALUE
from tribuild.engine.store import codec

from .store_queries import (
    TEXTS,
    Opaque,
    count,
    keyed_by_opaque,
    opaque,
    run_all,
    set_inputs,
    summary,
    text,
    uses_opaque_key,
    via_opaque,
    words,
)

EDIT = {**TEXTS, "a": "alpha gamma"}  # words(a) changes, count(a) is backdated
LATER = [  # edits after the merge, one batch each
    {**EDIT, "b": "  bravo   charlie delta "},
    {**EDIT, "b": "bravo", "c": "echo foxtrot"},
    {**EDIT, "a": "alpha"},
]


def _copy():
    """A database with the history the copies share: everything computed, then one edit."""
    db = Database()
    set_inputs(db)
    run_all(db)
    set_inputs(db, EDIT)
    return db


def _key(memo):
    return memo.query.name, memo.args


def state(db) -> dict:
    """Everything known about each key that ran, by key (ids differ between databases)."""
    memos = db.every_memo()
    out = {}
    for m in memos:
        if m.deps is None:
            continue
        value = m.value
        if value is NO_VALUE and m.blob is not None:
            value = codec.decode(m.blob[0])
        cause = _key(memos[m.cause]) if m.cause >= 0 else m.cause
        out[_key(m)] = (
            value,
            m.changed_at,
            m.verified_at,
            int(m.durability),
            tuple(_key(memos[d]) for d in m.deps),
            cause,
            m.cause_rev,
            m.executed_at,
        )
    return out


def _export(db, *keys):
    for query, args in keys:
        query(db, *args)
    return b"".join(db.export(keys))


def test_merged_keys_are_read_without_executing_anything():
    worker, main = _copy(), _copy()
    payload = _export(worker, (summary, ()))
    report = main.merge(payload)
    assert (report.installed, report.skipped, report.reasons) == (7, 0, {})
    with main.log() as log:
        assert summary(main) == summary(worker) == (2, 3, 1)
    assert (log.executed, log.validated) == ([], [])


def test_a_merge_logs_what_the_worker_did_with_each_record_it_installs():
    """Inside an open log a merge lists each installed record as the worker's event, so a
    build that merges knows what ran in it wherever it ran (``tribuild build --explain``);
    the counters stay those of this database."""
    worker, main = _copy(), _copy()
    with worker.log() as ran:
        payload = _export(worker, (summary, ()))
    with main.log() as log:
        report = main.merge(payload)
    assert report.installed == len(log.executed) + len(log.validated) == 7
    assert (sorted(log.executed), sorted(log.validated)) == (
        sorted(ran.executed),
        sorted(ran.validated),
    )
    counts = {name: (s.executed, s.validated) for name, s in main.stats().items()}
    assert counts == {name: (s.executed, s.validated) for name, s in _copy().stats().items()}


def test_after_a_merge_the_database_is_the_one_that_computed_it_itself():
    worker, main, reference = _copy(), _copy(), _copy()
    main.merge(_export(worker, (summary, ())))
    summary(reference)
    assert state(main) == state(reference)
    assert main.why(words, "a") == reference.why(words, "a")
    for texts in LATER:
        set_inputs(main, texts)
        set_inputs(reference, texts)
        with main.log() as got, reference.log() as expected:
            assert run_all(main) == run_all(reference)
        assert got.executed == expected.executed and got.validated == expected.validated
        assert expected.executed


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_worker_computes_and_the_parent_merges():
    main = _copy()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.close(read)
            with os.fdopen(write, "wb") as out:
                out.write(_export(main, (summary, ()), (words, ("c",))))
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        payload = pipe.read()
    assert os.waitpid(pid, 0)[1] == 0
    assert main.merge(payload).installed == 7
    with main.log() as log:
        assert summary(main) == (2, 3, 1)
        assert words(main, "c").words == ("echo",)
    assert log.executed == []


def test_merged_values_are_saved_as_the_worker_encoded_them(tmp_path, monkeypatch):
    worker, main = _copy(), _copy()
    count(main, "a")  # computed here too: already valid when merged
    main.merge(_export(worker, (summary, ())))
    unencoded = {_key(m) for m in main.every_memo() if m.blob is None and m.value is not NO_VALUE}
    assert unencoded == {("opaque", ("a",)), ("via_opaque", ("a",))}  # not in the payload
    encoded = []
    monkeypatch.setattr(codec, "encode", lambda v, real=codec.encode: encoded.append(v) or real(v))
    main.save(tmp_path, "salt")
    assert encoded == [main.find_memo(q, ("a",)).value for q in (via_opaque, opaque)]
    loaded = Database.load(tmp_path, "salt")
    with loaded.log() as log:
        assert summary(loaded) == (2, 3, 1) and words(loaded, "a").words == ("alpha", "gamma")
    assert log.executed == []


def test_a_payload_from_an_older_revision_is_refused():
    worker, main = _copy(), _copy()
    payload = _export(worker, (summary, ()))
    main.set(text, "c", "echo echo")
    report = main.merge(payload)
    assert (report.installed, report.skipped, report.reasons) == (0, 7, {"other revision": 7})
    with main.log() as log:
        assert summary(main) == (2, 3, 2)
    assert ("words", ("c",)) in log.executed


@pytest.mark.parametrize(
    "value, durability",
    [
        ("bravo charlie", Durability.LOW),  # another value
        (TEXTS["b"], Durability.HIGH),  # another durability
    ],
)
def test_records_that_read_another_input_value_are_refused(value, durability):
    worker, main = Database(), Database()
    set_inputs(worker)
    set_inputs(main)
    worker.set(text, "b", value, durability=durability)
    main.set(text, "unused", "")  # same revision, other history
    payload = _export(worker, (summary, ()))
    report = main.merge(payload)
    assert report.reasons == {"input differs": 3}  # words(b), count(b), summary
    assert report.installed == 4
    with main.log() as log:
        assert summary(main) == (2, 3, 1)
    assert log.executed == [("words", ("b",)), ("count", ("b",)), ("summary", ())]


def test_records_from_another_history_are_refused():
    worker, main = Database(), Database()
    set_inputs(worker)
    summary(worker)  # computed at revision 3
    for db in (worker, main):
        db.set(text, "unused", "")
    set_inputs(main)  # same revision 4, nothing computed
    report = main.merge(_export(worker, (summary, ())))
    assert (report.installed, report.reasons) == (0, {"other history": 7})


def test_overlapping_payloads_give_the_same_state_in_any_order():
    worker = _copy()
    payloads = [
        _export(worker, (count, ("a",))),
        _export(worker, (summary, ())),
        _export(worker, (count, ("b",)), (words, ("c",))),
    ]
    states = []
    for order in itertools.permutations(payloads):
        main = _copy()
        reports = [main.merge(p) for p in order]
        assert sum(r.installed for r in reports) == 7
        assert sum(r.reasons.get("already valid", 0) for r in reports) == 12 - 7
        states.append(state(main))
    assert all(s == states[0] for s in states)


def test_an_unencodable_value_is_recomputed_on_demand_and_keeps_dependents_green():
    worker, main = _copy(), _copy()
    report = main.merge(_export(worker, (via_opaque, ("a",))))
    assert (report.installed, report.without_value) == (4, 1)
    with main.log() as log:
        assert via_opaque(main, "a") == 3
    assert log.executed == []
    with main.log() as log:
        assert opaque(main, "a") == Opaque(2)
    assert log.executed == [("opaque", ("a",))]
    assert state(main)[("opaque", ("a",))][1:5] == state(worker)[("opaque", ("a",))][1:5]


def test_records_with_unencodable_keys_are_left_out_with_their_dependents():
    worker, main = _copy(), _copy()
    report = main.merge(_export(worker, (uses_opaque_key, ())))
    assert (report.installed, report.left_out) == (2, 2)  # words(a), count(a) installed
    with main.log() as log:
        assert uses_opaque_key(main) == 3
    assert log.executed == [("keyed_by_opaque", (Opaque(1),)), ("uses_opaque_key", ())]
    assert keyed_by_opaque(main, Opaque(1)) == 3


@derived
def merge_inside(db, payload):
    return db.merge(payload)


def test_misuse_is_an_error():
    db = _copy()
    with pytest.raises(ValueError, match="not a derived key computed"):
        db.export([(summary, ())])
    with pytest.raises(ValueError, match="not a derived key computed"):
        db.export([(text, ("a",))])
    with pytest.raises(ValueError, match="not an engine merge payload"):
        db.merge(b"garbage")
    with pytest.raises(RuntimeError, match="inside a query"):
        merge_inside(db, _export(_copy(), (count, ("a",))))


def test_a_damaged_payload_is_refused_before_anything_is_installed():
    payload = _export(_copy(), (count, ("a",)))
    main = _copy()
    before = state(main)
    start = payload.index(b"\n") + 1
    meta_end = start + 8 + int.from_bytes(payload[start : start + 8], "little")
    for damaged in (
        payload[: meta_end + 12],  # records cut short
        payload[: meta_end + 8] + payload[meta_end + 16 :],  # an integer lost
        payload[:-1] + bytes([payload[-1] ^ 1]),
    ):  # a value byte flipped
        with pytest.raises(ValueError, match="corrupt merge payload"):
            main.merge(damaged)
        assert state(main) == before
