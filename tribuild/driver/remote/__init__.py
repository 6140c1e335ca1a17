"""The shared build cache on a Redis server: what a build takes from it and gives to it.

Terms:
- *remote*: the server named by ``TRIBUILD_REMOTE_CACHE`` (it takes precedence; set empty,
  it turns the remote off) or by ``[cache] remote`` in Tribuild.toml
  (``tribuild.config.remote``). ``TRIBUILD_REMOTE_READ`` / ``TRIBUILD_REMOTE_WRITE`` (``0``
  or ``1``) override ``remote_read`` / ``remote_write``, so that CI writes while laptops
  sharing the same Tribuild.toml only read.
- *action key*: per target, a digest of everything its outputs depend on (``action``).
- *action entry*: under the action key, the target's outputs as (relative path, content
  digest) pairs and its diagnostics, framed with a digest and, with
  ``TRIBUILD_CACHE_SECRET`` set, an HMAC-SHA256 (``entries``).
- *blob*: one output file's bytes under the SHA-256 of those bytes (a CAS): a kernel file
  shared by many targets is stored once.
- *link*: the connection of one build (``link``): the ``redis`` package is imported only
  when a link is opened, which a no-op build never does.

The build (``tribuild.driver.build``) asks ``build_cache`` for the targets it can take from
the remote before it builds, builds the others, writes everything through the same
``outputs`` path, then hands what it built to ``build_cache`` to upload.
"""

from __future__ import annotations

import os

from tribuild.config.remote import RemoteSettings, valid_url

URL_VARIABLE = "TRIBUILD_REMOTE_CACHE"
READ_VARIABLE = "TRIBUILD_REMOTE_READ"
WRITE_VARIABLE = "TRIBUILD_REMOTE_WRITE"
SECRET_VARIABLE = "TRIBUILD_CACHE_SECRET"


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


__all__ = ["settings", "secret", "valid_url"]
