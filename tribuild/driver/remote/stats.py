"""``<cache dir>/remote-stats.json``: what the last build that used a remote did with it,
for ``tribuild cache stats``."""

from __future__ import annotations

import json
import os

from tribuild.base.files import read_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

NAME = "remote-stats.json"


def save(cache_dir: str, where: str, stats: dict[str, int | float], warning: str | None) -> None:
    """Record the last build's ``stats`` (``link.Stats.as_dict``); a cache folder that cannot
    be written only loses them."""
    from tribuild.engine import write_atomic

    data = {"server": where, "warning": warning, **stats}
    try:
        os.makedirs(cache_dir, exist_ok=True)
        write_atomic(os.path.join(cache_dir, NAME), json.dumps(data, indent=1).encode() + b"\n")
    except OSError:
        pass


def load(cache_dir: str) -> dict[str, Any] | None:
    try:
        data = json.loads(read_text(os.path.join(cache_dir, NAME)))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def describe(cache_dir: str) -> str | None:
    """The remote part of ``cache stats``, or None when no build used a remote."""
    data = load(cache_dir)
    if data is None:
        return None
    try:
        lines = [
            f"remote {data['server']} (last build): {data['hits']} hits, {data['misses']} "
            f"misses, {data['refused']} entries refused, {data['errors']} errors",
            f"  read {data['bytes_read'] / 1024:.1f} KiB, wrote {data['bytes_written'] / 1024:.1f}"
            f" KiB ({data['entries_written']} entries), {data['seconds']:.3f}s waiting on the "
            f"server, {data.get('import_seconds', 0.0):.3f}s importing its client",
        ]
    except (KeyError, TypeError, ValueError):
        return f"{os.path.join(cache_dir, NAME)}: unreadable"
    if data.get("warning"):  # the build's warning line, which says `warning:` itself
        warning = str(data["warning"])
        lines.append(f"  {warning if warning.startswith('warning: ') else 'warning: ' + warning}")
    return "\n".join(lines)
