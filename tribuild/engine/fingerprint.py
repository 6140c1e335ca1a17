"""Fingerprints of source trees, for store salts.

Terms:
- *package hash*: a digest of every ``.py`` file under a folder, by relative path and bytes,
  so any edit, addition, removal or rename of a source file changes it.
"""
from __future__ import annotations

from pathlib import Path

from ..hashing import blake2b


def package_hash(pkg_dir: str | Path) -> str:
    root = Path(pkg_dir)
    digest = blake2b(digest_size=16)
    for path in sorted(root.rglob("*.py")):
        data = path.read_bytes()
        digest.update(f"{path.relative_to(root).as_posix()}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()
