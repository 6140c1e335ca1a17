"""The link to a shared cache on a Redis server, below both the driver and the runtime.

Terms:
- *remote*: the server named by ``TRIBUILD_REMOTE_CACHE`` or ``[cache] remote``
  (``options``: ``settings()``, which one is in effect, and ``secret()``, the signing key).
- *entry*: bytes stored under a key, framed with a digest and, with
  ``TRIBUILD_CACHE_SECRET`` set, an HMAC-SHA256 (``entries``).
- *link*: one connection, with timeouts, down for good at its first error (``link``: the
  ``redis`` package is imported only when a link is used).

Its users: the driver's build cache (``tribuild.driver.remote``: action keys, outputs,
import lists) and the runtime's tuning exchange (``tribuild.runtime.tuning``). This
``__init__`` is what they may use: the names below, and the module ``entries`` (which
imports ``hmac``, so it is imported only where entries are read or written, never by a build
without a remote).
"""

from __future__ import annotations

from tribuild.remote.link import Link
from tribuild.remote.options import (
    READ_VARIABLE,
    SECRET_VARIABLE,
    URL_VARIABLE,
    WRITE_VARIABLE,
    RemoteSettings,
    secret,
    settings,
    valid_url,
)

__all__ = [
    "Link",
    "READ_VARIABLE",
    "SECRET_VARIABLE",
    "URL_VARIABLE",
    "WRITE_VARIABLE",
    "RemoteSettings",
    "secret",
    "settings",
    "valid_url",
]
