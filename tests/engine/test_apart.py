"""A save whose argument table a forked helper made (``Database.save_apart``) writes the store
a save without one writes: the same keys, values and dependencies, keys with unencodable
arguments dropped with their dependents, keys made after the fork included; a helper that
fails costs only its time."""

from __future__ import annotations

import os

import pytest

from tribuild.engine import Database, derived
from tribuild.engine.store import helper as apart
from tribuild.engine.store import packs

from .conftest import run
from .store_queries import (
    TEXTS,
    Opaque,
    Words,
    count,
    keyed_by_words,
    run_all,
    set_inputs,
    text,
    uses_opaque_key,
    words,
)

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
SALT = "tribuild-test-salt"


def _filled(opaque: bool = False) -> Database:
    db = Database()
    set_inputs(db)
    run_all(db)
    if opaque:
        uses_opaque_key(db)  # a key with an unencodable argument, and its dependent
    return db


def _stored(path) -> dict:
    """Every key of the store at ``path``, with its value and dependencies, as a loaded
    database rebuilds them."""
    db = Database.load(path, SALT)
    assert db.store_report.status == "loaded" and not db.store_report.problems
    out = {}
    for memo in db.every_memo():
        value = db.restore(memo, admit=False) and memo.value
        deps = tuple(db.memo_at(d).label() for d in memo.deps or ())
        out[memo.label()] = (value, deps, memo.changed_at)
    return out


@pytest.mark.parametrize("opaque", [False, True])
def test_a_save_with_a_helper_writes_what_a_save_without_one_writes(tmp_path, opaque):
    plain = _filled(opaque)
    plain_report = plain.save(tmp_path / "plain", SALT)
    db = _filled(opaque)
    ended = []
    db.save_apart(lambda: ended.append(True))
    report = db.save(tmp_path / "apart", SALT)
    assert ended == [True] and db.helper is None
    assert report == plain_report and report.dropped_keys == (2 if opaque else 0)
    assert _stored(tmp_path / "apart") == _stored(tmp_path / "plain")


def test_keys_made_after_the_fork_are_saved_too(tmp_path):
    db = _filled()
    db.save_apart(lambda: None)
    key = Words("z", ("late",))
    value = keyed_by_words(db, key)  # after the fork: not in the helper's prefix
    db.set(text, "d", "one more")
    assert run(db, words, "d")[0].words == ("one", "more")
    db.save(tmp_path, SALT)
    loaded = Database.load(tmp_path, SALT)
    set_inputs(loaded, {**TEXTS, "d": "one more"})
    with loaded.log() as log:
        assert keyed_by_words(loaded, key) == value
        assert run_all(loaded) == run_all(_filled())
    assert log.executed == []


@pytest.mark.parametrize("failure", ["dies", "garbles"])
def test_a_helper_that_fails_leaves_the_table_to_the_save(tmp_path, monkeypatch, failure):
    def broken(db, keys, fd):
        if failure == "garbles":
            os.write(fd, b'{"nodes": 1, "lengths": [1, 8, 8, 0]}\nxx')
        os._exit(3)

    monkeypatch.setattr(apart, "_serve", broken)
    plain = _filled(opaque=True)
    plain.save(tmp_path / "plain", SALT)
    db = _filled(opaque=True)
    ended = []
    db.save_apart(lambda: ended.append(True))
    db.save(tmp_path / "apart", SALT)
    assert ended == [True]
    assert _stored(tmp_path / "apart") == _stored(tmp_path / "plain")


@derived
def big_by_opaque(db, key):
    return "a long value " * 1000 + str(key.n + count(db, "a"))


def test_a_dropped_key_leaves_no_value_in_the_pack(tmp_path):
    """A key whose argument cannot be encoded is dropped; a save with a helper learns it
    only from the helper, after placing values, and places again without it."""

    def filled():
        db = _filled()
        big_by_opaque(db, Opaque(7))
        return db

    plain = filled().save(tmp_path / "plain", SALT)
    db = filled()
    db.save_apart(lambda: None)
    assert db.save(tmp_path / "apart", SALT) == plain and plain.dropped_keys == 1
    size = {
        name: sum(p.stat().st_size for p in (tmp_path / name).glob("values-*.pack"))
        for name in ("plain", "apart")
    }
    assert size["apart"] == size["plain"] < 13_000  # the 13 kB value is in neither


def test_a_save_that_fails_still_waits_for_its_helper(tmp_path, monkeypatch):
    db = _filled()
    ended = []
    db.save_apart(lambda: ended.append(True))
    pid = db.helper.pid

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(packs, "place", full_disk)
    with pytest.raises(OSError):
        db.save(tmp_path, SALT)
    assert ended == [True] and db.helper is None
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped already
    db.end_apart()  # what ``driver.build`` does on the way out: nothing left
    assert ended == [True]


def test_end_apart_reads_what_no_save_took(monkeypatch):
    """A helper whose message is larger than a pipe holds blocks writing until it is read:
    ending it without a save reads it, so the wait for its exit ends."""

    def large(db, keys, fd):
        os.write(fd, b"x" * (1 << 20))
        os._exit(0)

    monkeypatch.setattr(apart, "_serve", large)
    db = _filled()
    ended = []
    db.save_apart(lambda: ended.append(True))
    pid = db.helper.pid
    db.end_apart()
    assert ended == [True] and db.helper is None
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
