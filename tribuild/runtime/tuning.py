"""Autotuning choices on the remote cache, so that a fleet tunes each kernel shape once.

Terms:
- *tuning key*: ``tribuild.runtime.autotune``'s key (kernel family and flags, shape bucket,
  device name) with the Triton version, which can change the best config.
- *tuning entry*: under ``<prefix>autotune:<sha256 of the tuning key>``, the chosen config
  as JSON, framed like every entry (``entries``: digested, signed with
  ``TRIBUILD_CACHE_SECRET`` when set). A config read back is used only when it is one of
  the candidates the launcher offers.

The runtime has no Tribuild.toml: the remote is the one ``TRIBUILD_REMOTE_CACHE`` names,
with the default prefix and timeouts, and ``TRIBUILD_REMOTE_READ`` / ``_WRITE``. The link
goes down for the process at its first error (``link``), so a dead server costs one timeout.
"""

from __future__ import annotations

import json
from typing import Any

from tribuild.remote import Link, RemoteSettings, entries, secret, settings

_LINKS: dict[tuple[object, ...], Link] = {}  # a setting's identity -> its link


class RemoteTuning:
    """Get and put tuned configs (as ``KernelConfig.to_json`` dicts) on the remote."""

    def __init__(self, link: Link, triton_version: str) -> None:
        self.link, self.triton_version = link, triton_version

    def key(self, tuning_key: str) -> tuple[str, str]:
        """(the full tuning key, its Redis key)."""
        full = f"{tuning_key}|triton={self.triton_version}"
        return full, entries.autotune_key(
            self.link.settings.prefix, entries.content_digest(full.encode())
        )

    def get(self, tuning_key: str) -> dict[str, Any] | None:  # a config's JSON object
        if not self.link.settings.read:
            return None
        full, key = self.key(tuning_key)
        data = self.link.get_many([key])[0]
        if data is None:
            return None
        try:
            body = json.loads(entries.unframe(key, data, secret()))
            if body["key"] != full or not isinstance(body["config"], dict):
                raise entries.Refused("corrupt", "it is not this tuning key's entry")
            return body["config"]
        except entries.Refused as refused:
            self.link.refuse(f"the tuning of `{tuning_key}`", str(refused))
        except (ValueError, KeyError, TypeError):
            self.link.refuse(f"the tuning of `{tuning_key}`", "its body is not readable")
        return None

    def put(self, tuning_key: str, config: dict[str, Any]) -> None:
        if not self.link.settings.write:
            return
        full, key = self.key(tuning_key)
        body = json.dumps({"key": full, "config": config}, sort_keys=True).encode()
        self.link.set_many([(key, entries.frame(key, body, secret()))])


def remote_tuning() -> RemoteTuning | None:
    """The process's remote for tuning choices, or None when ``TRIBUILD_REMOTE_CACHE`` names
    none; one link per setting, kept for the process."""
    chosen = settings(None)
    if chosen is None or not (chosen.read or chosen.write):
        return None
    link = _LINKS.get(_identity(chosen))
    if link is None:
        link = _LINKS[_identity(chosen)] = Link(chosen)
    import triton

    return RemoteTuning(link, getattr(triton, "__version__", "unknown"))


def _identity(chosen: RemoteSettings) -> tuple[object, ...]:
    return (
        chosen.url,
        chosen.read,
        chosen.write,
        chosen.connect_timeout_ms,
        chosen.timeout_ms,
        chosen.prefix,
    )
