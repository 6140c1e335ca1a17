"""A safe, JSON-based tagged encoding of values, for the on-disk store.

Terms:
- *plain*: None, bool, int, str and finite floats are their JSON selves; tuples are JSON
  arrays (stages return tuples far more than lists).
- *tagged*: every other value is a one-key JSON object (two keys for classes):
  ``{"$l": [...]}`` list, ``{"$d": [[k, v], ...]}`` dict (any hashable keys),
  ``{"$s": [...]}`` frozenset (sorted by encoding, so equal sets encode equally),
  ``{"$b": "base64"}`` bytes, ``{"$f": "inf" | "-inf" | "nan"}``,
  ``{"$c": "module.Qual", "v": [fields...]}`` a registered record and
  ``{"$e": "module.Qual", "v": "MEMBER"}`` a member of a registered enum.
- *registry*: classes allowed in stored values, by ``module.qualname``. Decoding only looks
  classes up there and calls their constructor (or ``Enum[name]``); it never imports, never
  evaluates and never instantiates anything unregistered. No pickle, no marshal, no eval.
"""
from __future__ import annotations

import base64
import enum
import json
import math
from typing import Iterable

from .. import record

_REGISTRY: dict[str, type] = {}
_NAMES: dict[type, str] = {}
_FIELDS: dict[type, tuple[str, ...] | None] = {}   # a record's field names (None: enum)


class NotEncodable(TypeError):
    """The value (or a part of it) has a type the codec does not know."""


class CodecError(ValueError):
    """The data is not a valid encoding (corrupt, or names an unregistered class)."""


def register(cls: type) -> type:
    """Allow a record (``tribuild.record``) or an enum in stored values.
    Returns ``cls``, so it also works as a decorator."""
    if not isinstance(cls, type) or not (issubclass(cls, enum.Enum) or record.is_record(cls)):
        raise TypeError(f"{cls!r} is neither a record nor an enum")
    name = f"{cls.__module__}.{cls.__qualname__}"
    _REGISTRY[name] = cls
    _NAMES[cls] = name
    _FIELDS[cls] = None if issubclass(cls, enum.Enum) else record.fields(cls)
    return cls


def register_all(classes: Iterable[type]) -> None:
    for cls in classes:
        register(cls)


def encode(value) -> bytes:
    """The canonical UTF-8 JSON bytes of ``value``; raises ``NotEncodable``."""
    return json.dumps(to_json(value), separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode()


def decode(data: bytes | str):
    """The value ``data`` encodes; raises ``CodecError`` for anything else."""
    try:
        tree = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise CodecError(f"not JSON: {exc}") from None
    try:
        return from_json(tree)
    except CodecError:
        raise
    except (ValueError, TypeError, RecursionError) as exc:
        raise CodecError(f"malformed value: {exc}") from None


def to_json(value):
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is tuple:
        return [to_json(v) for v in value]
    if kind is float:
        return value if math.isfinite(value) else {"$f": repr(value)}
    if kind is list:
        return {"$l": [to_json(v) for v in value]}
    if kind is dict:
        return {"$d": [[to_json(k), to_json(v)] for k, v in value.items()]}
    if kind is frozenset:
        items = [to_json(v) for v in value]
        return {"$s": sorted(items, key=lambda v: json.dumps(v, sort_keys=True))}
    if kind is bytes:
        return {"$b": base64.b64encode(value).decode("ascii")}
    name = _NAMES.get(kind)
    if name is None:
        raise NotEncodable(f"cannot encode a {kind.__module__}.{kind.__qualname__}")
    fields = _FIELDS[kind]
    if fields is None:
        return {"$e": name, "v": value.name}
    return {"$c": name, "v": [to_json(getattr(value, f)) for f in fields]}


def from_json(tree):
    kind = type(tree)
    if kind is list:
        return tuple(from_json(v) for v in tree)
    if kind is dict:
        return _from_tagged(tree)
    return tree


def _from_tagged(tree: dict):
    tag = next(iter(tree), None)
    body = tree.get(tag)
    if tag in ("$c", "$e"):
        return _from_class(tree, tag)
    if len(tree) != 1:
        raise CodecError(f"malformed tagged value {sorted(tree)}")
    if tag == "$l" and type(body) is list:
        return [from_json(v) for v in body]
    if tag == "$d" and type(body) is list:
        return {from_json(_pair(p)[0]): from_json(p[1]) for p in body}
    if tag == "$s" and type(body) is list:
        return frozenset(from_json(v) for v in body)
    if tag == "$b" and type(body) is str:
        return base64.b64decode(body, validate=True)
    if tag == "$f" and body in ("inf", "-inf", "nan"):
        return float(body)
    raise CodecError(f"unknown tag {tag!r}")


def _pair(item):
    if type(item) is not list or len(item) != 2:
        raise CodecError("malformed dict entry")
    return item


def _from_class(tree: dict, tag: str):
    if set(tree) != {tag, "v"}:
        raise CodecError(f"malformed class value {sorted(tree)}")
    cls = _REGISTRY.get(tree[tag])
    if cls is None:
        raise CodecError(f"class {tree[tag]!r} is not registered with the codec")
    body = tree["v"]
    if tag == "$e":
        if not issubclass(cls, enum.Enum) or type(body) is not str or body not in cls.__members__:
            raise CodecError(f"{tree[tag]} has no member {body!r}")
        return cls[body]
    if issubclass(cls, enum.Enum) or type(body) is not list \
            or len(body) != len(_FIELDS[cls]):
        raise CodecError(f"malformed fields for {tree[tag]}")
    return cls(*(from_json(v) for v in body))
