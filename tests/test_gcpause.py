"""gcpause.paused: collections off meanwhile; what was made joins the oldest generation."""
import gc

from tribuild.gcpause import paused


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
