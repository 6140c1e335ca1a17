"""The parts of the watch: which events matter (data-driven), the debounce, the screens."""

from __future__ import annotations

import io
import threading
import time

import pytest

from tribuild.watch.events import Changes, Scope
from tribuild.watch.screen import Plain, Rebuild

SCOPE = Scope("/p", "/p/Tribuild.toml", ("/p/models",), frozenset({"/p/lib/extra.tri"}))


@pytest.mark.parametrize(
    "path, is_dir, expected",
    [
        ("/p/Tribuild.toml", False, "Tribuild.toml"),
        ("/p/models/a.tri", False, "models/a.tri"),
        ("/p/models/sub/b.tri", False, "models/sub/b.tri"),
        ("/p/models/.a.tri.swp", False, None),  # an editor's temporary file
        ("/p/models/a.tri~", False, None),
        ("/p/models/4913", False, None),
        ("/p/lib/extra.tri", False, "lib/extra.tri"),  # imported from outside the sources
        ("/p/lib/other.tri", False, None),  # outside the sources, not imported
        ("/p/out/mlp.py", False, None),  # an output
        ("/p/models/sub", True, "models/sub"),  # a folder created, moved or deleted
        ("/p/lib", True, None),
        ("/elsewhere/models/a.tri", False, None),
        ("/p/modelsx/a.tri", False, None),
    ],
)
def test_which_events_matter(path, is_dir, expected):
    assert SCOPE.relevant(path, is_dir) == expected


def test_watched_folders(tmp_path):
    (tmp_path / "models" / "sub").mkdir(parents=True)
    (tmp_path / "lib").mkdir()
    root = str(tmp_path)
    scope = Scope(
        root,
        f"{root}/Tribuild.toml",
        (f"{root}/models", f"{root}/missing"),
        frozenset({f"{root}/models/sub/a.tri", f"{root}/lib/b.tri"}),
    )
    assert scope.folders() == {f"{root}/models": True, root: False, f"{root}/lib": False}


def test_a_burst_of_events_is_one_batch_and_bumps_the_generation_each_time():
    changes = Changes(debounce=0.05)
    for path in ("a.tri", "b.tri", "a.tri"):
        changes.note({path})
    start = time.monotonic()
    batch = changes.take()
    assert (batch.paths, batch.generation) == (frozenset({"a.tri", "b.tri"}), 3)
    assert batch.due <= time.monotonic() and batch.due <= start + 0.05  # 50 ms after the last note
    with changes.current(3) as current:
        assert current
    changes.note({"c.tri"})
    with changes.current(3) as current:
        assert not current


def test_a_batch_is_taken_after_the_settle_period_and_written_after_the_debounce():
    changes = Changes(debounce=0.05)
    start = time.monotonic()
    changes.note({"a.tri"})
    batch = changes.take()
    assert changes.settle == 0.025 and batch.due >= start + 0.025
    assert changes.quiet(batch.generation) and time.monotonic() >= start + 0.05
    changes.note({"b.tri"})
    assert not changes.quiet(batch.generation)


def test_a_newer_event_or_stop_ends_the_wait_for_quiet():
    changes = Changes(debounce=600.0)
    for end in (lambda: changes.note({"b.tri"}), changes.stop):
        changes.note({"a.tri"})
        generation = changes.generation
        threading.Timer(0.01, end).start()
        assert not changes.quiet(generation)  # long before the 600 s debounce


def test_stop_ends_a_waiting_take():
    changes = Changes(debounce=0.05)
    got = []
    taker = threading.Thread(target=lambda: got.append(changes.take()))
    taker.start()
    changes.stop()
    taker.join(10)
    assert got == [None]


def _rebuild(failed: tuple[str, ...], errors=()) -> Rebuild:
    return Rebuild(
        ("models/mlp.tri",),
        {"lexed": 1, "read_error": 1},
        40,
        ("mlp.py",),
        (),
        0.0123,
        {"late": 0.001, "build units": 0.01},
        failed,
        (),
        errors,
        None,
    )


def test_plain_screen_reports_each_rebuild_and_when_errors_are_fixed():
    stream = io.StringIO()
    screen = Plain(stream)
    screen.rebuilt(_rebuild(("mlp",), (("mlp", "Traceback: boom"),)))
    screen.rebuilt(_rebuild(()))
    lines = stream.getvalue().splitlines()
    assert lines[0].endswith(
        "1 file changed: 2 queries re-run, 40 reused, 1 outputs written, 12 ms; failed: mlp"
    )
    assert lines[1] == "error: internal error while building `mlp` (a bug in tribuild):"
    assert lines[-1] == "errors fixed"


def test_plain_screen_says_errors_fixed_after_a_problem_that_stopped_the_targets():
    stream = io.StringIO()
    screen = Plain(stream)
    screen.problem("Tribuild.toml:3:1: error: ...", failing=False)  # previous config kept
    screen.rebuilt(_rebuild(()))
    screen.problem("target `mlp` cannot be built: cannot read the entry file ...")
    screen.rebuilt(_rebuild(("mlp",)))  # the others built; mlp is still failing
    assert "errors fixed" not in stream.getvalue()
    screen.rebuilt(_rebuild(()))
    assert stream.getvalue().count("errors fixed") == 1 and stream.getvalue().endswith(
        "errors fixed\n"
    )


def test_live_screen_shows_errors_below_the_status_lines_until_fixed():
    from rich.console import Console

    from tribuild.watch.screen import Live

    stream = io.StringIO()
    screen = Live(Console(file=stream, force_terminal=True, width=100))
    screen.rebuilt(_rebuild(("mlp",), (("mlp", "Traceback: boom"),)))
    assert "failed: mlp" in stream.getvalue() and "Traceback: boom" in stream.getvalue()
    assert any("boom" in text for text in screen.shown)
    screen.rebuilt(_rebuild(()))
    assert screen.shown == [] and stream.getvalue().count("outputs written") == 2
    screen.stopped()
