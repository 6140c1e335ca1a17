"""Signatures, checks and instances as queries.

Terms:
- *signature(path, item_id)*: what other items may see of an item (``lang.signature``). It
  has no spans, so a body or member edit re-computes it to an equal value and everything
  that only names the item stays green.
- *QueryEnv*: the checker's ``Env`` answered by queries, so each name lookup, signature and
  constant the checker asks for becomes a recorded dependency.
- *item_diagnostics(path, item_id)*: everything the checker says about one item outside any
  build target (construction parameters symbolic).
"""
from __future__ import annotations

from dataclasses import dataclass

from tribuild.diagnostics import Diagnostic
from tribuild.engine import derived
from tribuild.lang.env import ItemRef
from tribuild.lang.signature import Signature, signature_of
from tribuild.queries.names import scope
from tribuild.queries.syntax import item_ast


@dataclass(frozen=True, slots=True)
class SignatureResult:
    signature: Signature
    diagnostics: tuple[Diagnostic, ...]


@derived
def signature(db, path: str, item_id: str) -> SignatureResult:
    sig, diags = signature_of(item_ast(db, path, item_id).item, path, item_id)
    return SignatureResult(sig, diags)


class QueryEnv:
    """The view from one file, through the database."""

    def __init__(self, db, path: str):
        self.db = db
        self.path = path
        self._names: dict[str, ItemRef] | None = None

    def _scope(self) -> dict[str, ItemRef]:
        if self._names is None:
            self._names = dict(scope(self.db, self.path).names)
        return self._names

    def lookup(self, name: str) -> ItemRef | None:
        return self._scope().get(name)

    def signature(self, ref: ItemRef) -> Signature:
        return signature(self.db, ref.path, ref.item_id).signature

    def scope_of(self, ref: ItemRef) -> "QueryEnv":
        return QueryEnv(self.db, ref.path)

    def visible_names(self) -> tuple[str, ...]:
        return tuple(self._scope())


@derived
def item_diagnostics(db, path: str, item_id: str) -> tuple[Diagnostic, ...]:
    return signature(db, path, item_id).diagnostics
