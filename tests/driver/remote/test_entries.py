"""Entry framing and the checks a reader makes, without a server: each kind of damage is
refused with its reason; a target's diagnostics survive the trip."""

from __future__ import annotations

import json

import pytest

import tribuild.queries  # noqa: F401  (registers the value types with the codec)
from tribuild.diagnostics import Diagnostic, Label, Loc
from tribuild.driver.remote.build_cache import RemoteBuild
from tribuild.engine.store import codec
from tribuild.remote import RemoteSettings, entries

KEY = "tribuild:ac:" + "ab" * 32


def test_round_trip_signed_and_unsigned():
    assert entries.unframe(KEY, entries.frame(KEY, b"body", None), None) == b"body"
    signed = entries.frame(KEY, b"body", b"secret")
    assert entries.unframe(KEY, signed, b"secret") == b"body"
    assert entries.unframe(KEY, signed, None) == b"body"  # no secret: the digest only


@pytest.mark.parametrize(
    "damage,kind",
    [
        (lambda data: data[:-1], "corrupt"),
        (lambda data: data + b" ", "corrupt"),
        (lambda data: data.replace(b"body", b"bodY"), "corrupt"),
        (lambda data: b"", "corrupt"),
        (lambda data: data.partition(b"\n")[2], "corrupt"),
    ],
)
def test_damage_is_refused(damage, kind):
    with pytest.raises(entries.Refused) as refused:
        entries.unframe(KEY, damage(entries.frame(KEY, b"body", b"s")), b"s")
    assert refused.value.kind == kind


def test_signatures():
    with pytest.raises(entries.Refused) as refused:
        entries.unframe(KEY, entries.frame(KEY, b"body", None), b"s")
    assert refused.value.kind == "unsigned"
    with pytest.raises(entries.Refused) as refused:
        entries.unframe(KEY, entries.frame(KEY, b"body", b"other"), b"s")
    assert refused.value.kind == "bad signature"
    with pytest.raises(entries.Refused):  # a good entry under another key
        entries.unframe(KEY[:-1] + "c", entries.frame(KEY, b"body", b"s"), b"s")


def test_blob_check():
    data = b"print('hi')\n"
    assert entries.check_blob(entries.content_digest(data), data) == data
    with pytest.raises(entries.Refused):
        entries.check_blob(entries.content_digest(data), data + b"#")


def _body(files, diagnostics=()) -> bytes:
    return json.dumps(
        {"version": 1, "files": files, "diagnostics": codec.encode(tuple(diagnostics)).decode()}
    ).encode()


def test_a_body_is_checked_against_its_target():
    remote = RemoteBuild(RemoteSettings("redis://127.0.0.1:1/0"), "salt", None)
    remote.keys["net"] = "ab" * 32
    digest = "cd" * 32
    warning = Diagnostic(
        "W0001", "a warning", Label(Loc("models/net.tri", "Net", (0, 2))), severity="warning"
    )
    good = _body([["net.py", digest], ["kernels/k_1.py", digest]], [warning])
    assert remote._parse("net", entries.frame(KEY, good, None)) == (
        [("net.py", digest), ("kernels/k_1.py", digest)],
        (warning,),
    )
    for files in (
        [["kernels/k_1.py", digest]],  # no module
        [["net.py", digest], ["../evil.py", digest]],  # outside the output folder
        [["net.py", digest], ["kernels/../../x.py", digest]],
        [["other.py", digest], ["net.py", digest]],  # another target's module
        [["net.py", "not a digest"]],
        [["net.py", digest], ["net.py", digest]],
    ):
        assert remote._parse("net", entries.frame(KEY, _body(files), None)) is None
    assert remote.link.stats.refused == 6
