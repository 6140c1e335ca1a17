"""`tribuild watch --json` as a process: JSON events on stdout, --on-success, the project
lock (a concurrent `tribuild build` waits with a clear message), SIGINT or SIGTERM exits 0
with the cache saved."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from tests.lines import IGNORED_SIGINT, Lines
from tests.schemas import validate

TRIBUILD = [sys.executable, "-m", "tribuild"]


def _next(events: Lines, kind: str, hint: str = "") -> dict:
    """The next event of ``kind``, within 120 s (the ones before it checked and skipped)."""
    while line := events.next(120, f"a `{kind}` event{hint}"):
        event = json.loads(line)
        validate("watch-event", event)  # every line fits the documented schema
        if event["event"] == kind:
            return event
    raise AssertionError(f"no `{kind}` event before exit")


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_watch_process_locks_runs_the_command_and_stops_cleanly(project, stop):
    cache = project / ".tribuild-cache"
    proc = subprocess.Popen(
        TRIBUILD + ["watch", "--json", "mlp", "--on-success", "touch ok.flag"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    events = Lines(proc.stdout)
    build = None
    try:
        assert _next(events, "watching")["targets"] == ["mlp"]
        first = _next(events, "rebuild")
        assert first["ok"] and "mlp.py" in first["written"]
        assert _next(events, "command") == {
            "version": 1,
            "event": "command",
            "command": "touch ok.flag",
            "code": 0,
        }
        assert (project / "ok.flag").exists()
        build = subprocess.Popen(
            TRIBUILD + ["build", "-q", "mlp"],
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        waiting = Lines(build.stderr).next(120, "the build to say it waits")
        assert waiting.startswith(f"waiting for another tribuild (pid {proc.pid})"), waiting
        assert build.poll() is None
        proc.send_signal(stop)
        hint = IGNORED_SIGINT if stop == signal.SIGINT else ""
        assert _next(events, "stopped", hint) == {"version": 1, "event": "stopped"}
        assert proc.wait(60) == 0
        assert build.wait(60) == 0
    finally:
        proc.kill()
        if build is not None:
            build.kill()
    assert list(cache.glob("graph-*.json"))
