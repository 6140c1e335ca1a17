"""Fixtures of the watch tests: a copy of the zoo's models with a small Tribuild.toml, a
watcher running in a thread of this process (its JSON events collected), and a clean
`tribuild build` of a fresh copy of the same sources to compare with."""

from __future__ import annotations

import json
import os
import queue
import shutil
import threading
from pathlib import Path

import pytest

from tests.driver.conftest import snapshot
from tribuild.cli import main
from tribuild.driver.session import Project
from tribuild.watch.loop import Options, Watcher
from tribuild.watch.screen import Json

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TIMEOUT = 60.0


@pytest.fixture
def project(tmp_path) -> Path:
    dest = tmp_path / "proj"
    shutil.copytree(REPO / "models", dest / "models")
    shutil.copy(HERE / "fixtures" / "Tribuild.toml", dest / "Tribuild.toml")
    return dest


class Events:
    """A file-like stream for ``Json``: each line becomes an event in a queue."""

    def __init__(self):
        self.queue: queue.Queue = queue.Queue()

    def write(self, text: str) -> None:
        for line in text.splitlines():
            self.queue.put(json.loads(line))

    def flush(self) -> None: ...

    def next(self, *kinds: str, timeout: float = TIMEOUT) -> dict:
        """The next event of one of ``kinds`` (others are skipped)."""
        while True:
            event = self.queue.get(timeout=timeout)
            if event["event"] in kinds:
                return event


class Session:
    """A watcher running in a thread; ``stop()`` stops it and waits."""

    def __init__(self, root: Path, **options):
        self.events = Events()
        self.watcher = Watcher(Project.discover(str(root)), Options(**options), Json(self.events))
        self.thread = threading.Thread(target=self.watcher.run)
        self.thread.start()

    def stop(self) -> None:
        self.watcher.stop()
        self.thread.join(TIMEOUT)
        assert not self.thread.is_alive()


@pytest.fixture
def watch(project):
    sessions = []

    def start(**options) -> Session:
        sessions.append(Session(project, **options))
        return sessions[-1]

    yield start
    for session in sessions:
        session.stop()


def save(path: Path, data: bytes, atomic: bool) -> None:
    """Write as editors do: in place, or to a temporary file renamed over ``path``."""
    if not atomic:
        path.write_bytes(data)
        return
    tmp = path.with_name(f".{path.name}.swp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def clean_build(root: Path, dest: Path, monkeypatch) -> tuple[int, dict[str, bytes]]:
    """`tribuild build` of a fresh copy of ``root``'s sources: (exit code, its outputs)."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(root / "models", dest / "models")
    shutil.copy(root / "Tribuild.toml", dest / "Tribuild.toml")
    with monkeypatch.context() as m:
        m.chdir(dest)
        code = main(["build", "-q"])
    return code, snapshot(dest / "out")
