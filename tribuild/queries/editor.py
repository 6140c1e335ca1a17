"""What an editor asks beyond diagnostics: the value of every binding of a body.

Terms:
- *binding*: a parameter, `let`, assignment or loop variable of a body, or a member of a
  stateful layer, with the value the checker gave it: ``(span of the name, name, value as
  .tri spells it)``, the span relative to the item (None for a parameter). A loop unrolled
  over a list binds its variable once per element; a reassigned name once per assignment.
- *item_bindings(path, item_id)*: from the generic check (construction parameters symbolic).
- *instance_bindings(key)*: from the check of one instance (every value concrete that the
  instance fixes).

The build never asks these: they re-run a check with the checker's trace on, and only the
language server reads them (hover).
"""

from __future__ import annotations

from tribuild.engine import derived
from tribuild.lang import (
    InstanceKey,
    Members,
    Sym,
    TensorT,
    TensorV,
    Value,
    ast,
    check_instance,
    check_item,
    dims,
    example_input_dims,
    format_value,
    from_dim,
    subst_type,
)
from tribuild.queries.semantic import QueryEnv, generic_members, instance_members, signature
from tribuild.queries.syntax import item_ast

Binding = tuple[ast.Span | None, str, str]


@derived
def item_bindings(db, path: str, item_id: str) -> tuple[Binding, ...]:
    item = item_ast(db, path, item_id).item
    if not isinstance(item, (ast.Fn, ast.Layer, ast.Const)):
        return ()
    sig = signature(db, path, item_id).signature
    members = (
        generic_members(db, path, item_id)
        if isinstance(item, ast.Layer) and item.body is None
        else None
    )
    trace: list = []
    check_item(item, sig, path, item_id, QueryEnv(db, path), members, trace)
    return _members(item, members) + tuple((s, n, format_value(v)) for s, n, v in trace)


@derived
def instance_bindings(
    db, key: InstanceKey, input_shape: tuple[int, ...] | None = None
) -> tuple[Binding, ...]:
    """With ``input_shape`` (a target's example input, for the target's own instance), the
    dims it fixes are substituted: ``[N, 64, 56, 56]`` rather than ``[N, 64, H/4, W/4]``."""
    item = item_ast(db, key.path, key.item_id).item
    if not isinstance(item, ast.Layer):
        return ()
    sig = signature(db, key.path, key.item_id).signature
    members = instance_members(db, key)
    trace: list = []
    check_instance(item, sig, key, QueryEnv(db, key.path), members, trace)
    fixed = example_input_dims(sig, key, input_shape) if input_shape else {}
    params = tuple((None, name, format_value(v)) for name, v in key.args)
    return (
        params
        + _members(item, members)
        + tuple((s, n, format_value(_fixed(v, fixed))) for s, n, v in trace)
    )


def _fixed(value: Value, fixed: dict) -> Value:
    if fixed and isinstance(value, TensorV):
        t = subst_type(value.type, fixed)
        assert isinstance(t, TensorT)  # substitution keeps a tensor type one
        return TensorV(t)
    if fixed and isinstance(value, Sym):
        return from_dim(dims.substitute(value.dim, fixed) or value.dim)
    return value


def _members(item: ast.Item, members: Members | None) -> tuple[Binding, ...]:
    if members is None or not isinstance(item, ast.Layer):
        return ()
    spans = {m.name: m.name_span for m in item.members}
    return tuple((spans.get(n), n, format_value(v)) for n, v in members.members)
