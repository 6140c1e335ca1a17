"""Unit order: costliest first, deterministic ties; a failure is reported and the other units
still run."""

from __future__ import annotations

from tribuild.driver.pool.units import Unit, order, run_serial
from tribuild.driver.progress import Quiet


def _unit(name, cost=1.0, query=None):
    return Unit(name, query or (lambda db, n=name: n.upper()), (), cost)


def test_costliest_first_then_the_given_order():
    units = [_unit("a", 1), _unit("b", 2), _unit("c", 5), _unit("d", 1), _unit("e", 2)]
    assert [u.name for u in order(units)] == ["c", "b", "e", "a", "d"]
    assert [u.name for u in order(units[::-1])] == ["c", "e", "b", "d", "a"]


def test_a_failing_unit_does_not_stop_the_others():
    def boom(db):
        raise ValueError("bug")

    units = [_unit("a", query=boom), _unit("b"), _unit("c")]
    outcomes = run_serial(None, units, Quiet())
    assert "ValueError: bug" in outcomes["a"].error
    assert outcomes["b"].value == "B" and outcomes["c"].value == "C"


def test_the_prelude_is_computed_in_the_database_the_unit_runs_in_before_it():
    calls = []

    def query(db, name):
        calls.append((db, name))
        return name.upper()

    unit = Unit("u", query, ("own",), prelude=lambda db: [(query, (db + "-a",)), (query, ("b",))])
    outcomes = run_serial("db", [unit], Quiet())
    assert outcomes["u"].value == "OWN"
    assert calls == [("db", "db-a"), ("db", "b"), ("db", "own")]
    assert unit.keys("x") == [(query, ("x-a",)), (query, ("b",)), (query, ("own",))]
