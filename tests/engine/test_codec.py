import enum
import json
import math
import sys
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.budget import examples
from tribuild.base.record import record
from tribuild.engine.store import codec


class Color(enum.Enum):
    RED = "r"
    BLUE = "b"


@record
class Point:
    x: int
    label: str
    tags: tuple[str, ...] = ()


codec.register_all([Color, Point])


class Trap:
    """Counts its instances: decoding must never create one."""

    made = 0

    def __init__(self, *args):
        Trap.made += 1


@record
class Unregistered:
    x: int


@record
class Box:
    content: object


codec.register(Box)


hashable = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text()
    | st.binary()
    | st.floats(allow_nan=False),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=6,
)
leaves = (
    hashable
    | st.sampled_from(Color)
    | st.builds(Point, st.integers(), st.text(), st.lists(st.text(), max_size=3).map(tuple))
)
values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(hashable, inner, max_size=4)
        | st.builds(Box, inner)
    ),
    max_leaves=20,
)


@settings(max_examples=examples(200), deadline=None)
@given(values)
def test_round_trip(value):
    data = codec.encode(value)
    assert codec.decode(data) == value
    assert codec.encode(codec.decode(data)) == data
    assert codec.decode(memoryview(data)) == value  # as sliced from a mapped pack
    assert codec.from_json(json.loads(data)) == value  # the tree decoder (argument table)


def test_lists_stay_lists_and_arrays_become_tuples():
    value = Box([[1, (2, [3])], {"k": [4]}, frozenset({(5, 6)})])
    decoded = codec.decode(codec.encode(value))
    assert decoded == value and type(decoded.content) is list
    assert [type(part) for part in decoded.content] == [list, dict, frozenset]
    assert type(decoded.content[0][1]) is tuple and type(decoded.content[0][1][1]) is list
    assert type(decoded.content[1]["k"]) is list


@settings(max_examples=examples(50), deadline=None)
@given(st.frozensets(st.integers() | st.text(), max_size=6))
def test_equal_frozensets_encode_identically(items):
    rebuilt = frozenset(reversed(list(items)))
    assert codec.encode(items) == codec.encode(rebuilt)


def test_types_are_preserved():
    value = (1, 1.0, True, None, [1], (1,), b"1", "1", {1: 2}, frozenset({1}))
    decoded = codec.decode(codec.encode(value))
    assert [type(v) for v in decoded] == [type(v) for v in value]


def test_special_floats():
    inf, ninf, nan = codec.decode(codec.encode((math.inf, -math.inf, math.nan)))
    assert inf == math.inf and ninf == -math.inf and math.isnan(nan)
    assert codec.decode(codec.encode(-0.0)) == 0.0 and math.copysign(1, codec.decode(b"-0.0")) < 0


@pytest.mark.parametrize("value", [object(), {1, 2}, Trap(), Unregistered(1), [complex(1, 2)]])
def test_unknown_types_are_not_encodable(value):
    with pytest.raises(codec.NotEncodable):
        codec.encode(value)


@pytest.mark.parametrize(
    "tree",
    [
        {"$c": f"{__name__}.Trap", "v": []},
        {"$c": f"{__name__}.Unregistered", "v": [1]},
        {"$c": "os.system", "v": ["echo pwned"]},
        {"$c": "builtins.eval", "v": ["1+1"]},
        {"$c": "not_imported_module_xyz.Thing", "v": []},
        {"$e": "builtins.int", "v": "real"},
        {"$c": f"{__name__}.Color", "v": ["r"]},
        {"$e": f"{__name__}.Color", "v": "GREEN"},
        {"$e": f"{__name__}.Point", "v": "x"},
        {"$c": f"{__name__}.Point", "v": [1]},
        {"$c": f"{__name__}.Point", "v": [1, "a", []], "extra": 1},
        {"$x": 1},
        {"$b": "not base64!"},
        {"$f": "1e999"},
        {"$d": [[1]]},
        {"plain": "object"},
    ],
)
def test_decoding_never_instantiates_unregistered_classes(tree):
    with pytest.raises(codec.CodecError):
        codec.decode(json.dumps(tree))
    assert Trap.made == 1  # the one built by the parametrize list above
    assert "not_imported_module_xyz" not in sys.modules


@pytest.mark.parametrize("data", [b"", b"{", b"\xff\xfe", b"[1,", b"NaNx"])
def test_garbage_is_a_codec_error(data):
    with pytest.raises(codec.CodecError):
        codec.decode(data)


def test_only_records_and_enums_can_be_registered():
    @dataclass
    class Mutable:
        x: int

    @dataclass(frozen=True)
    class Frozen:
        x: int

    for cls in (Mutable, Frozen, Trap, int, Point(1, "a")):
        with pytest.raises(TypeError):
            codec.register(cls)
