"""tribuild's query engine: a salsa-like memoizing database. It knows nothing about .tri.

Declare inputs with ``@input_query`` and pure stages with ``@derived``; call a query with a
``Database`` to read it. See each module's docstring for its terms: ``durability``
(revisions), ``memo`` (what is known per key), ``query`` (declarations), ``runtime`` (active
stacks, cycles, cancellation), ``fetch`` (hit / verify / execute), ``lru``, ``stats``,
``explain`` (why / graph), ``codec`` and ``store`` (persistence), ``fingerprint`` (salts),
``merge`` (export from forked workers, merge into the parent).
"""

from tribuild.engine import fingerprint
from tribuild.engine.database import Database
from tribuild.engine.durability import Durability
from tribuild.engine.errors import Cancelled, CycleError, MissingInput
from tribuild.engine.explain import Step
from tribuild.engine.query import Query, derived, input_query
from tribuild.engine.stats import Log, QueryStats
from tribuild.engine.store import codec
from tribuild.engine.store.disk import LoadReport, SaveReport
from tribuild.engine.store.merge import MergeReport

__all__ = [
    "Cancelled",
    "CycleError",
    "Database",
    "Durability",
    "LoadReport",
    "Log",
    "MergeReport",
    "MissingInput",
    "Query",
    "QueryStats",
    "SaveReport",
    "Step",
    "codec",
    "derived",
    "fingerprint",
    "input_query",
]
