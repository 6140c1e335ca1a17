"""The salt record: a build whose tribuild is unchanged takes the package hash from the cache
folder instead of reading every source file; any change to a source file, or a file changed
too recently to be told apart from a later change, makes it hash the files again."""

from __future__ import annotations

import os
import time

import pytest

from tribuild.driver import session
from tribuild.driver.noop import manifest
from tribuild.engine.fingerprint import package_hash
from tribuild.project import PACKAGE_DIR


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package of three files, old enough to be recorded, and a fresh per-process memo."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    for name, text in {"a.py": "A = 1\n", "sub/b.py": "B = 2\n", "notes.txt": "x"}.items():
        (pkg / name).write_text(text)
    time.sleep(0.05)
    monkeypatch.setattr(session, "RACY_NS", 0)
    fresh_process(monkeypatch)
    return pkg


def fresh_process(monkeypatch):
    monkeypatch.setattr(session, "_DIGESTS", {})
    monkeypatch.setattr(manifest, "_SIGNATURES", {})


def digest(monkeypatch, cache, pkg) -> str:
    fresh_process(monkeypatch)
    return session.package_digest(str(cache), str(pkg))


def test_an_unchanged_package_is_not_read_again(package, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    assert digest(monkeypatch, cache, package) == package_hash(package)
    assert (cache / session.SALT_RECORD).exists()
    monkeypatch.setattr(session, "package_hash", lambda _: pytest.fail("hashed again"))
    assert digest(monkeypatch, cache, package) == package_hash(package)


def _same_size_edit(pkg):
    path = pkg / "a.py"
    st = path.stat()
    time.sleep(0.02)
    path.write_text("A = 7\n")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # the mtime restored: cp -p, rsync -t


def _replace(pkg):
    (pkg / "new.py").write_text("A = 1\n")
    os.replace(pkg / "new.py", pkg / "a.py")  # same bytes, another inode


CHANGES = {
    "same-size edit, mtime restored": _same_size_edit,
    "replaced by a rename": _replace,
    "file added": lambda pkg: (pkg / "sub" / "c.py").write_text("C = 3\n"),
    "file removed": lambda pkg: (pkg / "sub" / "b.py").unlink(),
    "file renamed": lambda pkg: os.rename(pkg / "sub" / "b.py", pkg / "sub" / "d.py"),
}


@pytest.mark.parametrize("change", CHANGES)
def test_any_change_to_a_source_file_hashes_them_again(package, tmp_path, monkeypatch, change):
    cache = tmp_path / "cache"
    digest(monkeypatch, cache, package)
    CHANGES[change](package)
    hashed = []
    monkeypatch.setattr(session, "package_hash", lambda p: hashed.append(p) or package_hash(p))
    assert digest(monkeypatch, cache, package) == package_hash(package) and hashed


def test_files_changed_just_before_are_not_recorded(package, tmp_path, monkeypatch):
    monkeypatch.setattr(session, "RACY_NS", 10**12)  # every file counts as just changed
    cache = tmp_path / "cache"
    assert digest(monkeypatch, cache, package) == package_hash(package)
    assert not (cache / session.SALT_RECORD).exists()


@pytest.mark.parametrize("text", ["", "{", '{"package": 1}', "[]"])
def test_a_damaged_record_is_ignored_and_replaced(package, tmp_path, monkeypatch, text):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / session.SALT_RECORD).write_text(text)
    assert digest(monkeypatch, cache, package) == package_hash(package)
    monkeypatch.setattr(session, "package_hash", lambda _: pytest.fail("hashed again"))
    assert digest(monkeypatch, cache, package) == package_hash(package)


def test_the_signature_covers_exactly_the_hashed_files():
    """The real package: every file package_hash reads is in the signature, and no other;
    the default is the whole package, wherever the manifest module sits in it."""
    from pathlib import Path

    root = Path(PACKAGE_DIR)
    hashed = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))
    assert [row[0] for row in manifest.package_signature()[1]] == hashed  # the default too
