"""Diagnostic codes of the type and shape checker, and the collector that builds them.

Terms:
- E03xx: types (dtypes, names, calls, control flow); E04xx: shapes and dims; E05xx:
  construction-time evaluation. docs/language.md shows an example of each.
- *Sink*: the per-run collector of diagnostics for one item; it knows the item's path and id
  so callers give only a code, a span and a message. A fresh Sink is made per call of a
  checking function, so the functions stay pure.
"""

from __future__ import annotations

from tribuild.diagnostics import Diagnostic, Label, Loc, register
from tribuild.lang.syntax.ast import Span

BAD_TYPE = register("E0301", "unknown or invalid type")
TYPE_MISMATCH = register("E0302", "a value has the wrong type")
NOT_TRIT = register("E0303", "a value other than -1, 0, 1 where a trit is expected")
NOT_CALLABLE = register("E0304", "calling something that is not a function or layer")
ARITY = register("E0305", "wrong number of arguments")
BAD_KEYWORD = register("E0306", "unknown or repeated keyword argument")
UNKNOWN_NAME = register("E0307", "unknown name")
DATA_DEPENDENT = register("E0308", "control flow depends on tensor data")
RETURN_MISMATCH = register(
    "E0309", "missing return or returned value does not match the declared type"
)
BAD_OPERANDS = register("E0310", "operator not defined for these operand types")
NO_FORWARD = register("E0311", "stateful layer without `fn forward`")
BAD_ASSIGN = register("E0312", "assignment to an undeclared name or with a changed type")
UNTYPED_FORWARD = register(
    "E0313", "a layer's `forward` without tensor types on its inputs or its result"
)

DIM_MISMATCH = register("E0401", "a dimension differs from the expected one")
RANK_MISMATCH = register("E0402", "a tensor has the wrong rank")
BROADCAST = register("E0403", "shapes cannot be broadcast together")
MATMUL = register("E0404", "matmul inner dimensions differ")
BAD_AXIS = register("E0405", "dimension index out of range for the tensor's rank")
RESHAPE = register("E0406", "reshape to a shape with a different number of elements")
DIVISIBILITY = register("E0407", "a dimension is not divisible as required (groups, heads)")
EMPTY_OUTPUT = register("E0408", "a convolution or pooling produces an empty output")
BAD_DIM = register("E0409", "invalid dimension expression")
EXAMPLE_INPUT = register("E0410", "the target's example input does not fit the entry layer")
CONCAT_MISMATCH = register("E0411", "concatenated tensors differ outside the concat dim")

NOT_CONST = register("E0501", "not a construction-time value")
DIV_ZERO = register("E0502", "division by zero")
INDEX_RANGE = register("E0503", "index out of range")
BUDGET = register("E0504", "construction-time evaluation exceeds its work bound")
CONST_TYPE = register("E0505", "construction-time operation on values of the wrong type")
OUT_OF_RANGE = register("E0506", "a built-in layer's argument is outside the range it accepts")


class Sink:
    """Collects the diagnostics of one checking run of one item."""

    __slots__ = ("path", "item_id", "diags")

    def __init__(
        self, path: str, item_id: str | None, diags: list[Diagnostic] | None = None
    ) -> None:
        self.path, self.item_id = path, item_id
        self.diags: list[Diagnostic] = [] if diags is None else diags

    def loc(self, span: Span) -> Loc:
        return Loc(self.path, self.item_id, span)

    def error(
        self,
        code: str,
        span: Span,
        message: str,
        *,
        label: str = "",
        secondary: tuple[tuple[Span, str], ...] = (),
        help: str | None = None,
    ) -> None:
        self.diags.append(
            Diagnostic(
                code,
                message,
                Label(self.loc(span), label),
                tuple(Label(self.loc(s), m) for s, m in secondary),
                help,
            )
        )

    def report(self, code: str, span: Span, message: str) -> None:
        """The ``types.Report`` callback."""
        self.error(code, span, message)

    def result(self) -> tuple[Diagnostic, ...]:
        return tuple(dict.fromkeys(self.diags))
