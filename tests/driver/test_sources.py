"""read_source refuses what it must not read: a FIFO (the read would block) and a file over
the size limit; each becomes a SourceText with its error, never an exception."""

import os

from tribuild.driver import sources
from tribuild.driver.sources import read_source


def test_a_fifo_named_tri_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe.tri")
    got = read_source(str(tmp_path), "pipe.tri")
    assert got.text is None and "not a regular file" in got.error


def test_a_file_over_the_limit_is_refused_and_one_at_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "MAX_BYTES", 16)
    (tmp_path / "big.tri").write_text("x" * 17)
    (tmp_path / "edge.tri").write_text("y" * 16)
    big = read_source(str(tmp_path), "big.tri")
    assert big.text is None and "17 bytes, more than the limit of 16" in big.error
    assert read_source(str(tmp_path), "edge.tri").text == "y" * 16


def test_a_directory_and_a_missing_file_keep_their_messages(tmp_path):
    (tmp_path / "dir.tri").mkdir()
    assert read_source(str(tmp_path), "dir.tri").error == "is a directory, not a file"
    assert read_source(str(tmp_path), "gone.tri").error == "no such file"


def test_imports_are_followed_and_only_files_that_may_import_are_lexed(tmp_path):
    from tribuild.engine import Database

    (tmp_path / "lib").mkdir()
    (tmp_path / "main.tri").write_text('from "lib/a.tri" import A\n')
    (tmp_path / "lib" / "a.tri").write_text('import "b.tri"\nlayer A() {\n}\n')
    (tmp_path / "lib" / "b.tri").write_text("layer B() {\n}\n")
    (tmp_path / "lone.tri").write_text("layer C() {\n}\n")
    db = Database()
    closure = sources.load_sources(db, str(tmp_path), ("lone.tri", "main.tri"))
    assert closure == ("lib/a.tri", "lib/b.tri", "lone.tri", "main.tri")
    assert db.stats()["item_places"].executed == 2  # main.tri and lib/a.tri
    assert [sources.may_import(t) for t in ("import x", "from x", "layer A", None)] == [
        True,
        True,
        False,
        False,
    ]
