from tribuild.engine import QueryStats, derived, input_query
from tribuild.engine import fetch as fetch_module


@input_query
def number(db, i): ...


@derived
def double(db, i):
    return 2 * number(db, i)


@derived
def pair(db):
    return double(db, 0) + double(db, 1)


def test_counters_count_executions_validations_and_hits(db):
    db.set(number, 0, 1)
    db.set(number, 1, 2)
    pair(db)
    pair(db)
    db.set(number, 1, 3)
    pair(db)
    stats = db.stats()
    assert (stats["pair"].executed, stats["pair"].validated, stats["pair"].hits) == (2, 0, 1)
    assert (stats["double"].executed, stats["double"].validated, stats["double"].hits) == (3, 1, 2)
    assert (stats["number"].executed, stats["number"].hits) == (0, 3)


class FakeClock:
    """perf_counter stand-in: time only moves when a query body says so."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_seconds_are_each_querys_own_time(db, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(fetch_module, "perf_counter", clock)

    @derived
    def inner(db):
        clock.now += 3.0
        return 1

    @derived
    def outer(db):
        clock.now += 1.0
        value = inner(db)
        clock.now += 0.5
        return value

    outer(db)
    stats = db.stats()
    assert stats["inner"] == QueryStats(executed=1, validated=0, hits=0, seconds=3.0)
    assert stats["outer"] == QueryStats(executed=1, validated=0, hits=0, seconds=1.5)


def test_log_records_events_only_inside_its_block(db):
    db.set(number, 0, 1)
    double(db, 0)
    with db.log() as log:
        double(db, 0)
    db.set(number, 0, 2)
    double(db, 0)
    assert (log.executed, log.validated, log.hits) == ([], [], [("double", (0,))])


def test_a_log_limited_to_some_queries_keeps_only_their_events(db):
    db.set(number, 0, 1)
    db.set(number, 1, 2)
    with db.log(queries=[pair]) as only_pair, db.log() as every:
        pair(db)
        pair(db)
    assert (only_pair.executed, only_pair.hits) == ([("pair", ())], [("pair", ())])
    assert every.executed == [("double", (0,)), ("double", (1,)), ("pair", ())]
    assert ("number", (0,)) in every.hits and only_pair.validated == []
