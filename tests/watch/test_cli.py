"""`tribuild watch --json` as a process: JSON events on stdout, --on-success, the project
lock (a concurrent `tribuild build` waits with a clear message), SIGINT or SIGTERM exits 0
with the cache saved."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from tests.schemas import validate

TRIBUILD = [sys.executable, "-m", "tribuild"]


def _next(proc, kind: str) -> dict:
    for line in proc.stdout:
        event = json.loads(line)
        validate("watch-event", event)  # every line fits the documented schema
        if event["event"] == kind:
            return event
    raise AssertionError(f"no `{kind}` event before exit: {proc.stderr.read()}")


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
    try:
        assert _next(proc, "watching")["targets"] == ["mlp"]
        first = _next(proc, "rebuild")
        assert first["ok"] and "mlp.py" in first["written"]
        assert _next(proc, "command") == {
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
        waiting = build.stderr.readline()
        assert waiting.startswith(f"waiting for another tribuild (pid {proc.pid})"), waiting
        assert build.poll() is None
        proc.send_signal(stop)
        assert _next(proc, "stopped") == {"version": 1, "event": "stopped"}
        assert proc.wait(60) == 0
        assert build.wait(60) == 0
    finally:
        proc.kill()
    assert list(cache.glob("graph-*.json"))
