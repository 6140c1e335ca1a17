"""Queries and values shared by the persistence tests (module level, so their identities
are stable across a save and a load)."""

from tribuild.base.record import record
from tribuild.engine import derived, input_query
from tribuild.engine.store import codec

TEXTS = {"a": "alpha beta", "b": "bravo charlie delta", "c": "echo"}


@codec.register
@record
class Words:
    name: str
    words: tuple[str, ...]


@input_query
def text(db, name): ...


@derived
def words(db, name):
    return Words(name, tuple(text(db, name).split()))


@derived
def count(db, name):
    return len(words(db, name).words)


@derived
def summary(db):
    return tuple(count(db, n) for n in sorted(TEXTS))


class Opaque:
    """Not registered with the codec."""

    def __init__(self, n):
        self.n = n

    def __eq__(self, other):
        return isinstance(other, Opaque) and other.n == self.n

    def __hash__(self):
        return hash(self.n)


@derived
def opaque(db, name):
    return Opaque(count(db, name))


@derived
def via_opaque(db, name):
    return opaque(db, name).n + 1


@derived
def keyed_by_opaque(db, key):
    return count(db, "a") + key.n


@derived
def uses_opaque_key(db):
    return keyed_by_opaque(db, Opaque(1))


def set_inputs(db, texts=TEXTS):
    for name, value in texts.items():
        db.set(text, name, value)


def run_all(db):
    """Read the derived queries whose keys can be stored, returning their values."""
    return (summary(db), via_opaque(db, "a"))


@derived
def keyed_by_words(db, key):
    return (count(db, "a"), repr(key))


class Number(int):
    """An int the codec cannot encode (not a plain int), yet ``==`` to the plain one."""


@derived
def length(db, name):
    """``len`` of the text; a ``Number`` when the text ends with a space."""
    value = text(db, name)
    return Number(len(value)) if value.endswith(" ") else len(value)


@derived
def length_plus_one(db, name):
    return length(db, name) + 1
