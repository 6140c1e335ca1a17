"""Which remote cache is in effect: Tribuild.toml's settings with the environment's overrides.

Terms:
- *settings*: a ``RemoteSettings``: the server's URL, whether to read and write, the two
  timeouts and the key prefix. Tribuild.toml's ``[cache]`` table gives them
  (``tribuild.config.remote`` checks its text); the runtime, which has no Tribuild.toml,
  starts from the defaults.
- *overrides*: ``TRIBUILD_REMOTE_CACHE`` takes precedence over ``[cache] remote`` (set
  empty, it turns the remote off); ``TRIBUILD_REMOTE_READ`` / ``TRIBUILD_REMOTE_WRITE``
  (``0`` or ``1``) override ``remote_read`` / ``remote_write``, so that CI writes while
  laptops sharing the same Tribuild.toml only read.
- *secret*: ``TRIBUILD_CACHE_SECRET``, the key entries are signed with (``entries``).
"""

from __future__ import annotations

import os
import re

from tribuild.base.record import record

URL_VARIABLE = "TRIBUILD_REMOTE_CACHE"
READ_VARIABLE = "TRIBUILD_REMOTE_READ"
WRITE_VARIABLE = "TRIBUILD_REMOTE_WRITE"
SECRET_VARIABLE = "TRIBUILD_CACHE_SECRET"

_URL = re.compile(r"(redis|rediss)://[^\s]*|unix:///[^\s]+")


@record
class RemoteSettings:
    url: str | None = None
    read: bool = True
    write: bool = True
    connect_timeout_ms: int = 200
    timeout_ms: int = 1000
    prefix: str = "tribuild:"


def valid_url(text: str) -> bool:
    return bool(_URL.fullmatch(text))


def settings(configured: RemoteSettings | None) -> RemoteSettings | None:
    """The remote settings in effect: Tribuild.toml's ``configured`` ones with the
    environment's overrides; None when no remote is configured (or the variable holds
    something that is not a Redis URL: ``link.open`` reports that)."""
    base = configured or RemoteSettings()
    url = os.environ.get(URL_VARIABLE)
    url = base.url if url is None else (url.strip() or None)
    if url is None:
        return None
    read, write = _flag(READ_VARIABLE, base.read), _flag(WRITE_VARIABLE, base.write)
    return RemoteSettings(url, read, write, base.connect_timeout_ms, base.timeout_ms, base.prefix)


def secret() -> bytes | None:
    """The shared secret entries are signed with (``TRIBUILD_CACHE_SECRET``), or None."""
    value = os.environ.get(SECRET_VARIABLE)
    return value.encode() if value else None


def _flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() not in ("0", "false", "no", "off")
