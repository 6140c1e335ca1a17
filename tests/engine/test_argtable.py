"""The table of key arguments: round trips, sharing of equal parts, carrying a loaded
table, and nodes that do not decode."""

import enum

from tribuild.base.record import record
from tribuild.engine.store import argtable, codec


class Mode(enum.Enum):
    FAST = 1


@record
class Inner:
    name: str
    dims: tuple


@record
class Outer:
    inner: Inner
    mode: Mode
    tags: frozenset
    extra: object


codec.register_all([Mode, Inner, Outer])

SHARED = Inner("conv", (3, 3, (1, None)))
KEYS = [
    ("models/a.tri", 7),
    (1,),
    (True,),
    (1.0,),
    (-0.0,),
    (0.0,),
    (float("inf"),),
    (None,),
    ("",),
    (b"\x00bytes",),
    ("line\nbreak \u2028 ünï",),
    (SHARED,),
    (Outer(SHARED, Mode.FAST, frozenset({2, 1}), (SHARED, "x")), 2),
    (Outer(SHARED, Mode.FAST, frozenset(), {"k": [1, 2]}),),
    ((SHARED, (SHARED, ())),),
    (),
]


def _round_trip(keys, writer=None):
    writer = writer or argtable.Writer()
    ids = [writer.ids(args) for args in keys]
    text = writer.text()
    values, bad = argtable.decode(text)
    assert bad == set()
    return text, ids, [tuple(values[i] for i in key) for key in ids]


def _same(a: tuple, b: tuple) -> bool:
    """Equal, with the same types all the way down (1, True and 1.0 are equal in Python)."""
    return codec.encode(a) == codec.encode(b)


def test_arguments_round_trip_with_their_exact_types():
    _, _, decoded = _round_trip(KEYS)
    assert all(_same(got, want) for got, want in zip(decoded, KEYS, strict=True))


def test_equal_arguments_and_parts_are_stored_once():
    text, ids, _ = _round_trip(KEYS + KEYS)
    assert ids[: len(KEYS)] == ids[len(KEYS) :]
    assert text.count(b'"conv"') == 1 and b"\n\n" not in text


# Equal arguments built apart (not the same objects), as keys decoded from two workers' payloads
# are, some of them equal but with parts of other types: each must keep its own types.
def _apart():
    return [
        (Inner("a", (1, (2,))),),
        (Inner("a", (True, (2,))),),
        (Inner("a", (1.0, (2,))),),
        ((Inner("z", (-0.0,)), 1),),
        ((Inner("z", (0.0,)), True),),
        ((frozenset({1}), ()),),
        ((frozenset({True}), ()),),
    ]


def test_equal_arguments_built_apart_keep_their_types_and_share_same_parts():
    first, second = _apart(), _apart()
    assert first == second and first[0] == first[1] == first[2] and first[3] == first[4]
    text, ids, decoded = _round_trip(first + second)
    assert all(_same(got, want) for got, want in zip(decoded, first + second, strict=True))
    assert ids[: len(first)] == ids[len(first) :]
    assert len(set(map(tuple, ids[:3]))) == 3
    assert text.count(b"[2]") == 1


def test_a_carried_table_keeps_its_ids_and_appends_new_nodes():
    text, ids, _ = _round_trip(KEYS[:6])
    more = [KEYS[2], (Inner("new", ()),), KEYS[12]]
    writer = argtable.Writer(text, len(argtable.parse(text)))
    new_text, new_ids, decoded = _round_trip(more, writer)
    assert new_text.startswith(text + b"\n") and new_ids[0] == ids[2]
    assert all(_same(got, want) for got, want in zip(decoded, more, strict=True))


def test_unencodable_arguments_have_no_ids():
    assert argtable.Writer().ids((1, object())) is None


def test_nodes_that_do_not_decode_are_reported_with_the_nodes_using_them():
    text, ids, _ = _round_trip([(SHARED,), (Outer(SHARED, Mode.FAST, frozenset(), 1),), (5,)])
    lines = text.decode().split("\n")
    lines[ids[0][0]] = '{"$c":"os.system","v":["touch CANARY"]}'
    values, bad = argtable.decode("\n".join(lines).encode())
    assert ids[0][0] in bad and ids[1][0] in bad and ids[2][0] not in bad
    assert values[ids[2][0]] == 5


def test_references_must_name_earlier_nodes():
    for line in ('[{"$r":0}]', '[{"$r":-1}]', '[{"$r":"0"}]', '{"$r":0,"x":1}'):
        assert argtable.decode(line.encode())[1] == {0}
