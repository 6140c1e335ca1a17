"""Text safe to print on a terminal: what a file name or a source line holds is shown, never
obeyed. A control character (ESC starts a terminal's escape sequences, BEL rings it) is
written as its escape, ``\\x1b``; tab and newline stay.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ESCAPES = {c: f"\\x{c:02x}" for c in [*range(0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]}


def printable(text: str) -> str:
    """``text`` with every control character but tab and newline escaped (``\\x1b``)."""
    return text.translate(_ESCAPES) if _CONTROL.search(text) else text
