"""tempname.replace: atomic writes of bytes or of a list of byte strings."""

import os

import pytest

from tribuild.base import tempname


@pytest.mark.parametrize(
    "chunks",
    [[], [b""], [b"a"], [b"ab", b"", b"cde"], [bytes([i % 251]) * (i % 7) for i in range(3000)]],
)
def test_a_list_of_chunks_is_written_back_to_back(tmp_path, chunks):
    path = tmp_path / "f"
    tempname.replace(path, chunks, sync=True)
    assert path.read_bytes() == b"".join(chunks)
    assert os.listdir(tmp_path) == ["f"]


def test_a_short_writev_is_finished_with_plain_writes(tmp_path, monkeypatch):
    real = os.writev
    monkeypatch.setattr(os, "writev", lambda fd, batch: real(fd, [bytes(batch[0])[:1]]))
    chunks = [b"abc", b"defg"] * 700  # more than one writev batch
    tempname.replace(tmp_path / "f", chunks, sync=False)
    assert (tmp_path / "f").read_bytes() == b"".join(chunks)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "f"
    path.write_bytes(b"old")

    def full(fd, batch):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "writev", full)
    with pytest.raises(OSError):
        tempname.replace(path, [b"new"], sync=True)
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["f"]
