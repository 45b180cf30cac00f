"""What an execution keeps between greedy steps: chunks of encoded rows and their
per-row state, within a byte budget.

One store serves the three executions: the in-memory backend keeps every chunk's state
(no budget), a resident task keeps the states that fit its budget (the first that fit
stay; a chunk beyond the budget rebuilds its state every step), and a Spark Python worker
keeps chunks it has decoded and their states, the least recently used going first when a
new one does not fit (partitions move between workers, so the newest is the likeliest to
be asked for again). What is kept only saves work: a chunk or state that is not there is
rebuilt from the codes, with the same integers, so a store never changes a result.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any


class ChunkStore:
    """Items by key, each with a size in bytes, at most ``budget`` bytes in all.

    Parameters
    ----------
    budget : int or None
        Bytes the items may take together (None: no bound).
    evict : bool
        When an item does not fit: drop the least recently used ones until it does (True)
        or refuse it (False). An item larger than the whole budget is always refused.

    Examples
    --------
    >>> s = ChunkStore(10)
    >>> s.put("a", "x", 6), s.put("b", "y", 6), "a" in s, "b" in s, s.nbytes
    ([], ['a'], False, True, 6)
    """

    def __init__(self, budget: int | None = None, evict: bool = True):
        self.budget = budget
        self.evict = evict
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self.nbytes = 0

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def keys(self) -> list[Hashable]:
        """The keys, least recently used first."""
        return list(self._items)

    def fits(self, size: int) -> bool:
        """Whether an item of ``size`` bytes would be kept now (without evicting)."""
        return self.budget is None or self.nbytes + size <= self.budget

    def put(self, key: Hashable, item: Any, size: int) -> list[Hashable]:
        """Keep ``item`` under ``key`` (replacing an older one), if it fits.

        Returns
        -------
        list
            The keys of the items evicted to make room for it, least recently used first
            (none when it fitted or was refused). Whether it was kept: ``key in store``.
        """
        self.take(key)
        if self.budget is not None and size > self.budget:
            return []
        evicted: list[Hashable] = []
        if not self.fits(size):
            if not self.evict:
                return []
            while not self.fits(size):
                old_key, (_, old) = self._items.popitem(last=False)
                self.nbytes -= old
                evicted.append(old_key)
        self._items[key] = (item, size)
        self.nbytes += size
        return evicted

    def get(self, key: Hashable) -> Any:
        """The item under ``key`` (None if not kept), now the most recently used."""
        kept = self._items.get(key)
        if kept is None:
            return None
        self._items.move_to_end(key)
        return kept[0]

    def peek(self, key: Hashable) -> Any:
        """The item under ``key`` (None if not kept), its place left as it was."""
        kept = self._items.get(key)
        return None if kept is None else kept[0]

    def take(self, key: Hashable) -> Any:
        """Remove and return the item under ``key`` (None if not kept)."""
        kept = self._items.pop(key, None)
        if kept is None:
            return None
        self.nbytes -= kept[1]
        return kept[0]

    def reset(self) -> None:
        """Forget every item."""
        self._items.clear()
        self.nbytes = 0
