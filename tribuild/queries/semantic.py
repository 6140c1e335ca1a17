"""Signatures, constants, checks and instances as queries.

Terms:
- *signature(path, item_id)*: what other items may see of an item (``lang.signature``). It
  has no spans, so a body or member edit re-computes it to an equal value and everything
  that only names the item stays green.
- *QueryEnv*: the checker's ``Env`` answered by queries, so each name lookup, signature and
  constant the checker asks for becomes a recorded dependency.
- *item_diagnostics(path, item_id)*: what the checker says about one item outside any build
  target (construction parameters symbolic), signature problems included.
- *checked_instance(key)*: one concrete instantiation (``InstanceKey``: layer + construction
  values), checked with those values. Its ``children`` are the user-layer instances it builds.
  It reads ``instance_members(key)``, the members evaluated, which reads only the item's
  ``item_construction``: a body edit re-checks `forward` without evaluating the members again.
  ``generic_members(path, item_id)`` is the same first step of the generic check.
- *const cycle*: a constant whose value names itself, directly or through other constants or
  the parameter defaults of layers it builds (E0207); its value is POISON, so checking it ends.
- *default instance*: a layer whose construction parameters all have defaults; ``tribuild
  check`` instantiates it even outside a target.
"""

from __future__ import annotations

from functools import partial

from tribuild.base.record import record
from tribuild.diagnostics import Diagnostic, Label, Loc, register
from tribuild.engine import derived
from tribuild.lang import (
    POISON,
    CheckedInstance,
    InstanceKey,
    ItemRef,
    Members,
    Signature,
    Value,
    ast,
    check_instance,
    check_item,
    const_value_of,
    evaluate_generic_members,
    evaluate_members,
    free_names,
    instance_key,
    signature_of,
)
from tribuild.queries.names import scope
from tribuild.queries.syntax import indexed, item_ast, item_construction
from tribuild.queries.walks import acyclic_and_settled, settle_deepest_first, shortest_cycle

E_CONST_CYCLE = register("E0207", "a constant depends on itself")


@record
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
            self._names = indexed(
                "scope", self.path, scope(self.db, self.path), lambda s: dict(s.names)
            )
        return self._names

    def lookup(self, name: str) -> ItemRef | None:
        return self._scope().get(name)

    def signature(self, ref: ItemRef) -> Signature:
        return signature(self.db, ref.path, ref.item_id).signature

    def const_value(self, ref: ItemRef) -> Value:
        return const_value(self.db, ref.path, ref.item_id)

    def scope_of(self, ref: ItemRef) -> "QueryEnv":
        return QueryEnv(self.db, ref.path)

    def visible_names(self) -> tuple[str, ...]:
        return tuple(self._scope())


@derived
def item_refs(db, path: str, item_id: str) -> tuple[ItemRef, ...]:
    """The user items a constant's value, or an item's parameter defaults, name."""
    item = item_ast(db, path, item_id).item
    exprs: tuple[ast.Expr, ...]
    if isinstance(item, ast.Const):
        exprs = (item.value,)
    elif isinstance(item, (ast.Layer, ast.Fn)):
        exprs = tuple(p.default for p in item.params if p.default is not None)
    else:
        return ()
    names = scope(db, path)
    refs = (names.lookup(n) for e in exprs for n in free_names(e))
    return tuple(dict.fromkeys(r for r in refs if r is not None and r.kind != "unresolved"))


@derived
def const_cycle(db, path: str, item_id: str) -> tuple[str, ...] | None:
    """The shortest chain of items by which a constant's value depends on itself, or None."""
    start = (path, item_id)
    named = partial(_named_items, db)
    settle_deepest_first(db, const_cycle, start, named, acyclic_and_settled(db, const_cycle))
    cycle = shortest_cycle(db, const_cycle, start, named)
    return tuple(i for _, i in cycle) if cycle else None


def _named_items(db, node: tuple[str, str]) -> list[tuple[str, str]]:
    return [(r.path, r.item_id) for r in item_refs(db, *node)]


def _valued(db, node: tuple[str, str]) -> bool:
    """A constant whose value is settled: so are those it names, or it is POISON (a cycle)."""
    return db.fresh(const_value, *node)


def _named_constants(db, node: tuple[str, str]) -> list[tuple[str, str]]:
    return [(r.path, r.item_id) for r in item_refs(db, *node) if r.kind == "const"]


@derived
def const_value(db, path: str, item_id: str) -> Value:
    """A constant's value; POISON (already reported) when it depends on itself."""
    if const_cycle(db, path, item_id):
        return POISON
    # Deepest first: evaluating a chain ``let c0 = c1 + 1``, ``let c1 = c2 + 1``, ... by plain
    # recursion of queries ran out of Python's stack at about 90 constants.
    settle_deepest_first(
        db, const_value, (path, item_id), partial(_named_constants, db), partial(_valued, db)
    )
    item = item_ast(db, path, item_id).item
    assert isinstance(item, ast.Const)  # only constants are asked for their value
    return const_value_of(
        item, signature(db, path, item_id).signature, path, item_id, QueryEnv(db, path)
    )


@derived
def item_diagnostics(db, path: str, item_id: str) -> tuple[Diagnostic, ...]:
    sig = signature(db, path, item_id)
    item = item_ast(db, path, item_id).item
    if isinstance(item, ast.Const) and (cycle := const_cycle(db, path, item_id)):
        return sig.diagnostics + (
            Diagnostic(
                E_CONST_CYCLE,
                f"constant `{item.name}` depends on itself: " + " -> ".join(cycle),
                Label(Loc(path, item_id, item.name_span), "defined here"),
                help="give one of them a value that does not name the others",
            ),
        )
    members = (
        generic_members(db, path, item_id)
        if isinstance(item, ast.Layer) and item.body is None
        else None
    )
    return sig.diagnostics + check_item(
        item, sig.signature, path, item_id, QueryEnv(db, path), members
    )


@derived
def generic_members(db, path: str, item_id: str) -> Members:
    params, members = item_construction(db, path, item_id)
    return evaluate_generic_members(
        params, members, signature(db, path, item_id).signature, path, item_id, QueryEnv(db, path)
    )


@derived
def instance_members(db, key: InstanceKey) -> Members:
    return evaluate_members(
        item_construction(db, key.path, key.item_id)[1], key, QueryEnv(db, key.path)
    )


@derived
def checked_instance(db, key: InstanceKey) -> CheckedInstance:
    item = item_ast(db, key.path, key.item_id).item
    assert isinstance(item, ast.Layer)  # an instance is of a layer
    sig = signature(db, key.path, key.item_id).signature
    env = QueryEnv(db, key.path)
    return check_instance(item, sig, key, env, instance_members(db, key))


@derived
def instance_children(db, key: InstanceKey) -> tuple[tuple[str, InstanceKey], ...]:
    """Only the children of an instance: equal after any edit that keeps its structure, so the
    walk over a target's instances stays green when a forward body changes."""
    return checked_instance(db, key).children


@derived
def instance_diagnostics(db, key: InstanceKey) -> tuple[Diagnostic, ...]:
    """An instance's own findings, less those the generic check of its item already reports
    (an instance with no findings does not ask for the generic check: a target's report after
    a body edit of a sound block re-checks its instances only)."""
    found = checked_instance(db, key).diagnostics
    if not found:
        return ()
    generic = {(d.code, d.primary.loc) for d in item_diagnostics(db, key.path, key.item_id)}
    return tuple(d for d in found if (d.code, d.primary.loc) not in generic)


@derived
def layer_instance(
    db, path: str, item_id: str, args: tuple[tuple[str, object], ...]
) -> InstanceKey | str:
    """The key of ``item_id`` instantiated with ``args`` (defaults filled in), or why not."""
    item = item_ast(db, path, item_id).item
    if not isinstance(item, ast.Layer):
        return f"`{item_id}` is not a layer"
    try:
        return instance_key(
            path, item_id, signature(db, path, item_id).signature, dict(args), QueryEnv(db, path)
        )
    except ValueError as err:
        return str(err)


def has_defaults(sig: Signature) -> bool:
    return sig.kind == "layer" and all(p.default is not None for p in sig.params)
