"""The small query pipelines most engine tests read: an input ``text`` and derived queries
over it. Each test module adds the queries of its own behaviour on top."""

from tribuild.engine import derived, input_query


@input_query
def text(db, name): ...


@derived
def words(db, name):
    return tuple(text(db, name).split())


@derived
def count(db, name):
    return len(words(db, name))


@derived
def length(db, name):
    return len(text(db, name))
