"""The formatter (`tribuild fmt`, an editor's "format document"): layout only, never tokens.

Terms:
- *statement line*: a line whose first token starts a statement or an item (the token before
  it ends one: a newline, ``;``, ``{`` or ``}``). It is indented four spaces per enclosing
  ``{``; a line starting with ``}`` one level less.
- *continuation line*: a line inside ``( )`` or ``[ ]``, or one the lexer joins to the line
  before (``? a`` / ``: b`` of a conditional). It moves by as much as the statement line it
  continues, so hand alignment (arguments under their bracket) is kept.
- *comment line*: a line holding only a comment. Outside brackets it is indented as a
  statement line there would be; inside them, or inside a block comment begun on an earlier
  line, it moves with what it sits in.
- Also: trailing whitespace removed, ``\\r\\n`` made ``\\n``, at most two blank lines at the
  top level and one inside braces, no blank lines at the start, one newline at the end.

The tokens of the result are exactly those of the input and every comment is kept (tested
on the zoo). A text the lexer finds errors in is not formatted (None): where a string or
block comment ends is then a guess.
"""

from __future__ import annotations

from tribuild.lang.syntax.lexer import lex

INDENT = 4
_ENDS_STATEMENT = frozenset(("newline", ";", "{", "}"))


def format_text(text: str) -> str | None:
    """``text`` laid out by the rules above; None if the lexer finds an error in it."""
    text = text.replace("\r\n", "\n")
    tokens = lex(text)
    if any(t.kind == "error" for t in tokens):
        return None
    lines = text.split("\n")
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    comments = _block_comments(text, tokens)
    first_token: dict[int, int] = {}  # line -> index of the token it starts with
    line_of = 0
    for i, tok in enumerate(tokens):
        if tok.kind == "newline":
            continue
        while line_of + 1 < len(starts) and starts[line_of + 1] <= tok.offset:
            line_of += 1
        line = lines[line_of]
        if tok.offset - starts[line_of] == len(line) - len(line.lstrip(" \t")):
            first_token.setdefault(line_of, i)
    out: list[tuple[str, int]] = []  # each line laid out, with the braces open before it
    braces = parens = 0
    delta = 0  # how far the current statement's first line moved
    moved = 0  # how far the last line laid out moved
    cursor = 0  # tokens before the current line
    for n, line in enumerate(lines):
        while cursor < len(tokens) and tokens[cursor].offset < starts[n]:
            kind = tokens[cursor].kind
            braces += (kind == "{") - (kind == "}")
            parens += (kind in ("(", "[")) - (kind in (")", "]"))
            cursor += 1
        stripped = line.strip()
        old = _indent_width(line)
        level = max(braces, 0)
        if not stripped:
            out.append(("", level))
            continue
        index = first_token.get(n)
        if starts[n] in comments:  # inside a block comment begun on an earlier line
            laid = _shift(line, moved)
        elif index is None:  # a comment line
            laid = _shift(line, delta) if parens > 0 else " " * (INDENT * level) + stripped
        else:
            tok = tokens[index]
            before = tokens[index - 1].kind if index > 0 else "newline"
            if parens == 0 and (before in _ENDS_STATEMENT or tok.kind == "}"):
                level = max(braces - (tok.kind == "}"), 0)
                delta = INDENT * level - old
                laid = " " * (INDENT * level) + stripped
            else:
                laid = _shift(line, delta)
        moved = _indent_width(laid) - old
        out.append((laid, level))
    return _blank_lines(out)


def _indent_width(line: str) -> int:
    width = 0
    for ch in line:
        if ch == " ":
            width += 1
        elif ch == "\t":
            width += INDENT
        else:
            break
    return width


def _shift(line: str, delta: int) -> str:
    body = line.lstrip(" \t").rstrip()
    return " " * max(_indent_width(line) + delta, 0) + body


def _block_comments(text: str, tokens) -> set[int]:
    """The starts of the lines that fall inside a block comment begun on an earlier line.
    Only the text between tokens is searched: strings cannot hold comments."""
    inside: set[int] = set()
    gaps = [(0, tokens[0].offset if tokens else len(text))]
    for a, b in zip(tokens, tokens[1:], strict=False):
        gaps.append((a.offset + len(a.text), b.offset))
    if tokens:
        gaps.append((tokens[-1].offset + len(tokens[-1].text), len(text)))
    for start, end in gaps:
        i = start
        while i < end:
            if text.startswith("#", i):
                i = text.find("\n", i, end)
                i = end if i < 0 else i
            elif text.startswith("/*", i):
                close = text.find("*/", i + 2, end)
                close = end if close < 0 else close + 2
                line = text.find("\n", i, close)
                while line >= 0:
                    inside.add(line + 1)
                    line = text.find("\n", line + 1, close)
                i = close
            else:
                i += 1
    return inside


def _blank_lines(lines: list[tuple[str, int]]) -> str:
    """Runs of blank lines cut to two at the top level, one inside braces; none first."""
    out: list[str] = []
    blank = 0
    for line, level in lines:
        if not line:
            blank += 1
            continue
        if out:
            out.extend([""] * min(blank, 2 if level == 0 else 1))
        blank = 0
        out.append(line.rstrip())
    return "\n".join(out) + "\n" if out else ""
