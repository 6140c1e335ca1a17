"""Append-only packs: a save writes only the values not already in a pack it keeps, retires
packs that are mostly dead, damaged or too many, and deletes the packs it no longer lists."""

import errno
from pathlib import Path

import pytest

from tribuild.engine import Database
from tribuild.engine.store import disk as store
from tribuild.engine.store import packs

from .conftest import run
from .store_queries import text, words

SALT = "packs-test-salt"
NAMES = [f"n{i}" for i in range(40)]


def _texts(changed=(), version=1):
    return {n: f"word{n} " * 30 + (f"v{version}" if n in changed else "") for n in NAMES}


def _build(db, texts):
    for name, value in texts.items():
        db.set(text, name, value)
    return [words(db, n) for n in NAMES]


def _graph(folder: Path) -> dict:
    (path,) = folder.glob("graph-*.json")
    return store.read_graph(path.read_bytes())


def _pack_files(folder: Path) -> set[str]:
    return {p.name for p in folder.glob("values-*.pack")}


def _encoded(*values) -> int:
    return sum(len(store.codec.encode(v)) for v in values)


def _pack_bytes(folder: Path, report) -> int:
    """What a save wrote besides the graph file."""
    (graph,) = folder.glob("graph-*.json")
    return report.bytes - graph.stat().st_size


def _check_store(folder: Path) -> None:
    """Every listed pack exists with its stamp, no other pack is left, every entry passes
    its checksum, and nothing temporary is left."""
    body = _graph(folder)
    files = packs.read(str(folder), body["packs"], body)
    assert {p.name for p in files} == _pack_files(folder)
    assert all(p.unchanged() for p in files)
    for i, offset in enumerate(body["entry_offset"]):
        data = files[body["entry_pack"][i]].data[offset : offset + body["entry_length"][i]]
        assert store.checksum(data) == body["entry_checksum"][i]
    assert not list(folder.glob(".*.tmp"))


@pytest.fixture
def saved(tmp_path):
    db = Database()
    _build(db, _texts())
    db.save(tmp_path, SALT)
    return tmp_path


def test_a_save_after_a_load_writes_only_the_changed_values(saved):
    first = _pack_files(saved)
    db = Database.load(saved, SALT)
    _build(db, _texts(changed={"n3"}))
    report = db.save(saved, SALT)
    assert first < _pack_files(saved) and len(_pack_files(saved)) == 2
    new = (_pack_files(saved) - first).pop()
    assert (
        (saved / new).stat().st_size
        == _pack_bytes(saved, report)
        == _encoded(_texts(changed={"n3"})["n3"], words(db, "n3"))
    )
    _check_store(saved)
    again = Database.load(saved, SALT)
    assert run(again, words, "n3")[0] == words(db, "n3")


def test_equal_values_are_not_written_again(saved):
    db = Database.load(saved, SALT)
    _build(db, _texts())
    db.set(text, "n3", "changed")
    words(db, "n3")
    db.set(text, "n3", _texts()["n3"])
    _build(db, _texts())  # re-runs words('n3') to an equal value
    before = _pack_files(saved)
    db.save(saved, SALT)
    assert _pack_files(saved) == before
    _check_store(saved)


def test_mostly_dead_packs_are_retired_and_deleted(saved):
    for version in range(1, 12):
        db = Database.load(saved, SALT)
        _build(db, _texts(changed=set(NAMES[:30]), version=version))
        db.save(saved, SALT)
        _check_store(saved)
        assert len(_pack_files(saved)) <= 2
    db = Database.load(saved, SALT)
    assert run(db, words, "n0")[0].words[-1] == "v11"


def test_the_pack_count_is_bounded(saved):
    for i in range(len(NAMES[: 3 * packs.MAX_PACKS])):
        db = Database.load(saved, SALT)
        _build(db, _texts(changed=set(NAMES[: i + 1])))
        db.save(saved, SALT)
        assert len(_pack_files(saved)) <= packs.MAX_PACKS
    _check_store(saved)


def test_saving_again_from_the_same_process_is_incremental(saved):
    db = Database.load(saved, SALT)
    _build(db, _texts(changed={"n1"}))
    db.save(saved, SALT)
    _build(db, _texts(changed={"n1", "n2"}))
    report = db.save(saved, SALT)
    assert _pack_bytes(saved, report) == _encoded(_texts(changed={"n2"})["n2"], words(db, "n2"))
    _check_store(saved)
    assert run(Database.load(saved, SALT), words, "n2")[0] == words(db, "n2")


def test_saving_to_another_folder_copies_every_value(saved, tmp_path):
    db = Database.load(saved, SALT)
    _build(db, _texts())
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    db.save(elsewhere, SALT)
    for path in saved.iterdir():
        path.unlink()
    _check_store(elsewhere)
    loaded = Database.load(elsewhere, SALT)
    with loaded.log() as log:
        assert _build(loaded, _texts()) == _build(Database(), _texts())
    assert log.executed == [] and loaded.store_report.problems == []


def test_a_damaged_entry_not_read_is_dropped_at_save(saved):
    (pack,) = saved.glob("values-*.pack")
    data = bytearray(pack.read_bytes())
    data[data.index(b"wordn7") + 2] ^= 0x01
    pack.write_bytes(bytes(data))
    db = Database.load(saved, SALT)
    _build(db, _texts(changed={"n1"}))  # decodes words('n1') only
    db.save(saved, SALT)
    _check_store(saved)
    assert pack.name not in _pack_files(saved)  # retired: its good entries were copied
    again = Database.load(saved, SALT)
    _build(again, _texts(changed={"n1"}))
    assert again.store_report.problems == []


class _Killed(BaseException):
    """Stands for a SIGKILL: nothing after the kill point runs (``except Exception`` too)."""


def _interrupted_save(db, folder: Path, monkeypatch, kill_at: int) -> int:
    """Save ``db`` into ``folder``, interrupted just before its ``kill_at``-th file-system
    change (0: never); the number of changes passed."""
    import os

    count = [0]

    def point(fn):
        def wrapped(*args, **kwargs):
            count[0] += 1
            if count[0] == kill_at:
                raise _Killed
            return fn(*args, **kwargs)

        return wrapped

    with monkeypatch.context() as patch:
        for name in ("replace", "unlink", "fsync"):
            patch.setattr(os, name, point(getattr(os, name)))
        try:
            db.save(folder, SALT)
        except _Killed:
            pass
    return count[0]


def test_a_save_interrupted_at_any_step_leaves_a_whole_store(saved, tmp_path, monkeypatch):
    import shutil

    def attempt(kill_at: int) -> tuple[Path, int]:
        folder = tmp_path / f"kill-{kill_at}"
        shutil.copytree(saved, folder)
        db = Database.load(folder, SALT)
        _build(db, _texts(changed={"n5"}))
        return folder, _interrupted_save(db, folder, monkeypatch, kill_at)

    _, total = attempt(0)
    assert total == 5  # two files written (fsync and rename each), the folder fsynced
    for kill_at in range(1, total + 1):
        folder, _ = attempt(kill_at)
        db = Database.load(folder, SALT)
        assert db.store_report.status == "loaded" and db.store_report.problems == []
        with db.log() as log:
            new = _build(db, _texts(changed={"n5"}))
        assert new == _build(Database(), _texts(changed={"n5"}))
        assert {name for name, _ in log.executed} <= {"words"}
        assert db.store_report.problems == []
        db.save(folder, SALT)
        _check_store(folder)


class _Memo:
    def __init__(self, blob):
        self.blob, self.value = blob, None


def test_a_new_pack_holds_equal_values_once_and_values_of_one_checksum_apart(tmp_path):
    """Two different values that share a checksum and a length (forged here) are both kept;
    equal ones are written once."""
    blobs = [(b"aaaa", 7), (b"bbbb", 7), (b"aaaa", 7), (b"cc", 9)]
    memos = [_Memo(b) for b in blobs]
    placed = packs.place(memos, blobs, str(tmp_path), "sid", [])
    packs.write(placed)
    data = bytes(placed.new.data)
    at = [m.blob[3] for m in memos]
    assert [data[o : o + len(b[0])] for o, b in zip(at, blobs, strict=True)] == [
        b[0] for b in blobs
    ]
    assert at[0] == at[2] and len(set(at)) == 3 and len(data) == 10


def test_a_new_pack_that_cannot_be_mapped_after_its_write_still_saves(tmp_path, monkeypatch):
    """Mapping the pack just written may fail (out of memory, out of file descriptors): the
    save still completes and counts the pack's bytes, and a load maps it later. (The save
    took ``len`` of the missing mapping and failed with a TypeError; mypy found it.)"""
    db = Database()
    values = _build(db, _texts())

    def no_memory(*args, **kwargs):
        raise OSError(errno.ENOMEM, "Cannot allocate memory")

    monkeypatch.setattr(packs.mmap, "mmap", no_memory)
    report = db.save(tmp_path, SALT)
    monkeypatch.undo()
    (new,) = _pack_files(tmp_path)
    assert _pack_bytes(tmp_path, report) == (tmp_path / new).stat().st_size > 0
    _check_store(tmp_path)
    loaded = Database.load(tmp_path, SALT)
    with loaded.log() as log:
        assert _build(loaded, _texts()) == values
    assert log.executed == [] and loaded.store_report.problems == []
