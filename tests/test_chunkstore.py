"""The store every execution keeps chunks and states in (:mod:`vmi_spark.core.chunkstore`),
against a plain list model written in the test, and the Python worker's cache built on it."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from vmi_spark.core.chunkstore import ChunkStore

ops = st.lists(st.tuples(st.sampled_from(["put", "get", "peek", "take"]),
                         st.integers(0, 5), st.integers(0, 12)), max_size=60)


@settings(max_examples=300, deadline=None)
@given(ops=ops, budget=st.sampled_from([None, 0, 7, 20]), evict=st.booleans())
def test_store_follows_the_list_model(ops, budget, evict):
    store, rows = ChunkStore(budget, evict), []  # rows: the model, (key, item, size)

    def total():
        return sum(r[2] for r in rows)

    def take(key):
        for i, r in enumerate(rows):
            if r[0] == key:
                del rows[i]
                return r
        return None

    for n, (op, key, size) in enumerate(ops):
        if op == "put":
            take(key)
            want = budget is None or size <= budget and (evict or total() + size <= budget)
            gone = []  # the keys evicted, least recently used first
            if want:
                while budget is not None and total() + size > budget:
                    gone.append(rows.pop(0)[0])
                rows.append((key, n, size))
            assert store.put(key, n, size) == gone
            assert (key in store) == want
        elif op == "get":
            r = take(key)
            if r is not None:
                rows.append(r)  # most recently used: last out
            assert store.get(key) == (None if r is None else r[1])
        elif op == "peek":
            r = next((r for r in rows if r[0] == key), None)
            assert store.peek(key) == (None if r is None else r[1])
        else:
            r = take(key)
            assert store.take(key) == (None if r is None else r[1])
        assert store.keys() == [r[0] for r in rows] and store.nbytes == total()
        assert budget is None or store.nbytes <= budget
    store.reset()
    assert len(store) == 0 and store.nbytes == 0


def test_worker_cache_forgets_ownership_of_what_it_evicts_and_resets():
    """A chunk pushed out of a worker's byte budget is no longer owned (the next pass must
    not count on it); states are kept within the budget a pass set, the oldest out first;
    ``reset`` forgets chunks, states, owners and passes."""
    from vmi_spark.core.bound import ChunkState
    from vmi_spark.spark.executions.passes import WorkerCache

    codes = np.zeros((2, 10), dtype=np.uint8)  # 20 bytes, + 80 of y (int64)
    y = np.zeros(10, dtype=np.int64)
    cache = WorkerCache(budget=250)
    cache.put(("t", 1), codes, y)
    cache.put(("t", 2), codes, y)
    cache.own(("t", 1), 0)
    cache.own(("t", 2), 0)
    assert cache.get(("t", 1)) is not None  # 1 is now the most recently used
    cache.put(("t", 3), codes, y)  # 300 bytes > 250: the oldest, chunk 2, goes
    assert ("t", 2) not in cache.chunks and ("t", 2) not in cache.owned
    assert cache.owned == {("t", 1): 0} and ("t", 3) in cache.chunks
    cache.own(("t", 9), 4)  # never held: not owned
    assert ("t", 9) not in cache.owned
    assert cache.owns(("t", 1), 0) and not cache.owns(("t", 1), 1)  # stale: dropped
    assert ("t", 1) not in cache.chunks
    cache.scored_in("t", 5).add(3)
    state = ChunkState(np.zeros((10, 2)), np.zeros((2, 10, 1)), (0,))  # 320 bytes
    cache.budget_states(2 * state.nbytes)
    for bid in (1, 2, 3):
        cache.put_state(("t", bid), state)
    assert cache.states.keys() == [("t", 2), ("t", 3)]  # the oldest went
    cache.budget_states(state.nbytes)  # a smaller budget: the next put makes room
    cache.put_state(("t", 4), state)
    assert cache.states.keys() == [("t", 4)]
    cache.reset()
    assert len(cache.chunks) == 0 and not cache.owned and not cache.scored
