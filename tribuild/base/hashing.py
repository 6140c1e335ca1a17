"""Hashing, loaded without ``hashlib``.

Terms:
- *digest*: a 128-bit BLAKE2b hex string. It names store files, checks the store's graph file
  and fingerprints inputs in the build manifest.
- *checksum*: a 64-bit BLAKE2b as a signed int. It checks one pack entry (entries are
  deduplicated by their bytes, not by this) and fingerprints inputs in merge payloads.

Why not ``hashlib``: importing it loads OpenSSL (about 4 ms per process, a tenth of a no-op
build), although its BLAKE2b is CPython's own ``_blake2`` whatever OpenSSL offers. SHA-256
(the kernels' names) is built in too. These are the functions ``hashlib`` returns, so every
digest is the same; a Python without these modules gets ``hashlib``'s.
"""

from __future__ import annotations

try:
    from _blake2 import blake2b
    from _sha256 import sha256
except ImportError:  # not CPython, or CPython >= 3.12, where SHA-256 lives in ``_sha2``
    from hashlib import blake2b, sha256

__all__ = ["blake2b", "checksum", "digest", "sha256"]


def digest(data: bytes) -> str:
    return blake2b(data, digest_size=16).hexdigest()


def checksum(data: bytes) -> int:
    return int.from_bytes(blake2b(data, digest_size=8).digest(), "little", signed=True)
