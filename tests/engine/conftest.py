"""Shared fixtures: a fresh database, and ``run`` which calls a query under a log and returns
(value, executed keys) in salsa's assert_logs style."""

import pytest

from tribuild.engine import Database


@pytest.fixture
def db():
    return Database()


def run(db, query, *args):
    with db.log() as log:
        value = query(db, *args)
    return value, log.executed
