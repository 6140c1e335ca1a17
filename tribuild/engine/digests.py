"""The store's digests.

Terms:
- *digest*: a 128-bit BLAKE2b hex string; names files and checks the graph file.
- *checksum*: a 64-bit BLAKE2b as a signed int; checks one pack entry (entries are
  deduplicated by their bytes, not by this) and fingerprints inputs in merge payloads.
"""
from __future__ import annotations

import hashlib


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def checksum(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little", signed=True)
