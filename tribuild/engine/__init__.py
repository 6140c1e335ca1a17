"""tribuild's query engine: a salsa-like memoizing database. It knows nothing about .tri.

Declare inputs with ``@input_query`` and pure stages with ``@derived``; call a query with a
``Database`` to read it. See each module's docstring for its terms: ``durability``
(revisions), ``memo`` (what is known per key), ``query`` (declarations), ``runtime`` (active
stacks, cycles, cancellation), ``fetch`` (hit / verify / execute), ``lru``, ``stats``,
``explain`` (why / graph), ``codec`` and ``store`` (persistence), ``fingerprint`` (salts),
``merge`` (export from forked workers, merge into the parent).
"""
from . import codec, fingerprint
from .database import Database
from .durability import Durability
from .errors import Cancelled, CycleError, MissingInput
from .explain import Step
from .merge import MergeReport
from .query import Query, derived, input_query
from .stats import Log, QueryStats
from .store import LoadReport, SaveReport

__all__ = ["Cancelled", "CycleError", "Database", "Durability", "LoadReport", "Log",
           "MergeReport", "MissingInput", "Query", "QueryStats", "SaveReport", "Step", "codec",
           "derived", "fingerprint", "input_query"]
