"""What the checker may ask about the rest of the program: the ``Env`` protocol.

Terms:
- *ItemRef*: names one user item (its file, its id in that file, and its kind: ``fn``,
  ``layer`` (stateful), ``functional`` (functional layer) or ``const``). Kind
  ``unresolved`` marks a name that a failing import promised: the checker uses it silently,
  since the import's own error already explains it.
- *Env*: the view from one file: the user items visible there (defined or imported), their
  signatures and constant values. The query layer implements it with queries, so every
  question the checker asks becomes a recorded dependency; ``DictEnv`` is the plain
  implementation used by tests.
"""

from __future__ import annotations

from tribuild.base.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    from tribuild.lang.check.values import Value
    from tribuild.lang.signature import Signature
else:
    Protocol = object  # at run time Env is only documentation: nothing subclasses it


@record
class ItemRef:
    path: str
    item_id: str
    kind: str


class Env(Protocol):
    def lookup(self, name: str) -> ItemRef | None:
        """The user item visible under ``name`` in this file, or None."""

    def signature(self, ref: ItemRef) -> Signature:
        """The signature of a user item."""

    def const_value(self, ref: ItemRef) -> Value:
        """The evaluated value of a top-level constant."""

    def scope_of(self, ref: ItemRef) -> Env:
        """The Env of the file that defines ``ref`` (where its parameter defaults are evaluated)."""

    def visible_names(self) -> tuple[str, ...]:
        """Every user name visible in this file, for "did you mean" suggestions."""


class DictEnv:
    """An Env over plain dicts: ``names`` per file, and signatures/values per ItemRef."""

    __slots__ = ("path", "names", "signatures", "consts")

    def __init__(
        self,
        path: str,
        names: dict[str, dict[str, ItemRef]] | None = None,
        signatures: dict[ItemRef, Signature] | None = None,
        consts: dict[ItemRef, Value] | None = None,
    ):
        self.path = path
        self.names = {} if names is None else names
        self.signatures = {} if signatures is None else signatures
        self.consts = {} if consts is None else consts

    def lookup(self, name: str) -> ItemRef | None:
        return self.names.get(self.path, {}).get(name)

    def signature(self, ref: ItemRef) -> Signature:
        return self.signatures[ref]

    def const_value(self, ref: ItemRef) -> Value:
        return self.consts[ref]

    def scope_of(self, ref: ItemRef) -> DictEnv:
        return DictEnv(ref.path, self.names, self.signatures, self.consts)

    def visible_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.names.get(self.path, {})))
