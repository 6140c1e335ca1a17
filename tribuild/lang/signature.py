"""Signatures: what other items may see of an item.

Terms:
- *construction params* (``Signature.params``): the parameters of a stateful layer, bound
  once when it is built. Other items have none.
- *inputs* (``Signature.inputs``) and ``ret``: the callable interface. For a ``fn`` or a
  functional layer, all its parameters and its return type; for a stateful layer, those of
  its ``fn forward``; for a constant, ``ret`` is its declared type.
- Types are semantic (``tribuild.lang.types``), and default expressions are re-based so their
  spans start at 0: a signature holds no position, so editing a body or a member (which
  shifts token indices) leaves it equal, and that equality stops re-checking dependents.
"""

from __future__ import annotations

from tribuild.base.record import fields, is_record, record
from tribuild.diagnostics import Diagnostic
from tribuild.lang.check.codes import Sink
from tribuild.lang.syntax import ast
from tribuild.lang.types import Type, lower_type

KINDS = ("fn", "layer", "functional", "const", "import", "error")


@record
class ParamSig:
    name: str
    type: Type | None
    default: ast.Expr | None = None


@record
class Signature:
    kind: str
    name: str
    params: tuple[ParamSig, ...] = ()
    inputs: tuple[ParamSig, ...] = ()
    ret: Type | None = None

    def param(self, name: str) -> ParamSig | None:
        return next((p for p in self.params if p.name == name), None)


def rebase(node, offset: int):
    """A copy of a syntax node with every span shifted by ``-offset``."""
    if isinstance(node, tuple):
        return tuple(rebase(x, offset) for x in node)
    if not is_record(node):
        return node
    changes = {}
    for name in fields(node):
        value = getattr(node, name)
        if name.endswith("span") and isinstance(value, tuple):
            changes[name] = (value[0] - offset, value[1] - offset)
        else:
            changes[name] = rebase(value, offset)
    return type(node)(**changes)


def _params(params: tuple[ast.Param, ...], sink: Sink) -> tuple[ParamSig, ...]:
    return tuple(
        ParamSig(
            p.name,
            None if p.type is None else lower_type(p.type, sink.report),
            None if p.default is None else rebase(p.default, p.default.span[0]),
        )
        for p in params
    )


def forward_of(layer: ast.Layer) -> ast.Fn | None:
    return next((m for m in layer.methods if m.name == "forward"), None)


def signature_of(
    item: ast.Item, path: str, item_id: str
) -> tuple[Signature, tuple[Diagnostic, ...]]:
    """The signature of one item, and the mistakes in the types it declares."""
    sink = Sink(path, item_id)
    sig = _signature(item, sink)
    return sig, sink.result()


def _signature(item: ast.Item, sink: Sink) -> Signature:
    def ret(t: ast.TypeExpr | None) -> Type | None:
        return None if t is None else lower_type(t, sink.report)

    match item:
        case ast.Fn():
            return Signature("fn", item.name, (), _params(item.params, sink), ret(item.ret))
        case ast.Layer(body=body) if body is not None:
            return Signature("functional", item.name, (), _params(item.params, sink), ret(item.ret))
        case ast.Layer():
            forward = forward_of(item)
            if forward is None:
                return Signature("layer", item.name, _params(item.params, sink))
            return Signature(
                "layer",
                item.name,
                _params(item.params, sink),
                _params(forward.params, sink),
                ret(forward.ret),
            )
        case ast.Const():
            return Signature("const", item.name, ret=ret(item.type))
        case ast.Import():
            return Signature("import", item.path)
    return Signature("error", "")
