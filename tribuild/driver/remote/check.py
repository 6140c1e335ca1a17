"""``tribuild cache remote-check``: ping the remote, write, read back and verify a test
entry under ``<prefix>check:<random>``, then delete it."""

from __future__ import annotations

import os
import time

from tribuild.remote import (
    SECRET_VARIABLE,
    URL_VARIABLE,
    Link,
    RemoteSettings,
    entries,
    secret,
    settings,
)


def remote_check(configured: RemoteSettings | None) -> tuple[bool, list[str]]:
    """(whether every check passed, the report's lines)."""
    chosen = settings(configured)
    if chosen is None:
        return False, [
            f"no remote cache configured: set [cache] remote in Tribuild.toml or {URL_VARIABLE}"
        ]
    link = Link(chosen)
    lines = [f"remote cache {link.where} (key prefix `{chosen.prefix}`)"]
    try:
        begin = time.perf_counter()
        if not link.ping():
            return False, lines + [f"  ping: failed: {link.warning}"]
        lines.append(f"  ping: ok ({(time.perf_counter() - begin) * 1000:.1f} ms)")
        key = f"{chosen.prefix}check:{os.urandom(8).hex()}"
        mine = secret()
        data = entries.frame(key, b"tribuild remote-check", mine)
        if not link.set_many([(key, data)]):
            return False, lines + [f"  write: failed: {link.warning}"]
        lines.append(f"  write: ok ({key})")
        back = link.get_many([key])[0]
        link.delete([key])
        if back != data:
            why = link.warning or "other bytes came back"
            return False, lines + [f"  read: failed: {why}"]
        entries.unframe(key, back, mine)
        lines.append("  read: ok, the entry came back whole and passes its digest")
        if mine is None:
            lines.append(
                f"  signing: off ({SECRET_VARIABLE} is not set): entries carry a digest only, "
                "so readers trust everyone who can write to this server"
            )
        else:
            lines.append(f"  signing: ok (HMAC-SHA256 with {SECRET_VARIABLE})")
        if not chosen.read or not chosen.write:
            lines.append(f"  builds here: read {_on(chosen.read)}, write {_on(chosen.write)}")
        return True, lines
    except entries.Refused as refused:
        return False, lines + [f"  read: the entry came back refused: {refused}"]
    finally:
        link.close()


def _on(flag: bool) -> str:
    return "on" if flag else "off"
