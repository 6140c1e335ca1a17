"""Values derived from a tensor, kept while it is the same tensor unmodified: the launcher's
unpacked codes, the zero-skip plans, the native kernels' converted weights and their prepared
launches.

Terms:
- *stamp*: what a value was made for: the tensor object (a weak reference, so that the cache
  keeps no weight alive) and its version counter (``Tensor._version``, which every in-place
  change bumps). A value is *held* while its tensor is the very object it was made for (an
  ``id`` is reused once a tensor dies, so the key alone proves nothing) at the same version.
- *forgetting the dead*: by default an entry goes when its tensor dies (the weak reference's
  callback), as a weight's derived form is as large as the weight; a cache of many small
  entries may instead keep them until ``clear`` (the callback costs a little per ``put``).
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable
from typing import Generic, TypeVar

import torch

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TensorCache(Generic[K, V]):
    """``key -> value`` for values made from a tensor, each held while its tensor is the same
    object at the same version (see *stamp*)."""

    __slots__ = ("_entries", "_forget_dead")

    def __init__(self, forget_dead: bool = True) -> None:
        self._entries: dict[K, tuple[weakref.ref[torch.Tensor], int, V]] = {}
        self._forget_dead = forget_dead

    def get(self, key: K, tensor: torch.Tensor) -> V | None:
        """The value kept for ``key`` if it was made from ``tensor`` as it is now, else None."""
        hit = self._entries.get(key)
        if hit is not None and hit[0]() is tensor and hit[1] == tensor._version:
            return hit[2]
        return None

    def put(self, key: K, tensor: torch.Tensor, value: V) -> V:
        """Keep ``value``, made from ``tensor`` as it is now, for ``key``; returns it."""
        if self._forget_dead:
            entries = self._entries

            def forget(ref: weakref.ref[torch.Tensor], key: K = key) -> None:
                if entries.get(key, (None,))[0] is ref:  # not a newer entry of the same key
                    del entries[key]

            ref = weakref.ref(tensor, forget)
        else:
            ref = weakref.ref(tensor)
        self._entries[key] = (ref, tensor._version, value)
        return value

    def held(self) -> list[tuple[torch.Tensor, V]]:
        """Each tensor alive with a value kept for it, and that value (tests: what it holds)."""
        return [
            (t, value) for ref, _, value in list(self._entries.values()) if (t := ref()) is not None
        ]

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
