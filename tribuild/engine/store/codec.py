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
from collections.abc import Callable, Iterable
from json.scanner import make_scanner
from operator import attrgetter

from tribuild.base import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Json = Any  # a parsed JSON tree: None, bool, int, float, str, list or dict[str, ...]

_REGISTRY: dict[str, type] = {}
_NAMES: dict[type, str] = {}
_FIELDS: dict[type, tuple[str, ...] | None] = {}  # a record's field names (None: enum)
_FIELD_VALUES: dict[type, Callable[[Any], tuple[Any, ...]]] = {}  # a record's field values


class NotEncodable(TypeError):
    """The value (or a part of it) has a type the codec does not know."""


class CodecError(ValueError):
    """The data is not a valid encoding (corrupt, or names an unregistered class)."""


def register(cls: type) -> type:
    """Allow a record (``tribuild.base.record``) or an enum in stored values.
    Returns ``cls``, so it also works as a decorator."""
    if not isinstance(cls, type) or not (issubclass(cls, enum.Enum) or record.is_record(cls)):
        raise TypeError(f"{cls!r} is neither a record nor an enum")
    name = f"{cls.__module__}.{cls.__qualname__}"
    _REGISTRY[name] = cls
    _NAMES[cls] = name
    fields = _FIELDS[cls] = None if issubclass(cls, enum.Enum) else record.fields(cls)
    if fields is not None:
        _FIELD_VALUES[cls] = _tuple_getter(fields)
    return cls


def _tuple_getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A function giving the tuple of an object's attributes ``names``."""
    if len(names) > 1:
        return attrgetter(*names)
    return lambda obj: tuple([getattr(obj, name) for name in names])


def register_all(classes: Iterable[type]) -> None:
    for cls in classes:
        register(cls)


_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
PLAIN = frozenset({str, int, bool, type(None)})
"""Types that are their own JSON (no call converts them), whose equal values of one type
encode equally (the type tells ``1`` from ``True``)."""


def encode(value: Any) -> bytes:
    """The canonical UTF-8 JSON bytes of ``value``; raises ``NotEncodable``."""
    return _dumps(to_json(value)).encode()


def decoder(
    reference: Callable[[dict[str, Json]], Any] | None = None,
) -> Callable[[bytes | memoryview | str], Any]:
    """A ``decode`` function. Tagged objects are converted as they are parsed (``_parsed``),
    then the arrays into tuples. With ``reference``, the data may also hold references
    (objects with a key ``"$r"``, see ``argtable``): ``reference(object)`` gives their value,
    a tuple, record or frozenset, or raises ``CodecError``."""
    hook = _parsed
    if reference is not None:

        def hook(tree: dict[str, Json]) -> Any:
            return reference(tree) if "$r" in tree else _parsed(tree)

    # typeshed types the context as a scanner; it is the decoder whose hooks it calls
    scan = make_scanner(json.JSONDecoder(object_hook=hook))  # type: ignore[arg-type]

    def decode(data: bytes | memoryview | str) -> Any:
        """The value ``data`` encodes; raises ``CodecError`` for anything else."""
        try:
            text = data if isinstance(data, str) else str(data, "utf-8")
            tree, end = scan(text, 0)  # as json.loads, without its whitespace checks
            if end != len(text):
                raise json.JSONDecodeError("extra data", text, end)
            return _from_parsed(tree)
        except StopIteration as exc:
            raise CodecError(f"not JSON: no value at character {exc.value}") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CodecError(f"not JSON: {exc}") from None
        except CodecError:
            raise
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            raise CodecError(f"malformed value: {exc}") from None

    return decode


def to_json(value: Any) -> Json:
    kind = type(value)
    if kind in PLAIN:
        return value
    if kind is tuple:
        return [v if type(v) in PLAIN else to_json(v) for v in value]
    if kind is float:
        return value if math.isfinite(value) else {"$f": repr(value)}
    if kind is list:
        return {"$l": [v if type(v) in PLAIN else to_json(v) for v in value]}
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
    return {
        "$c": name,
        "v": [v if type(v) in PLAIN else to_json(v) for v in _FIELD_VALUES[kind](value)],
    }


class _List(list[object]):
    """A list value (``$l``) while ``decode`` parses: its parent makes it a plain list."""

    __slots__ = ()


_NESTED = frozenset({list, dict, _List})  # the parts that ``from_json``/``_from_parsed`` convert


def from_json(tree: Json) -> Any:
    """The value of a parsed JSON tree (as ``json.loads`` returns it)."""
    kind = type(tree)
    if kind is list:
        return tuple([from_json(v) if type(v) in _NESTED else v for v in tree])
    if kind is dict:
        return _from_tagged(tree, from_json)
    return tree


def _from_parsed(part: Any) -> Any:
    """A part of a tree parsed by ``decode``: arrays become tuples, ``_List``s lists; other
    parts are values already."""
    kind = type(part)
    if kind is list:
        return tuple([_from_parsed(v) if type(v) in _NESTED else v for v in part])
    return list(part) if kind is _List else part


def _parsed(tree: dict[str, Json]) -> Any:
    """``decode``'s object hook: the value of a tagged object whose parts are parsed."""
    value = _from_tagged(tree, _from_parsed)
    return _List(value) if type(value) is list else value


decode = decoder()


def _from_tagged(tree: dict[str, Json], convert: Callable[[Json], Any]) -> Any:
    """The value of a tagged object; ``convert`` makes a value of each part."""
    tag = next(iter(tree), "")  # "" for {}: malformed below
    body = tree.get(tag)
    if tag in ("$c", "$e"):
        return _from_class(tree, tag, convert)
    if len(tree) != 1:
        raise CodecError(f"malformed tagged value {sorted(tree)}")
    if tag == "$l" and type(body) is list:
        return [convert(v) for v in body]
    if tag == "$d" and type(body) is list:
        return {convert(_pair(p)[0]): convert(p[1]) for p in body}
    if tag == "$s" and type(body) is list:
        return frozenset([convert(v) for v in body])
    if tag == "$b" and type(body) is str:
        return base64.b64decode(body, validate=True)
    if tag == "$f" and body in ("inf", "-inf", "nan"):
        return float(body)
    raise CodecError(f"unknown tag {tag!r}")


def _pair(item: Json) -> list[Json]:
    if type(item) is not list or len(item) != 2:
        raise CodecError("malformed dict entry")
    return item


def _from_class(tree: dict[str, Json], tag: str, convert: Callable[[Json], Any]) -> Any:
    if len(tree) != 2 or "v" not in tree:
        raise CodecError(f"malformed class value {sorted(tree)}")
    cls = _REGISTRY.get(tree[tag])
    if cls is None:
        raise CodecError(f"class {tree[tag]!r} is not registered with the codec")
    body = tree["v"]
    if tag == "$e":
        if not issubclass(cls, enum.Enum) or type(body) is not str or body not in cls.__members__:
            raise CodecError(f"{tree[tag]} has no member {body!r}")
        return cls[body]
    fields = _FIELDS[cls]
    if fields is None or type(body) is not list or len(body) != len(fields):
        raise CodecError(f"malformed fields for {tree[tag]}")
    return cls(*[convert(v) if type(v) in _NESTED else v for v in body])
