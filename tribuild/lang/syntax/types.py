"""Types: scalars, tensors (with their older short forms), lists and other names.

Forms: a scalar name (``trit bool int int8 int32 int64 float float16 bfloat16 float32``);
``Tensor<dtype, [dims]>``, ``TernaryTensor<trit, [dims]>``, lowercase ``tensor<...>``,
``Tensor<dtype>``, ``Tensor[dtype]`` and a bare ``Tensor``/``TernaryTensor`` (the last three
leave ``dims`` None); ``[T]`` a list; any other name a NamedType. A *dim* is ``?`` (Unknown)
or an expression. Where no type can be read the parser reports it and stands a NamedType
named ``<error>`` in its place.
"""

from __future__ import annotations

from tribuild.lang.syntax import ast
from tribuild.lang.syntax.cursor import ParserState
from tribuild.lang.syntax.expressions import expr

SCALARS = frozenset(
    ("trit", "bool", "int", "int8", "int32", "int64", "float", "float16", "bfloat16", "float32")
)
_TENSORS = {"Tensor": False, "tensor": False, "TernaryTensor": True}
ERROR_TYPE_NAME = "<error>"


def type_expr(p: ParserState) -> ast.TypeExpr:
    """A type, or ``NamedType("<error>")`` (reported) where none could be read."""
    result = p.nested(_type)
    return ast.NamedType(ERROR_TYPE_NAME, p.here()) if result is None else result


def _type(p: ParserState) -> ast.TypeExpr:
    start, kind = p.pos, p.kinds[p.pos]
    if kind == "[":
        p.pos += 1
        elem = type_expr(p)
        p.expect_close("]", start)
        return ast.ListType(elem, (start, p.pos))
    if kind != "ident":
        p.unexpected("a type")
        return ast.NamedType(ERROR_TYPE_NAME, p.here())
    name = p.texts[start]
    p.pos += 1
    if name in SCALARS:
        return ast.ScalarType(name, (start, p.pos))
    if name in _TENSORS:
        return _tensor(p, start, _TENSORS[name])
    return ast.NamedType(name, (start, p.pos))


def _tensor(p: ParserState, start: int, ternary: bool) -> ast.TensorType:
    dtype, dims = None, None
    open_pos = p.pos
    if p.accept("<"):
        dtype = p.expect_name()
        if dtype is not None and p.accept(","):
            dims = _dims(p)
        p.expect_close(">", open_pos)
    elif p.accept("["):
        dtype = p.expect_name()
        p.expect_close("]", open_pos)
    return ast.TensorType(ternary, dtype, dims, (start, p.pos))


def _dims(p: ParserState) -> tuple[ast.Expr, ...] | None:
    open_pos = p.pos
    if not p.expect("["):
        return None
    dims: list[ast.Expr] = []
    while not p.at("]"):
        if p.at("?"):
            p.pos += 1
            dims.append(ast.Unknown((p.pos - 1, p.pos)))
        else:
            dims.append(expr(p))
        if not p.accept(","):
            break
    p.expect_close("]", open_pos)
    return tuple(dims)
