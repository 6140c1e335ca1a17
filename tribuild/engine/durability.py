"""Revisions and durability.

Terms:
- *revision*: a counter that bumps on every effective input change (a set to a different
  value, a change of durability, a removal).
- *durability*: how rarely an input is expected to change (LOW: files being edited, HIGH:
  the standard library). A memo's durability is the minimum durability of the inputs it
  reads transitively, so a change to an input of durability D can affect memos of any
  durability <= D and no memo of a higher durability.
- *last change per level*: ``DurabilityClock.changed[d]`` is the last revision in which an
  input that memos of durability ``d`` may depend on changed, i.e. an input of durability
  >= d. A memo of durability ``d`` verified at revision ``v`` with ``changed[d] <= v`` is
  valid without looking at its dependencies (salsa's durability shortcut).
"""

from __future__ import annotations

from enum import IntEnum


class Durability(IntEnum):
    LOW = 0
    MEDIUM = 1
    HIGH = 2


class DurabilityClock:
    """The last revision in which each durability level saw a change."""

    __slots__ = ("changed",)

    def __init__(self, changed: list[int] | None = None):
        self.changed = list(changed) if changed else [0] * len(Durability)

    def report_change(self, durability: int, revision: int) -> None:
        """An input of ``durability`` changed at ``revision``: memos of every level up to it
        may be affected."""
        for level in range(durability + 1):
            self.changed[level] = revision
