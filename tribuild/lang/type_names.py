"""Type names: a name written where a type is expected must name something that is a type.

Terms:
- *type name*: an ``ast.NamedType`` anywhere in an item (parameter and return types, a
  constant's type, inside list types). ``lower_type`` already turns dtype names into scalar
  types; every other type name means "a layer of this kind" and must be a built-in layer or
  a user layer (stateful or functional) visible in the item's file.
- A name a failing import promised (``unresolved``) is not reported again: that import's own
  error explains it. The parser's stand-in for a type it could not read is skipped likewise.
"""
from __future__ import annotations

import difflib

from tribuild.lang import ast
from tribuild.lang.builtins_layers import LAYERS
from tribuild.lang.check_codes import BAD_TYPE, Sink
from tribuild.lang.env import Env
from tribuild.lang.parser_types import ERROR_TYPE_NAME
from tribuild.lang.types import DTYPES, canonical_dtype
from tribuild.record import fields, is_record

_LAYER_KINDS = ("layer", "functional", "unresolved")


def check_type_names(item: ast.Item, env: Env, sink: Sink) -> None:
    """Report every type name of ``item`` that names no layer."""
    for t in _named_types(item):
        if t.name == ERROR_TYPE_NAME or canonical_dtype(t.name) or t.name in LAYERS:
            continue
        ref = env.lookup(t.name)
        if ref is not None and ref.kind in _LAYER_KINDS:
            continue
        if ref is not None:
            sink.error(BAD_TYPE, t.span, f"`{t.name}` is a {ref.kind}, not a type",
                       label="expected a type", help=_help(t.name, env))
        else:
            sink.error(BAD_TYPE, t.span, f"unknown type `{t.name}`",
                       label="not a dtype, tensor type or layer", help=_help(t.name, env))


def _named_types(node) -> list[ast.NamedType]:
    """The type names under ``node``, in source order (``let`` annotations in bodies included)."""
    found, stack = [], [node]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.NamedType):
            found.append(node)
        elif isinstance(node, tuple):
            stack.extend(reversed(node))
        elif is_record(node):
            stack.extend(getattr(node, name) for name in reversed(fields(node)))
    return found


def _help(name: str, env: Env) -> str:
    layers = [n for n in env.visible_names()
              if (ref := env.lookup(n)) is not None and ref.kind in _LAYER_KINDS]
    close = difflib.get_close_matches(name, [*DTYPES, *LAYERS, *layers], n=1)
    if close:
        return f"did you mean `{close[0]}`?"
    return "a type is a dtype (`float32`, ...), `Tensor<dtype, [dims]>`, `[T]` or a layer's name"
