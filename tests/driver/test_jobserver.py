"""make's jobserver: tokens taken per extra worker and given back, in both the fifo
(make 4.4) and the pipe (make <= 4.3) forms; anything unusable means no jobserver."""

from __future__ import annotations

import os

from tribuild.driver.pool import jobserver


def _drain(fd: int) -> bytes:
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 100)
    except BlockingIOError:
        return b""


def test_fifo_tokens_are_taken_and_given_back(tmp_path):
    fifo = str(tmp_path / "jobs")
    os.mkfifo(fifo)
    keeper = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    os.write(keeper, b"ab")
    slots = jobserver.slots(8, {"MAKEFLAGS": f" -j3 --jobserver-auth=fifo:{fifo}"})
    assert isinstance(slots, jobserver.MakeSlots)
    assert slots.acquire() and slots.acquire() and not slots.acquire()
    slots.release()
    assert slots.acquire()
    slots.close()
    assert sorted(_drain(keeper)) == sorted(b"ab")
    os.close(keeper)


def test_pipe_tokens_are_capped_by_jobs_and_the_pipe_stays_blocking():
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b"+++")
    slots = jobserver.slots(2, {"MAKEFLAGS": f"-j4 --jobserver-auth={read_fd},{write_fd}"})
    assert slots.acquire() and not slots.acquire()  # jobs=2: one extra worker
    assert os.get_blocking(read_fd)
    slots.close()
    assert _drain(read_fd) == b"+++"
    os.close(read_fd)
    os.close(write_fd)


def test_unusable_jobserver_falls_back_to_jobs(tmp_path):
    regular = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    for flags in (
        f"--jobserver-auth={regular},{regular}",
        "--jobserver-auth=99,98",
        f"--jobserver-auth=fifo:{tmp_path / 'nope'}",
        "--jobserver-auth=x",
    ):
        slots = jobserver.slots(3, {"MAKEFLAGS": flags})
        assert type(slots) is jobserver.Slots
        assert slots.acquire() and slots.acquire() and not slots.acquire()
    os.close(regular)
    assert jobserver.auth("--jobserver-fds=3,4 --jobserver-auth=5,6") == "5,6"
