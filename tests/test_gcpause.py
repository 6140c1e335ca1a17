"""gcpause: collections paused (what was made joins the oldest generation); units settled out of reach."""
import gc

from tribuild.gcpause import paused, unit_by_unit


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
