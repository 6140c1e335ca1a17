import threading
import time

from tribuild.engine import Cancelled, derived, input_query


@input_query
def knob(db, name): ...


@derived
def step(db, i):
    return knob(db, "x") * i


started = threading.Event()


@derived
def long_sum(db):
    total = 0
    for i in range(knob(db, "n")):
        total += step(db, i)
        if i == 5:
            started.set()
        if i >= 5:
            time.sleep(0.001)  # long enough that the writer arrives mid-revision
    return total


def _read_in_thread(db, query, outcome):
    def body():
        try:
            outcome["value"] = query(db)
        except Cancelled as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=body)
    thread.start()
    return thread


def test_set_from_another_thread_cancels_the_running_revision(db):
    db.set(knob, "x", 1)
    db.set(knob, "n", 100_000)
    started.clear()
    outcome = {}
    reader = _read_in_thread(db, long_sum, outcome)
    assert started.wait(10)
    db.set(knob, "n", 20)  # returns once the reader has unwound
    reader.join(10)
    assert not reader.is_alive()
    assert isinstance(outcome.get("error"), Cancelled) and "value" not in outcome
    assert db.why(long_sum) == [] and "long_sum" not in db.stats()
    with db.log() as log:
        assert long_sum(db) == sum(range(20))
    # steps completed before the cancel are kept (their memos are whole); the rest run now
    first_new = 20 - (len(log.executed) - 1)
    assert first_new > 5
    assert log.executed == [("step", (i,)) for i in range(first_new, 20)] + [("long_sum", ())]


@derived
def sleepy_step(db, i):
    time.sleep(0.0002)  # lets the writer in while readers are mid-revision
    return knob(db, "x") * i


@derived
def step_total(db):
    return sum(sleepy_step(db, i) for i in range(knob(db, "n")))


def test_readers_retrying_after_cancellation_see_consistent_values(db):
    db.set(knob, "x", 0)
    db.set(knob, "n", 50)
    seen: list[int] = []
    cancelled: list[Cancelled] = []
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            try:
                seen.append(step_total(db))
            except Cancelled as exc:
                cancelled.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for x in range(1, 30):
        db.set(knob, "x", x)
        time.sleep(0.002)
    stop.set()
    for t in threads:
        t.join(10)
    assert cancelled, "no read was ever cancelled: the test did not exercise cancellation"
    assert seen and all(total % sum(range(50)) == 0 for total in seen)
    assert step_total(db) == 29 * sum(range(50))
