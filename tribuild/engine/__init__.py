"""tribuild's query engine: a salsa-like memoizing database. It knows nothing about .tri.

Declare inputs with ``@input_query`` and pure stages with ``@derived``; call a query with a
``Database`` to read it. See each module's docstring for its terms: ``durability``
(revisions), ``memo`` (what is known per key), ``query`` (declarations), ``runtime`` (active
stacks, cycles, cancellation), ``fetch`` (hit / verify / execute), ``lru``, ``stats``,
``explain`` (why / graph), ``codec`` and ``store`` (persistence), ``fingerprint`` (salts),
``merge`` (export from forked workers, merge into the parent).

What the rest may use is imported here. For the driver's cache folder and its records:
``folder`` (a store folder's files and checks), ``write_atomic``, ``PACK_BYTES`` (the bound
on a file read back), ``package_hash`` (the salt), ``REGISTRY`` (the declared queries, for
``--timing``) and ``NEVER_RAN`` (the why-chain of an output no query made).
"""

from tribuild.engine import fingerprint
from tribuild.engine.database import Database
from tribuild.engine.durability import Durability
from tribuild.engine.errors import Cancelled, CycleError, MissingInput
from tribuild.engine.explain import NEVER_RAN, Step
from tribuild.engine.fingerprint import package_hash
from tribuild.engine.query import REGISTRY, Query, derived, input_query
from tribuild.engine.stats import Log, QueryStats
from tribuild.engine.store import codec, folder
from tribuild.engine.store.disk import LoadReport, SaveReport, write_atomic
from tribuild.engine.store.merge import MergeReport
from tribuild.engine.store.packs import PACK_BYTES

__all__ = [
    "NEVER_RAN",
    "PACK_BYTES",
    "REGISTRY",
    "folder",
    "package_hash",
    "write_atomic",
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
