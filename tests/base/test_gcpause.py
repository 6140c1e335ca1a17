"""gcpause: collections paused (what was made joins the oldest generation); units settled
out of reach; databases held until the process ends only where it ends with ``os._exit``."""

import gc
import weakref

from tribuild.base import gcpause
from tribuild.base.gcpause import paused, unit_by_unit
from tribuild.driver.session import Project, open_database


def test_objects_made_while_paused_are_not_left_in_the_young_generations():
    assert gc.isenabled()
    with paused():
        assert not gc.isenabled()
        made = [[i] for i in range(1000)]
    assert gc.isenabled()
    young = {id(o) for generation in (0, 1) for o in gc.get_objects(generation)}
    assert not any(id(o) in young for o in made)
    assert any(o is made for o in gc.get_objects(2))


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    try:
        with paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_settled_units_are_out_of_reach_until_the_loop_ends():
    with unit_by_unit() as settle:
        made = [[i] for i in range(1000)]
        settle()
        assert not any(o is made for g in (0, 1, 2) for o in gc.get_objects(g))
    assert any(o is made for o in gc.get_objects(2))


def _opened_and_dropped(tmp_path) -> weakref.ref:
    """A weak reference to a database opened in a call that has returned."""
    project = Project(str(tmp_path), None, str(tmp_path / "cache"))
    return weakref.ref(open_database(project))


def test_a_library_caller_holds_no_database(tmp_path, monkeypatch):
    monkeypatch.setattr(gcpause, "_HELD", None)
    assert _opened_and_dropped(tmp_path)() is None


def test_a_process_ending_with_exit_holds_its_databases(tmp_path, monkeypatch):
    monkeypatch.setattr(gcpause, "_HELD", None)
    gcpause.hold_until_exit()
    first = _opened_and_dropped(tmp_path)
    gcpause.hold_until_exit()  # a second call keeps what the first held
    second = _opened_and_dropped(tmp_path)
    assert first() is not None and second() is not None
    assert gcpause._HELD == [first(), second()]
