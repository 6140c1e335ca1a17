"""The remote build cache's settings in Tribuild.toml's ``[cache]`` table.

Terms:
- *remote*: ``remote = "redis://host:port/db"`` (also ``rediss://`` for TLS and
  ``unix:///path/to/socket``); absent, the build uses only its local cache folder. The
  ``TRIBUILD_REMOTE_CACHE`` variable overrides it (``tribuild.remote.settings``).
- ``remote_read`` / ``remote_write``: whether builds take results from the remote and put
  theirs there (both true by default; a laptop that should only read sets
  ``remote_write = false``).
- ``remote_connect_timeout_ms`` / ``remote_timeout_ms``: how long one connection attempt and
  one reply may take (200 ms and 1000 ms by default). The first failure turns the remote
  off for the rest of the build, so a dead server costs at most these two in total.
- ``remote_prefix``: the start of every key (``tribuild:`` by default), so that projects
  can share one server.

Only text is checked here: nothing connects, and the ``redis`` package is not imported.
"""

from __future__ import annotations

from tribuild.config.locate import Path
from tribuild.config.schema import Checker
from tribuild.remote import RemoteSettings, valid_url

KEYS = (
    "remote",
    "remote_read",
    "remote_write",
    "remote_connect_timeout_ms",
    "remote_timeout_ms",
    "remote_prefix",
)
URL_EXPECTED = 'a Redis URL such as "redis://localhost:6379/0"'


def read_settings(c: Checker, cache: dict) -> RemoteSettings:
    """The remote settings of the ``[cache]`` table ``cache``; problems go to ``c``."""
    where: Path = ("cache",)
    default = RemoteSettings()
    return RemoteSettings(
        url=c.get(cache, where, "remote", None, _url(c)),
        read=c.get(cache, where, "remote_read", True, _boolean(c)),
        write=c.get(cache, where, "remote_write", True, _boolean(c)),
        connect_timeout_ms=c.get(
            cache, where, "remote_connect_timeout_ms", default.connect_timeout_ms, _millis(c)
        ),
        timeout_ms=c.get(cache, where, "remote_timeout_ms", default.timeout_ms, _millis(c)),
        prefix=c.get(cache, where, "remote_prefix", default.prefix, _prefix(c)),
    )


def _url(c: Checker):
    def check(where: Path, value: object) -> str | None:
        return c.expect(where, value, lambda v: isinstance(v, str) and valid_url(v), URL_EXPECTED)

    return check


def _boolean(c: Checker):
    def check(where: Path, value: object) -> bool | None:
        return c.expect(where, value, lambda v: isinstance(v, bool), "true or false")

    return check


def _millis(c: Checker):
    def check(where: Path, value: object) -> int | None:
        return c.expect(
            where,
            value,
            lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 600_000,
            "a positive number of milliseconds (at most 600000)",
        )

    return check


def _prefix(c: Checker):
    def check(where: Path, value: object) -> str | None:
        return c.expect(
            where,
            value,
            lambda v: isinstance(v, str) and v != "" and not any(ch.isspace() for ch in v),
            "a non-empty string without spaces",
        )

    return check
