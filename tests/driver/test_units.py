"""Unit order: dependencies first, the longest chain of work first among ready units,
deterministic ties; failures skip dependents only."""

from __future__ import annotations

from tribuild.driver.pool.units import Unit, order, priority, run_serial
from tribuild.driver.progress import Quiet


def _unit(name, deps=(), cost=1.0, query=None):
    return Unit(name, query or (lambda db, n=name: n.upper()), (), tuple(deps), cost)


def test_dependencies_first_then_critical_path_first():
    units = [
        _unit("a", cost=1),
        _unit("b", cost=2),
        _unit("c", ["a"], cost=5),
        _unit("d", ["b"], cost=1),
        _unit("e", cost=2),
    ]
    assert priority(units) == {"a": 6, "b": 3, "c": 5, "d": 1, "e": 2}
    assert [u.name for u in order(units)] == ["a", "b", "e", "c", "d"]
    assert [u.name for u in order(units[::-1])] == ["a", "b", "e", "c", "d"]


def test_a_failing_unit_skips_its_dependents_only():
    def boom(db):
        raise ValueError("bug")

    units = [_unit("a", query=boom), _unit("b", ["a"]), _unit("c")]
    outcomes = run_serial(None, units, Quiet())
    assert "ValueError: bug" in outcomes["a"].error
    assert outcomes["b"].skipped == "a" and outcomes["c"].value == "C"


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
