"""The single quoting helper of generated Python: every user name and value goes through here.

Terms:
- *identifier* (``ident``): a `.tri` name used as a Python local, parameter or class name.
  `.tri` names are identifiers by the grammar, but may be Python keywords (``class``) or shadow
  a name the generated code uses (``torch``, ``self``); those get a trailing ``_``.
- *attribute* (``attr``): a member name on ``self``, kept exactly (state_dict keys are the
  source's names): ``self.conv1``, or ``getattr(self, 'class')`` for a keyword.
- *member reference* (``member``): a member path (``("layer1", 0, "conv1")``) as Python.
- *literal*: a construction-time value (int, float, bool, str, None, tuple) as Python source.
"""
from __future__ import annotations

import keyword
import math

RESERVED = frozenset({"torch", "nn", "F", "launch", "model", "ternary", "K", "self", "Model",
                      "ARGS", "build", "super", "getattr", "True", "False", "None"})


def check_identifier(name: str) -> str:
    if not name.isidentifier():
        raise ValueError(f"not an identifier: {name!r}")
    return name


def ident(name: str) -> str:
    check_identifier(name)
    return f"{name}_" if keyword.iskeyword(name) or keyword.issoftkeyword(name) or name in RESERVED else name


def attr(obj: str, name: str) -> str:
    check_identifier(name)
    return f"getattr({obj}, {literal(name)})" if keyword.iskeyword(name) else f"{obj}.{name}"


def member(path: tuple, root: str = "self") -> str:
    out = root
    for part in path:
        out = f"{out}[{part}]" if type(part) is int else attr(out, part)
    return out


def literal(value: object) -> str:
    if type(value) is str:
        text = repr(value)
        return f'"{text[1:-1]}"' if text[0] == "'" and '"' not in value else text
    if value is None or type(value) in (bool, int):
        return repr(value)
    if type(value) is float:
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if isinstance(value, tuple):
        inner = ", ".join(literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    raise TypeError(f"no Python literal for {value!r}")
