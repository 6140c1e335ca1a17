"""``<cache dir>/remote-stats.json``: what the last build that used a remote did with it,
for ``tribuild cache stats``. Read as the other cache files are (``read_regular``: a regular
file of bounded size, no link followed, no FIFO waited on); its texts are printed escaped."""

from __future__ import annotations

import json
import os

from tribuild.base.files import read_regular
from tribuild.base.printable import printable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

NAME = "remote-stats.json"
MAX_BYTES = 1 << 20  # a few hundred bytes written; a link to /dev/zero or a FIFO is no record


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
        data = json.loads(read_regular(os.path.join(cache_dir, NAME), MAX_BYTES))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def describe(cache_dir: str) -> str | None:
    """The remote part of ``cache stats``, or None when no build used a remote."""
    data = load(cache_dir)
    if data is None:
        return None
    try:
        server = printable(str(data["server"]))  # the URL may come from a Tribuild.toml
        lines = [
            f"remote {server} (last build): {data['hits']} hits, {data['misses']} "
            f"misses, {data['refused']} entries refused, {data['errors']} errors",
            f"  read {data['bytes_read'] / 1024:.1f} KiB, wrote {data['bytes_written'] / 1024:.1f}"
            f" KiB ({data['entries_written']} entries), {data['seconds']:.3f}s waiting on the "
            f"server, {data.get('import_seconds', 0.0):.3f}s importing its client",
        ]
    except (KeyError, TypeError, ValueError):
        return f"{os.path.join(cache_dir, NAME)}: unreadable"
    if data.get("warning"):  # the build's warning line, which says `warning:` itself
        warning = printable(str(data["warning"]))
        lines.append(f"  {warning if warning.startswith('warning: ') else 'warning: ' + warning}")
    return "\n".join(lines)
