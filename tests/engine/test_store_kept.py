"""A save of a database that holds what it loaded, unchanged, keeps the store as it is and
only marks it used (``store``: *kept store*); any difference makes it write a new one."""

import os

import pytest

from tribuild.engine import Database

from .conftest import run
from .store_queries import TEXTS, count, set_inputs, summary, text, words

SALT = "kept-store-test-salt"
OLD = 1_000_000_000  # an mtime (s) long past, to see the graph file touched


def _change_and_undo(db, root):
    db.set(text, "a", "changed")
    db.set(text, "a", TEXTS["a"])


def _read_new_key(db, root):
    db.set(text, "d", "delta echo")
    count(db, "d")


CASES = {  # what is done between the load and the save -> whether the store is kept
    "nothing read": (lambda db, root: None, True),
    "every stored query read": (lambda db, root: summary(db), True),
    "an input set to its own value": (lambda db, root: set_inputs(db), True),
    "an input changed": (lambda db, root: db.set(text, "a", "changed"), False),
    "an input changed and set back": (_change_and_undo, False),
    "a key added": (_read_new_key, False),
    "the graph file deleted": (lambda db, root: os.unlink(_graph(root)), False),
    "a pack deleted": (lambda db, root: [os.unlink(p) for p in _packs(root)], False),
}


def _graph(root) -> str:
    (name,) = [n for n in os.listdir(root) if n.startswith("graph-")]
    return os.path.join(root, name)


def _packs(root) -> list[str]:
    return [os.path.join(root, n) for n in os.listdir(root) if n.endswith(".pack")]


def _files(root) -> dict[str, bytes]:
    return {n: open(os.path.join(root, n), "rb").read() for n in sorted(os.listdir(root))}


@pytest.fixture
def root(tmp_path):
    db = Database()
    set_inputs(db)
    summary(db)
    db.save(tmp_path, SALT)
    os.utime(_graph(tmp_path), (OLD, OLD))
    return str(tmp_path)


@pytest.mark.parametrize("case", CASES)
def test_a_save_keeps_the_store_only_when_nothing_changed(root, case):
    action, kept = CASES[case]
    before = _files(root)
    db = Database.load(root, SALT)
    action(db, root)
    report = db.save(root, SALT)
    if kept:
        assert report.bytes == 0 and _files(root) == before
        assert os.stat(_graph(root)).st_mtime > OLD  # marked used (``cache``: last used)
    else:
        assert report.bytes > 0
    again = Database.load(root, SALT)  # either way, a whole store
    assert again.store_report.status == "loaded" and not again.store_report.problems
    assert summary(again) == summary(db)


def test_a_store_saved_elsewhere_is_written_there(root, tmp_path):
    db = Database.load(root, SALT)
    summary(db)
    other = str(tmp_path / "other")
    assert db.save(other, SALT).bytes > 0
    assert Database.load(other, SALT).store_report.status == "loaded"


def test_a_damaged_value_found_is_not_kept(root):
    """The memo recomputed at the same revision no longer holds its stored entry: the save
    writes the store again, and the next load finds nothing damaged."""
    (pack,) = _packs(root)
    stat = os.stat(pack)
    data = bytearray(open(pack, "rb").read())
    data[data.index(b'["bravo"') + 2] ^= 0x01  # inside words('b')
    with open(pack, "wb") as f:
        f.write(data)
    os.utime(pack, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # its stamp as listed
    db = Database.load(root, SALT)
    assert words(db, "b").words == ("bravo", "charlie", "delta")
    assert len(db.store_report.problems) == 1
    assert db.save(root, SALT).bytes > 0
    again = Database.load(root, SALT)
    assert run(again, words, "b")[1] == [] and not again.store_report.problems


def test_a_memo_validated_since_the_load_is_saved(tmp_path):
    """Only the verified revision of a memo differs: the save writes it, so the next load
    does not validate it again."""
    db = Database()
    set_inputs(db)
    summary(db)
    db.set(text, "c", "echo foxtrot")  # count('a') stays verified at the revision before
    count(db, "c")
    db.save(tmp_path, SALT)
    db = Database.load(tmp_path, SALT)
    with db.log() as log:
        count(db, "a")
    assert ("count", ("a",)) in log.validated and log.executed == []
    assert db.save(tmp_path, SALT).bytes > 0
    again = Database.load(tmp_path, SALT)
    with again.log() as log:
        count(again, "a")
    assert log.validated == [] and log.executed == []
