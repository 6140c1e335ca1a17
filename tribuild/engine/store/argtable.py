"""The store's table of key arguments: each distinct argument, and each distinct part of
one, stored and decoded once.

Terms:
- *node*: a key argument, or a tuple, record or frozenset inside one, in the codec's
  encoding (``codec``). Its *node text* is that encoding as one line of compact JSON, with
  each part that is itself a node replaced by a *reference* ``{"$r": id}`` to an earlier
  node (scalars, enum members and the other tagged values stay inline). Keys of different
  queries share arguments (``checked_instance(k)``, ``ir(k)``, ``optimized_ir(k, 2)`` all
  hold ``k``) and arguments share parts, so the store holds each once, and a load builds
  each once: decoding a node finds its parts already built.
- *table text*: the node texts, one per line, in id order; a key lists the node ids of
  its arguments (the ``args`` column).
- *same*: two arguments are the same when they are equal with every part of the same type
  (``(1,)`` and ``(True,)`` are equal, not the same): the same arguments encode alike, so
  an argument the same as one already encoded reuses its node id without encoding it.
- *carry*: a save starts from the table it loaded, as bytes: keys it loaded keep their
  node ids, new keys' nodes are looked up by their text and appended. When keys were
  dropped (then nodes may be orphaned) the table is rebuilt from the keys kept.
Decoding names only registered classes (``codec``), one line at a time, references resolved
as the line is parsed (``codec.decoder``); a node that does not decode, or that refers to
one that does not, is reported by its id, so the keys using it are dropped.
"""

from __future__ import annotations

import json
from functools import partial
from itertools import repeat
from json.encoder import encode_basestring

from tribuild.base.record import fields, is_record
from tribuild.engine.store import codec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from tribuild.engine.store.codec import Json

_NODE_TAGS = ("$c", "$s")  # tagged values that become nodes (with tuples)
_WALKED_TAGS = ("$c", "$s", "$l", "$d")  # tagged values whose parts may be nodes


_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def _plain_text(value: Any) -> str:
    """``_dumps(value)`` for a value of a ``codec.PLAIN`` type, without the encoder's set-up."""
    if type(value) is str:
        return encode_basestring(value)
    return _dumps(value) if type(value) is not int else int.__repr__(value)


def parse(text: bytes) -> list[Json]:
    """The node trees (JSON, references not resolved) of a table text."""
    return json.loads(b"[" + text.replace(b"\n", b",") + b"]") if text else []


def decode(text: bytes) -> tuple[list[Any], set[int]]:
    """Each node's value (None where it does not decode) and the ids that do not."""
    values: list[Any] = []
    bad: set[int] = set()

    def reference(tree: dict[str, Json]) -> Any:
        ref = tree["$r"]
        if len(tree) != 1 or type(ref) is not int or not 0 <= ref < len(values) or ref in bad:
            raise codec.CodecError(f"bad reference {ref!r}")
        return values[ref]

    node = codec.decoder(reference)
    for i, line in enumerate(str(text, "utf-8").split("\n") if text else ()):
        try:
            value = node(line)
            if type(value) is list or type(value) is dict:
                raise codec.CodecError("a node is a list or a dict")
        except codec.CodecError:
            value = None
            bad.add(i)
        values.append(value)
    return values, bad


def _same(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same (module docstring); False where unsure (floats,
    sets and the other types whose equal values may encode differently)."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        return False
    if kind in codec.PLAIN:
        return bool(a == b)
    if kind is tuple:
        return len(a) == len(b) and all(map(_same, a, b))
    if is_record(a):
        return all(_same(getattr(a, name), getattr(b, name)) for name in fields(a))
    return False


class Writer:
    """The node table of a save: the loaded one (``text``, ``count`` nodes) plus the nodes
    of new keys' arguments."""

    def __init__(self, text: bytes = b"", count: int = 0) -> None:
        self._base, self._count = text, count
        self._ids: dict[str, int] | None = None
        self._plain: dict[tuple[type, Any], int] = {}  # (type, value) -> id, plain arguments
        self._objects: dict[int, tuple[Any, int]] = {}  # id(value) -> (value, id): shared
        self._values: dict[Any, tuple[Any, int]] = {}  # value -> (value, id): equal parts recur
        self._new: list[str] = []

    def ids(self, args: tuple[Any, ...]) -> list[int] | None:
        """The node ids of ``args``, adding the new nodes; None if one cannot be encoded."""
        plain = self._plain
        out = []
        try:
            for value in args:
                kind = type(value)
                if kind in codec.PLAIN:
                    node = plain.get((kind, value))
                    if node is None:
                        node = plain[kind, value] = self._add(_plain_text(value))
                else:
                    node = self._node(None, value)
                out.append(node)
        except (codec.NotEncodable, ValueError):
            return None
        return out

    def nodes(self) -> int:
        return self._count + len(self._new)

    def text(self) -> bytes:
        if not self._new:
            return self._base
        new = "\n".join(self._new).encode()
        return self._base + b"\n" + new if self._base else new

    def _node(self, tree: Json, value: Any) -> int:
        """The id of the node of ``value`` (None where not known) encoded as ``tree`` (None:
        encoded here, when needed): a value the same as one seen before reuses its id."""
        known = self._objects.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        try:
            known = self._values.get(value)
        except TypeError:  # a part is a list or a dict: not looked up
            tree = codec.to_json(value) if tree is None else tree
            value = known = None
        if known is not None and _same(known[0], value):
            self._objects[id(value)] = (value, known[1])
            return known[1]
        tree = codec.to_json(value) if tree is None else tree
        node = self._add(_dumps(self._refs(tree, value)))
        if value is not None:
            self._objects[id(value)] = (value, node)
            if known is None:
                self._values[value] = (value, node)
        return node

    def _add(self, text: str) -> int:
        """The id of the node of ``text``, added if new."""
        if self._ids is None:
            lines = self._base.decode().split("\n") if self._base else []
            self._ids = {line: i for i, line in enumerate(lines)}
        node = self._ids.get(text)
        if node is None:
            node = self._ids[text] = self._count + len(self._new)
            self._new.append(text)
        return node

    def _refs(self, tree: Json, value: Any = None) -> Json:
        """``tree`` (the encoding of ``value``, None where not known) with its parts that are
        nodes replaced by references."""
        kind = type(tree)
        if kind is list:
            return [
                self._part(p, v)
                for p, v in zip(tree, repeat(None) if value is None else value, strict=False)
            ]
        if kind is not dict:
            return tree
        tag = next(iter(tree), None)
        if tag == "$c":
            values = repeat(None) if value is None else map(partial(getattr, value), fields(value))
            return {
                "$c": tree["$c"],
                "v": [self._part(p, v) for p, v in zip(tree["v"], values, strict=False)],
            }
        if tag == "$d":
            return {"$d": [[self._part(k), self._part(v)] for k, v in tree["$d"]]}
        if tag in _WALKED_TAGS:
            return {tag: [self._part(part) for part in tree[tag]]}
        return tree

    def _part(self, tree: Json, value: Any = None) -> Json:
        if type(tree) is list or type(tree) is dict and next(iter(tree), None) in _NODE_TAGS:
            return {"$r": self._node(tree, value)}
        return self._refs(tree, value)
