"""Type names: a name written where a type is expected must name something that is a type.

Terms:
- *type name*: an ``ast.NamedType`` anywhere in an item (parameter and return types, a
  constant's type, inside list types). ``lower_type`` already turns dtype names into scalar
  types; every other type name means "a layer of this kind" and must be a built-in layer or
  a user layer (stateful or functional) visible in the item's file.
- A name a failing import promised (``unresolved``) is not reported again: that import's own
  error explains it. The parser's stand-in for a type it could not read is skipped likewise.
- *unknown type*: a semantic type that is, or is a list of, a name that names no type (or a
  name a failing import promised). It was reported here (E0301) or at the import (E0203),
  so the checker neither checks values against it nor checks a value declared with it (a
  parameter of that type is POISON): one mistake, one diagnostic.
"""

from __future__ import annotations

from tribuild.diagnostics import did_you_mean
from tribuild.lang.builtins.layers import LAYERS
from tribuild.lang.check.codes import BAD_TYPE, Sink
from tribuild.lang.check.env import Env
from tribuild.lang.syntax import ast
from tribuild.lang.syntax.types import ERROR_TYPE_NAME
from tribuild.lang.types import DTYPES, ListT, NamedT, Type, canonical_dtype

_LAYER_KINDS = ("layer", "functional", "unresolved")


def check_type_names(item: ast.Item, env: Env, sink: Sink) -> None:
    """Report every type name of ``item`` that names no layer."""
    for t in _named_types(item):
        if names_type(t.name, env):
            continue
        ref = env.lookup(t.name)
        if ref is not None:
            sink.error(
                BAD_TYPE,
                t.span,
                f"`{t.name}` is a {ref.kind}, not a type",
                label="expected a type",
                help=_help(t.name, env),
            )
        else:
            sink.error(
                BAD_TYPE,
                t.span,
                f"unknown type `{t.name}`",
                label="not a dtype, tensor type or layer",
                help=_help(t.name, env),
            )


def names_type(name: str, env: Env) -> bool:
    """Whether ``name``, written as a type, names one (or is a stand-in reported elsewhere)."""
    if name == ERROR_TYPE_NAME or canonical_dtype(name) or name in LAYERS:
        return True
    ref = env.lookup(name)
    return ref is not None and ref.kind in _LAYER_KINDS


def unknown_type(t: Type | None, env: Env) -> bool:
    """Whether ``t`` is an unknown type (see the module docstring)."""
    while isinstance(t, ListT):
        t = t.elem
    if not isinstance(t, NamedT):
        return False
    ref = env.lookup(t.name)  # a failed import's name: unknown too, but reported there
    return not names_type(t.name, env) or (ref is not None and ref.kind == "unresolved")


def _named_types(item: ast.Item) -> list[ast.NamedType]:
    """The type names of ``item``, in source order: parameter, return, constant and member
    types and the annotations of ``let`` statements (expressions hold none)."""
    found: list[ast.NamedType] = []
    for t in _type_positions(item):
        while isinstance(t, ast.ListType):
            t = t.elem
        if isinstance(t, ast.NamedType):
            found.append(t)
    return found


def _type_positions(node):
    match node:
        case ast.Fn() | ast.Layer():
            yield from (p.type for p in node.params)
            yield node.ret
            parts = (
                (node.body,)
                if isinstance(node, ast.Fn)
                else (node.members, node.body or (), node.methods)
            )
            yield from _type_positions(parts)
        case ast.Const() | ast.Let():
            yield node.type
        case ast.For():
            yield from _type_positions(node.body)
        case ast.If():
            yield from _type_positions(node.then)
            yield from _type_positions(node.otherwise or ())
        case tuple():
            for child in node:
                yield from _type_positions(child)


def _help(name: str, env: Env) -> str:
    layers = [
        n
        for n in env.visible_names()
        if (ref := env.lookup(n)) is not None and ref.kind in _LAYER_KINDS
    ]
    return did_you_mean(name, [*DTYPES, *LAYERS, *layers]) or (
        "a type is a dtype (`float32`, ...), `Tensor<dtype, [dims]>`, `[T]` or a layer's name"
    )
