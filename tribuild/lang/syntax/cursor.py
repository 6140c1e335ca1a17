"""The parser's cursor over one item's tokens, and how it reports and recovers from errors.

Terms:
- *position*: an index into the item's tokens; a node's span is ``(first, after_last)``.
  Past the last token sits an ``"eof"`` sentinel (the end of the item).
- *panic*: set by a hard syntax error. While set, further errors are not reported (they are
  consequences of the first); ``sync`` skips to the next statement or member boundary and
  clears it, so every statement of an item gets its own report.
- *boundary*: a statement break (newline or ``;``) or a ``}`` at brace depth 0 from where the
  skip began, or the end of the item.
- *depth*: how deeply expressions, blocks and types nest; past ``MAX_DEPTH`` the parser
  reports E0107 instead of recursing further, so no input can exhaust Python's stack.
"""

from __future__ import annotations

from tribuild.diagnostics import Diagnostic, Label, Loc, register
from tribuild.lang.syntax.ast import ErrorExpr
from tribuild.lang.syntax.lexer import describe_error
from tribuild.lang.syntax.tokens import BREAKS

E_UNEXPECTED = register("E0100", "unexpected token")
E_TOO_DEEP = register("E0107", "nesting too deep")
E_UNCLOSED = register("E0110", "unclosed delimiter")

MAX_DEPTH = 40  # worst case about 400 Python frames; real programs nest < 15
_STOP = BREAKS | {"}", "eof"}
_NAMED = {"ident": "identifier", "int": "integer", "float": "number", "string": "string"}


def describe(kind: str, text: str) -> str:
    """How a found token reads in a message."""
    if kind == "eof":
        return "end of item"
    if kind == "newline":
        return "end of line"
    if kind in _NAMED:
        return f"{_NAMED[kind]} `{text}`"
    if text.isalpha():
        return f"keyword `{text}`"
    return f"`{text}`"


class ParserState:
    """Tokens of one item, the current position, and the diagnostics reported so far."""

    __slots__ = ("kinds", "texts", "n", "pos", "depth", "panic", "diags", "path", "item")

    def __init__(self, toks: tuple[tuple[str, str], ...], path: str, item: str) -> None:
        self.kinds = [k for k, _ in toks]
        self.kinds.append("eof")
        self.texts = [t for _, t in toks]
        self.texts.append("")
        self.n = len(toks)
        self.pos = 0
        self.depth = 0
        self.panic = False
        self.diags: list[Diagnostic] = []
        self.path = path
        self.item = item

    # --- reading -------------------------------------------------------------------------

    def at(self, kind: str) -> bool:
        return self.kinds[self.pos] == kind

    def accept(self, kind: str) -> bool:
        if self.kinds[self.pos] == kind:
            self.pos += 1
            return True
        return False

    def expect(self, kind: str) -> bool:
        if self.kinds[self.pos] == kind:
            self.pos += 1
            return True
        self.unexpected(f"`{kind}`")
        return False

    def expect_name(self) -> str | None:
        if self.kinds[self.pos] == "ident":
            self.pos += 1
            return self.texts[self.pos - 1]
        self.unexpected("a name")
        return None

    def expect_close(self, closer: str, opener_pos: int) -> bool:
        """Consume ``closer`` matching the bracket at ``opener_pos``, or report it missing."""
        if self.kinds[self.pos] == closer:
            self.pos += 1
            return True
        opener = self.texts[opener_pos]
        also = (Label(self.loc((opener_pos, opener_pos + 1)), f"`{opener}` opened here"),)
        if self.kinds[self.pos] == "eof":
            self.report(
                E_UNCLOSED,
                f"unclosed `{opener}`: expected `{closer}`, found end of item",
                self.here(),
                label=f"expected `{closer}`",
                secondary=also,
            )
        else:
            self.unexpected(f"`{closer}`", secondary=also)
        return False

    def skip_breaks(self) -> None:
        while self.kinds[self.pos] in BREAKS:
            self.pos += 1

    def here(self) -> tuple[int, int]:
        """Span of the current token (empty at the end of the item)."""
        return (self.pos, min(self.pos + 1, self.n))

    # --- nesting -------------------------------------------------------------------------

    def nested(self, parse, *args):
        """``parse(self, *args)`` one level deeper, or ``None`` (reported) past MAX_DEPTH."""
        if self.depth >= MAX_DEPTH:
            self.report(
                E_TOO_DEEP,
                f"nesting too deep (more than {MAX_DEPTH} levels)",
                self.here(),
                help="split the expression or block into smaller parts",
            )
            return None
        self.depth += 1
        result = parse(self, *args)
        self.depth -= 1
        return result

    # --- errors and recovery ---------------------------------------------------------------

    def loc(self, span: tuple[int, int]) -> Loc:
        return Loc(self.path, self.item, span)

    def report(
        self,
        code: str,
        message: str,
        span: tuple[int, int],
        *,
        label: str = "",
        help: str | None = None,
        secondary: tuple[Label, ...] = (),
        hard: bool = True,
    ) -> None:
        """Record a diagnostic unless in panic; a hard error starts a panic."""
        if self.panic:
            return
        self.panic = hard
        self.diags.append(Diagnostic(code, message, Label(self.loc(span), label), secondary, help))

    def unexpected(
        self, expected: str, *, help: str | None = None, secondary: tuple[Label, ...] = ()
    ) -> ErrorExpr:
        """Report that ``expected`` was expected here; an error token was already reported."""
        kind = self.kinds[self.pos]
        if kind == "error":
            self.panic = True
        else:
            found = describe(kind, self.texts[self.pos])
            self.report(
                E_UNEXPECTED,
                f"expected {expected}, found {found}",
                self.here(),
                label=f"expected {expected}",
                help=help,
                secondary=secondary,
            )
        return ErrorExpr(self.here())

    def report_lexer_errors(self) -> None:
        for i, kind in enumerate(self.kinds):
            if kind == "error":
                code, message = describe_error(self.texts[i])
                self.diags.append(Diagnostic(code, message, Label(self.loc((i, i + 1)))))

    def end_statement(self) -> None:
        """After a statement: stand at a boundary, skipping (and reporting) anything else."""
        if self.kinds[self.pos] not in _STOP:
            self.unexpected("end of statement (a newline or `;`)")
            self.sync()
        self.panic = False

    def sync(self) -> None:
        """Skip to the next boundary."""
        kinds, depth = self.kinds, 0
        while True:
            kind = kinds[self.pos]
            if kind == "eof" or (depth == 0 and kind in _STOP):
                break
            if kind == "{":
                depth += 1
            elif kind == "}":
                depth -= 1
            self.pos += 1
        self.panic = False

    def skip_to(self, kind: str) -> None:
        """Skip to the next ``kind`` (not consumed) or the end of the item."""
        while self.kinds[self.pos] not in (kind, "eof"):
            self.pos += 1
        self.panic = False
