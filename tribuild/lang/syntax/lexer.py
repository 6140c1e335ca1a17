"""The `.tri` lexer: file text -> tokens (see ``tribuild.lang.syntax.tokens`` for the terms).

One compiled regex scans the text. Whitespace and comments (``# ...`` to end of line,
``/* ... */`` not nested) are skipped. A newline becomes a ``"newline"`` token only where it
can end a statement: not inside ``( )`` or ``[ ]`` (a bracket stack tracks them; inside
``{ }`` newlines count), never after another break, never at the start of the file, and never next
to a joiner. A keyword that only starts a statement or an item (``import from layer fn let
return if``) closes any ``(`` or ``[`` left open before it, so one unclosed bracket cannot
swallow the rest of the file, and a newline before one of them (``if`` aside, for ``else\nif``)
always counts. Bad input (an invalid character, an unterminated string or block
comment, a malformed number) becomes an ``"error"`` token whose text ``describe_error``
explains; lexing never raises.
"""

from __future__ import annotations

import re

from tribuild.diagnostics import register
from tribuild.lang.syntax.tokens import BREAKS, JOINERS, KEYWORDS, LexResult, Token

E_UNTERMINATED_STRING = register("E0101", "unterminated string literal")
E_UNTERMINATED_COMMENT = register("E0102", "unterminated block comment")
E_INVALID_CHAR = register("E0103", "invalid character")
E_INVALID_NUMBER = register("E0105", "invalid number literal")

_END = r"(?![A-Za-z0-9_])"
_EXP = r"(?:[eE][+-]?[0-9]+)"
_TOKEN = re.compile(
    r"[ \t\r\f\v]*(?:(?:\#[^\n]*|/\*(?s:.*?)\*/)[ \t\r\f\v]*)*"  # skipped before a token
    r"(?:(?P<end>\Z)"  # blanks and comments at the end of a text without a final newline
    r"|(?P<newline>\n)"
    r"|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>->|\.\.|//|\*\*|==|!=|<=|>=|&&|\|\||\.(?![0-9])|/(?!\*)|[-+*%@<>!?:=,()\[\]{};])"
    rf"|(?P<float>(?:[0-9]+\.(?![.A-Za-z_])[0-9]*{_EXP}?|\.[0-9]+{_EXP}?|[0-9]+{_EXP}){_END})"
    rf"|(?P<int>(?:0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO][0-7]+|[0-9]+){_END})"
    r"|(?P<badnum>\.?[0-9][A-Za-z0-9_]*)"
    r'|(?P<string>"(?:[^"\\\n]|\\.)*")'
    r'|(?P<unstring>"(?:[^"\\\n]|\\.)*)'
    r"|(?P<unclosed>/\*(?s:.*))"
    r"|(?P<bad>.))"
)
_NUMBER_START = re.compile(r"\.?[0-9]")
_ERRORS = frozenset(("badnum", "unstring", "unclosed", "bad"))
_OPEN = frozenset(("(", "[", "{"))
_STATEMENT_KEYWORDS = frozenset(("import", "from", "layer", "fn", "let", "return", "if"))
_OPENS_LINE = BREAKS | {"{"}  # a newline right after these is never a token
_LINE_STARTERS = frozenset(("import", "from", "layer", "fn", "let", "return"))
_CLOSE = {")": "(", "]": "[", "}": "{"}
_BRACKETS = _OPEN | frozenset(_CLOSE)
_NEWLINE = ("newline", "\n")


def lex(text: str) -> LexResult:
    """Split ``text`` into tokens; never raises."""
    pairs, offsets, _ = scan(text)
    return tuple(map(_token, pairs, offsets))


def _token(pair: tuple[str, str], offset: int) -> Token:
    return Token(pair[0], pair[1], offset)


def scan(text: str) -> tuple[list[tuple[str, str]], list[int], bool]:
    """The tokens of ``text`` as ``(kind, text)`` pairs and their offsets, and whether the
    text ends *clean*: no bracket left open, no unterminated block comment, and a last token
    that is no joiner. Text that follows a clean text on a new line, starting with an item
    keyword, lexes the same on its own as after it (``tribuild.lang.syntax.items`` relies on
    this)."""
    pairs: list[tuple[str, str]] = []
    offsets: list[int] = []
    stack: list[str] = []  # open brackets
    pending = -1  # offset of a newline not yet emitted, or -1
    last = "newline"  # kind of the last token emitted ("newline" at file start)
    unclosed = False
    for m in _TOKEN.finditer(text):
        kind: str = m.lastgroup  # type: ignore[assignment]  # every alternative is a group
        end = m.end()
        if kind == "end":
            break
        if kind == "newline":
            if pending < 0:
                pending = end - 1
            continue
        tok = m[kind]
        start = end - len(tok)  # every token group ends the match
        if kind == "op":
            kind = tok
        elif kind == "ident":
            if tok in KEYWORDS:
                kind = tok
                if stack and kind in _STATEMENT_KEYWORDS:
                    _drop_brackets(stack)
        elif kind in _ERRORS:
            unclosed = unclosed or kind == "unclosed"
            kind = "error"
        if pending >= 0:
            if (
                (not stack or stack[-1] == "{")
                and last not in _OPENS_LINE
                and (kind in _LINE_STARTERS or (last not in JOINERS and kind not in JOINERS))
            ):
                pairs.append(_NEWLINE)
                offsets.append(pending)
            pending = -1
        if kind in _BRACKETS:
            if kind in _OPEN:
                stack.append(kind)
            elif stack:
                _close(stack, _CLOSE[kind])
        pairs.append((kind, tok))
        offsets.append(start)
        last = kind
    if pending >= 0 and last not in BREAKS and last not in JOINERS:
        pairs.append(_NEWLINE)
        offsets.append(pending)
    return pairs, offsets, not stack and not unclosed and last not in JOINERS


def _drop_brackets(stack: list[str]) -> None:
    """Forget the ``(`` and ``[`` still open above the innermost ``{``."""
    while stack and stack[-1] != "{":
        stack.pop()


def _close(stack: list[str], opener: str) -> None:
    """Pop up to and including the innermost ``opener``; a stray closer changes nothing."""
    for i in range(len(stack) - 1, -1, -1):
        if stack[i] == opener:
            del stack[i:]
            return


def describe_error(text: str) -> tuple[str, str]:
    """(code, message) for the text of an ``"error"`` token."""
    if text.startswith('"'):
        return E_UNTERMINATED_STRING, "unterminated string literal: expected a closing `\"`"
    if text.startswith("/*"):
        return E_UNTERMINATED_COMMENT, "unterminated block comment: expected `*/`"
    if _NUMBER_START.match(text):
        return E_INVALID_NUMBER, f"invalid number literal `{text}`"
    if text == "\ufeff":  # the one a file's start may hold is dropped when it is read
        return E_INVALID_CHAR, "invalid character '\\ufeff' (a byte order mark: remove it)"
    return E_INVALID_CHAR, f"invalid character {text!r}"
