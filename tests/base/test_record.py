"""``tribuild.base.record``: the value classes' semantics, checked against the dataclass they
replace (equality, hashing, defaults, immutability, repr, pattern matching, copies)."""

import copy
import pickle
from dataclasses import dataclass

import pytest

from tribuild.base.record import FrozenInstanceError, fields, is_record, record, replace


@record
class Pair:
    """Two values."""

    left: int
    right: tuple = ()

    def total(self) -> int:
        return self.left + sum(self.right)


@record
class Twin:
    left: int
    right: tuple = ()


@record
class Loose:
    """Writes its own equality: records keep it."""

    value: int

    def __eq__(self, other):
        return isinstance(other, Loose) and abs(self.value - other.value) <= 1

    def __hash__(self):
        return 0


@record
class Empty:
    pass


@dataclass(frozen=True, slots=True)
class Reference:
    left: int
    right: tuple = ()


def test_equality_and_hash_are_field_wise_within_one_class():
    assert Pair(1, (2,)) == Pair(1, (2,)) and hash(Pair(1, (2,))) == hash(Pair(1, (2,)))
    assert Pair(1, (2,)) != Pair(1, (3,))
    assert Pair(1) != Twin(1), "records of different classes never compare equal"
    assert len({Pair(1), Pair(1), Pair(2)}) == 2
    assert Empty() == Empty() and hash(Empty()) == hash(Empty())


def test_the_class_keeps_what_it_writes_itself():
    assert Loose(1) == Loose(2) and hash(Loose(5)) == 0
    assert Pair(1, (2, 3)).total() == 6
    assert Pair.__doc__ == "Two values."


def test_constructor_defaults_and_errors_match_dataclasses():
    assert Pair(1).right == () and Pair(left=1, right=(4,)).right == (4,)
    for cls in (Pair, Reference):
        with pytest.raises(TypeError):
            cls()
        with pytest.raises(TypeError):
            cls(1, (), 3)


def test_constructors_share_one_template_per_field_count_yet_keep_their_own_names():
    """``__init__`` is a renamed copy of a compiled template: its signature, keyword names,
    error messages and defaults are the class's own, and two classes do not share them."""
    import inspect

    assert str(inspect.signature(Pair)) == "(left, right=())"
    assert str(inspect.signature(Twin)) == "(left, right=())" and Twin.__init__ is not Pair.__init__
    assert Twin(right=(1,), left=2) == Twin(2, (1,))
    assert Pair.__init__.__qualname__ == "Pair.__init__"
    with pytest.raises(TypeError, match="'left'"):
        Pair(right=())
    with pytest.raises(TypeError, match="'first'"):
        record(type("Three", (), {"__annotations__": {"first": int, "second": int}}))(second=1)


def test_a_field_without_a_default_after_one_with_a_default_is_refused():
    with pytest.raises(TypeError, match="without a default follows"):
        record(type("Bad", (), {"__annotations__": {"a": int, "b": int}, "a": 0}))


def test_records_are_immutable_and_slotted():
    p = Pair(1)
    with pytest.raises(FrozenInstanceError):
        p.left = 2
    with pytest.raises(FrozenInstanceError):
        del p.left
    assert not hasattr(p, "__dict__")


def test_repr_pattern_matching_and_copies():
    assert repr(Pair(1, (2,))) == "Pair(left=1, right=(2,))"
    match Pair(1, (2,)):
        case Pair(left, right=(2,)):
            assert left == 1
        case _:
            pytest.fail("positional and keyword patterns must match")
    p = Pair(1, (2,))
    assert copy.copy(p) == p and copy.deepcopy(p) == p and pickle.loads(pickle.dumps(p)) == p


def test_fields_replace_and_is_record():
    assert fields(Pair) == ("left", "right") == fields(Pair(1))
    assert replace(Pair(1, (2,)), right=(5,)) == Pair(1, (5,))
    assert is_record(Pair) and is_record(Pair(1))
    assert not is_record(Reference) and not is_record(Reference(1))
