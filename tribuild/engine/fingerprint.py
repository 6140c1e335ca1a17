"""Fingerprints of source trees, for store salts.

Terms:
- *package hash*: a digest of every ``.py`` file under a folder, by relative path and bytes,
  so any edit, addition, removal or rename of a source file changes it.
"""

from __future__ import annotations

import os

from tribuild.base.files import read_bytes
from tribuild.base.hashing import blake2b


def package_hash(pkg_dir: str) -> str:
    digest = blake2b(digest_size=16)
    for rel in sorted(_python_files(pkg_dir), key=lambda rel: rel.split("/")):
        data = read_bytes(os.path.join(pkg_dir, rel))
        digest.update(f"{rel}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def _python_files(root: str) -> list[str]:
    """The ``.py`` files under ``root`` (not under linked folders), as ``/``-separated paths
    relative to it."""
    out = []
    for folder, _, names in os.walk(root):
        rel = os.path.relpath(folder, root).replace(os.sep, "/")
        out += [name if rel == "." else f"{rel}/{name}" for name in names if name.endswith(".py")]
    return out
