"""Tokens of the `.tri` language.

Terms:
- *token*: a ``Token(kind, text, offset)``. ``kind`` is ``"ident"``, ``"int"``, ``"float"``,
  ``"string"``, ``"newline"`` or ``"error"``; for keywords and operators it is the text itself
  (``"let"``, ``"->"``, ``"("``). ``offset`` is the character offset of the token in its file.
- *statement break*: a ``"newline"`` or ``";"`` token; both end a statement.
- *joiner*: a binary or ternary operator (a *continuation operator*), or one of
  ``-> = , { else !``. A newline right before or right after a joiner cannot end a statement,
  so the lexer drops it: ``cond\\n ? a\\n : b`` is one expression, ``x =\\n f(y)`` one
  statement, and ``}\\nelse {`` or a ``{`` on its own line continue what came before.
"""

from __future__ import annotations

from tribuild.base.record import record
from tribuild.project import KEYWORDS as KEYWORDS  # the reserved words, shared with config


@record
class Token:
    kind: str
    text: str
    offset: int


LexResult = tuple[Token, ...]
"""What ``lex`` returns: every significant token of a file, in order."""


BREAKS = frozenset(("newline", ";"))

CONTINUATION = frozenset(
    (
        "?",
        ":",
        "||",
        "&&",
        ".",
        "@",
        "+",
        "-",
        "*",
        "/",
        "//",
        "%",
        "**",
        "==",
        "!=",
        "<",
        "<=",
        ">",
        ">=",
        "..",
    )
)

JOINERS = CONTINUATION | {"->", "=", ",", "{", "else", "!"}

ITEM_KEYWORDS = frozenset(("import", "from", "let", "fn", "layer"))
