"""One build's connection to the remote cache, which never fails the build.

Terms:
- *link*: a ``redis`` client made with the configured timeouts and no retries. Every call
  is batched (one ``MGET`` or one pipeline), so a build makes a handful of round trips.
- *down*: after the first error of any kind (refused, timed out, a reply that is not
  Redis's, a full server refusing a write), the link is down for the rest of the build:
  every later call returns at once as if the server held nothing. A dead or hanging server
  therefore costs at most one connect timeout plus one reply timeout per build.
- *warning*: the one line a build prints about its remote: the first error, or the first
  entry refused, with how many more there were.
- *stats*: what the link did (``Stats``), saved for ``tribuild cache stats``.
"""

from __future__ import annotations

import re
import time

from tribuild.base.printable import printable
from tribuild.remote.options import RemoteSettings, valid_url

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from redis import Redis


class Stats:
    """Counters of one build's use of the remote."""

    FIELDS = (
        "hits",
        "misses",
        "refused",
        "errors",
        "bytes_read",
        "bytes_written",
        "entries_written",
        "seconds",
        "import_seconds",
    )

    def __init__(self) -> None:
        self.hits = self.misses = self.refused = self.errors = 0
        self.bytes_read = self.bytes_written = self.entries_written = 0
        self.seconds = 0.0  # waiting on the server
        self.import_seconds = 0.0  # importing the ``redis`` package

    def as_dict(self) -> dict[str, int | float]:
        return {name: getattr(self, name) for name in self.FIELDS}


class Link:
    """The remote of one build (or one ``remote-check``): ``get_many`` and ``set_many``."""

    def __init__(self, settings: RemoteSettings) -> None:
        self.settings = settings
        self.stats = Stats()
        self.warning: str | None = None
        self.problems = 0  # errors and refused entries, the warning's included
        self.down = False
        self._client: Redis | None = None
        if not valid_url(settings.url or ""):
            self._fail(f"`{settings.url}` is not a Redis URL (redis://host:port/db)")

    @property
    def where(self) -> str:
        """The server, without a password the URL may hold."""
        url = self.settings.url or ""
        scheme, sep, rest = url.partition("://")
        return scheme + sep + rest.rpartition("@")[2] if sep else url

    def client(self) -> Redis:
        """The ``redis`` client, made on first use (that import costs ~0.1 s)."""
        if self._client is None:
            begin = time.perf_counter()
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry

            self._client = redis.Redis.from_url(
                self.settings.url or "",  # a link without a valid URL is down: never here
                socket_connect_timeout=self.settings.connect_timeout_ms / 1000,
                socket_timeout=self.settings.timeout_ms / 1000,
                retry=Retry(NoBackoff(), 0),
                retry_on_timeout=False,
                health_check_interval=0,
            )
            self.stats.import_seconds += time.perf_counter() - begin
        return self._client

    def get_many(self, keys: list[str]) -> list[bytes | None]:
        """The values of ``keys`` (None where absent, and everywhere once down)."""
        if not keys or self.down:
            return [None] * len(keys)
        got: list[bytes | None] | None = self._call(lambda: self.client().mget(keys))
        if got is None or len(got) != len(keys) or not all(_bytes_or_none(v) for v in got):
            if got is not None:
                self._fail("the server's reply to MGET is not a list of values")
            return [None] * len(keys)
        self.stats.bytes_read += sum(len(v) for v in got if v is not None)
        return got

    def set_many(self, items: list[tuple[str, bytes]]) -> bool:
        """Store every ``(key, value)`` in one pipeline, in order; False if it failed."""
        if not items or self.down:
            return False

        def send() -> Any:
            pipe = self.client().pipeline(transaction=False)
            for key, value in items:
                pipe.set(key, value)
            return pipe.execute()

        if self._call(send) is None:
            return False
        self.stats.bytes_written += sum(len(v) for _, v in items)
        return True

    def open(self) -> None:
        """Import the client and make it, without a round trip; a failure (no ``redis``
        package) takes the link down."""
        if not self.down:
            self._call(lambda: None)

    def ping(self) -> bool:
        return not self.down and self._call(lambda: self.client().ping()) is True

    def delete(self, keys: list[str]) -> None:
        if keys and not self.down:
            self._call(lambda: self.client().delete(*keys))

    def refuse(self, what: str, why: str) -> None:
        """Count an entry refused by its checks (``entries``); the first is the warning."""
        self.stats.refused += 1
        self._note(f"refused {what}: {why}")

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # noqa: BLE001 (a broken socket being closed)
                pass

    def _call(self, fn: Callable[[], Any]) -> Any:
        """``fn()``, timed (the client's import aside); None after any error, which takes
        the link down."""
        try:
            self.client()
            begin = time.perf_counter()
            try:
                return fn()
            finally:
                self.stats.seconds += time.perf_counter() - begin
        except Exception as error:  # noqa: BLE001 (whatever the client raises: see module)
            self._fail(_describe(error))
            return None

    def _fail(self, why: str) -> None:
        self.down = True
        self.stats.errors += 1
        self._note(why)

    def _note(self, why: str) -> None:
        self.problems += 1
        if self.warning is None:
            self.warning = why

    def warning_line(self) -> str | None:
        """The build's one line about its remote, or None when all went well."""
        if self.warning is None:
            return None
        more = self.problems - 1
        tail = f" (and {more} more problem{'s' * (more != 1)})" if more else ""
        state = "building locally" if self.down else "those targets built locally"
        # the URL may come from a repository's Tribuild.toml, the warning from the server
        return printable(f"warning: remote cache {self.where}: {self.warning}{tail}; {state}")


def _bytes_or_none(value: object) -> bool:
    return value is None or type(value) is bytes


_KINDS = {"bytes": "a string", "int": "an integer", "list": "an array", "NoneType": "nothing"}


def _describe(error: Exception) -> str:
    if isinstance(error, ImportError):
        return "the `redis` package is not installed (pip install 'tribuild[remote]')"
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    said = f"{type(error).__name__}: {text}" if text else type(error).__name__
    if isinstance(error, OSError) or type(error).__module__.startswith("redis"):
        return said  # the client's own account: refused, timed out, a protocol error
    # any other error is the client tripping over a reply it did not expect: a server that
    # is not Redis (``+OK`` to everything made "'bytes' object has no attribute 'get'")
    found = re.match(r"'(\w+)' object has no attribute 'get'", text)
    what = f"{_KINDS.get(found[1], found[1])} where Redis sends a map" if found else said
    return f"the server does not answer as Redis does: the client could not read its reply ({what})"
