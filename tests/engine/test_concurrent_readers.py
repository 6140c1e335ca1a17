import random
import threading

from tribuild.engine import derived, input_query

N, THREADS, ROUNDS = 200, 8, 3


@input_query
def number(db, i): ...


@derived
def square(db, i):
    return number(db, i) ** 2


@derived
def total(db):
    return sum(square(db, i) for i in range(N))


def test_concurrent_readers_get_correct_values_and_consistent_counters(db):
    for i in range(N):
        db.set(number, i, i)
    results: list[tuple[int, int]] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(THREADS)

    def reader(seed):
        order = list(range(N)) * ROUNDS
        random.Random(seed).shuffle(order)
        barrier.wait()
        try:
            results.extend((i, square(db, i)) for i in order)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert len(results) == N * THREADS * ROUNDS
    assert all(value == i * i for i, value in results)
    stats = db.stats()
    assert stats["square"].executed == N
    assert stats["square"].hits == N * THREADS * ROUNDS - N
    assert stats["number"].hits == N
    assert total(db) == sum(i * i for i in range(N))
