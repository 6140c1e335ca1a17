"""Remote cache entries: their keys, their framing, and the checks a reader makes.

An entry's bytes are ``MAGIC digest signature\\n body``:
- *digest*: SHA-256 of the entry's key, a NUL byte and the body, in hex. It catches a
  truncated or damaged entry, and one copied under another key.
- *signature*: HMAC-SHA256 of the same bytes with the shared secret
  (``TRIBUILD_CACHE_SECRET``) in hex, or ``-`` for an entry written without one. A reader
  with the secret refuses unsigned and badly signed entries; a reader without it checks
  the digest only, and so trusts everyone who can write to the server.
- *blob*: a file's bytes stored under ``<prefix>cas:<sha256 of the bytes>``, unframed: the
  action entry that names it is digested (and signed), and a blob whose bytes do not hash
  to its name is refused.

Outputs are Python code that gets imported, so nothing is taken from the remote unless it
passes these checks.
"""

from __future__ import annotations

import hmac

from tribuild.base.hashing import sha256

MAGIC = b"tribuild-entry/1"
UNSIGNED = b"-"


class Refused(ValueError):
    """An entry that fails its checks; the message says which (``kind``: ``corrupt``,
    ``unsigned`` or ``bad signature``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def action_key(prefix: str, digest: str) -> str:
    return f"{prefix}ac:{digest}"


def blob_key(prefix: str, digest: str) -> str:
    return f"{prefix}cas:{digest}"


def imports_key(prefix: str, digest: str) -> str:
    return f"{prefix}imp:{digest}"


def autotune_key(prefix: str, digest: str) -> str:
    return f"{prefix}autotune:{digest}"


def cpu_kernel_key(prefix: str, name: str) -> str:
    """The key of the CPU kernels' library ``name`` (its file name: ISA and key)."""
    return f"{prefix}cpukernels:{name}"


def content_digest(data: bytes) -> str:
    """The SHA-256 of ``data`` in hex: a blob's name."""
    name: str = sha256(data).hexdigest()
    return name


def frame(key: str, body: bytes, secret: bytes | None) -> bytes:
    """The stored bytes of an entry holding ``body`` under ``key``."""
    signed = key.encode() + b"\0" + body
    mac = hmac.new(secret, signed, "sha256").hexdigest().encode() if secret else UNSIGNED
    return b" ".join((MAGIC, sha256(signed).hexdigest().encode(), mac)) + b"\n" + body


def unframe(key: str, data: bytes, secret: bytes | None) -> bytes:
    """The body of the entry ``data`` found under ``key``; raises Refused."""
    head, newline, body = data.partition(b"\n")
    parts = head.split(b" ")
    if not newline or len(parts) != 3 or parts[0] != MAGIC:
        raise Refused("corrupt", "not a tribuild cache entry (or one cut short)")
    signed = key.encode() + b"\0" + body
    if not hmac.compare_digest(parts[1], sha256(signed).hexdigest().encode()):
        raise Refused(
            "corrupt", "its digest does not match its bytes (damaged, cut short, or moved)"
        )
    if secret is not None:
        if parts[2] == UNSIGNED:
            raise Refused("unsigned", "it is not signed, and TRIBUILD_CACHE_SECRET is set")
        expected = hmac.new(secret, signed, "sha256").hexdigest().encode()
        if not hmac.compare_digest(parts[2], expected):
            raise Refused("bad signature", "its signature does not match TRIBUILD_CACHE_SECRET")
    return body


def check_blob(digest: str, data: bytes) -> bytes:
    """``data`` if its SHA-256 is ``digest``; raises Refused."""
    if content_digest(data) != digest:
        raise Refused("corrupt", f"blob {digest[:12]} does not hash to its name")
    return data
