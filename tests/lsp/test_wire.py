"""The language server's wire, driven byte by byte over stdio (``tests/lsp/raw.py``): every
request gets a response, a malformed header or body costs one logged line and that message
alone, and ``shutdown`` is answered whatever came before it.

Each case came from an attack on the server (issue 38): invalid params got no reply, a header
without a valid ``Content-Length`` silenced the server for good, a client that never
answered ``client/registerCapability`` got -32603 for ``shutdown``, and malformed bodies
logged tracebacks.
"""

from __future__ import annotations

import json

import pytest

from tests.lsp.raw import RawServer


@pytest.fixture
def server(zoo):
    raw = RawServer(zoo)
    yield raw
    raw.close()


def _symbols(server: RawServer, id: str) -> dict:
    uri = (server.root / "models" / "mlp.tri").as_uri()
    server.request(id, "textDocument/documentSymbol", {"textDocument": {"uri": uri}})
    return server.reply_to(id)


def _no_tracebacks(server: RawServer) -> None:
    assert b"Traceback" not in server.stderr, server.stderr.decode()
    assert not [line for line in server.logged if "Traceback" in line], server.logged


def test_requests_with_invalid_params_get_32602(server, zoo):
    server.initialize()
    uri = (zoo / "models" / "mlp.tri").as_uri()
    cases = {
        "string": "abc",
        "null": None,
        "negative": {"textDocument": {"uri": uri}, "position": {"line": 0, "character": -5}},
        "no position": {"textDocument": {"uri": uri}},
    }
    for id, params in cases.items():
        message = {"jsonrpc": "2.0", "id": id, "method": "textDocument/hover", "params": params}
        server.send(message)
        reply = server.reply_to(id)
        assert reply["error"]["code"] == -32602, reply
        assert "textDocument/hover" in reply["error"]["message"]
    assert "Position.character" in server.logged[2] and "-5" in server.logged[2]
    assert [len(line.splitlines()) for line in server.logged] == [1] * len(cases)
    assert "result" in _symbols(server, "after")
    assert server.shutdown() == 0
    _no_tracebacks(server)


@pytest.mark.parametrize(
    "header",
    [
        b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n",
        b"Content-Length: abc\r\n",
        b"Content-Length: -5\r\n",
        b"Content-Length: 99999999999999\r\n",
        b"Content-Length 12\r\n",
    ],
)
def test_a_header_without_a_valid_content_length_costs_that_message_alone(server, header):
    server.initialize()
    body = json.dumps({"jsonrpc": "2.0", "id": "lost", "method": "shutdown"}).encode()
    server.send_bytes(header + b"\r\n" + body)
    assert "result" in _symbols(server, "next")  # read from the header after the lost body
    skipped = [line for line in server.logged if "without a valid Content-Length" in line]
    assert len(skipped) == 1 and "skipped to the next message" in skipped[0]
    assert not [m for m in server.seen if m.get("id") == "lost"]
    assert server.shutdown() == 0
    _no_tracebacks(server)


def test_garbage_between_messages_and_a_cut_stream(server):
    server.initialize()
    server.send_bytes(b"\x1b[2J\x00garbage without a line break" * 1000)
    assert "result" in _symbols(server, "after garbage")
    server.send_bytes(b"Content-Length: 500\r\n\r\n{\"jsonrpc\"")
    server.proc.stdin.close()  # the body never comes: the server ends, it does not hang
    assert server.wait() == 1
    assert b"closed the stream without `exit`" in server.stderr
    _no_tracebacks(server)


def test_malformed_bodies_log_one_line_and_get_the_json_rpc_error(server):
    server.initialize()
    cases = [
        (b"{not json", None, -32700, "not JSON"),
        (b"[" * 100_000, None, -32700, "not JSON"),  # nesting deeper than the parser goes
        ([{"jsonrpc": "2.0", "id": 5, "method": "shutdown"}], None, -32600, "a batch"),
        (42, None, -32600, "a JSON int"),
        ({"jsonrpc": "2.0", "id": 6}, 6, -32600, "no method, result or error"),
        ({"jsonrpc": "2.0"}, None, -32600, "neither a method nor an id"),
        ({"id": 7, "method": "textDocument/hover"}, 7, -32600, '"jsonrpc": "2.0"'),
        ({"jsonrpc": "2.0", "id": 8, "method": 3}, 8, -32600, "method is not a string"),
        ({"jsonrpc": "2.0", "id": [1], "method": "shutdown"}, None, -32600, "neither a string"),
    ]
    for body, id, code, why in cases:
        before = len(server.logged)
        server.send(body)
        error = server.until(lambda m: "error" in m and "method" not in m)
        assert error["id"] == id and error["error"]["code"] == code, (body, error)
        assert len(server.logged) == before + 1, server.logged[before:]  # logged, then answered
        assert why in server.logged[-1] and "\n" not in server.logged[-1]
    # a notification whose params do not fit: one line, no reply (notifications get none)
    server.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": "x"})
    line = server.until(lambda m: m.get("method") == "window/logMessage")
    assert "invalid params for notification `textDocument/didOpen`" in line["params"]["message"]
    assert "result" in _symbols(server, "still here")
    assert server.shutdown() == 0
    _no_tracebacks(server)


def test_a_client_that_never_answers_register_capability_still_shuts_down(server):
    """The server asks to watch files when the client can do it dynamically; this client
    never answers. `shutdown` cancels the pending request and answers null."""
    server.initialize(watch=True)
    asked = server.until(lambda m: m.get("method") == "client/registerCapability")
    assert asked["params"]["registrations"][0]["id"] == "tribuild-files"
    assert server.shutdown() == 0
    _no_tracebacks(server)


def test_exit_without_shutdown_is_exit_code_1(server):
    server.initialize()
    server.notify("exit")
    assert server.wait() == 1


def test_pygls_own_reader_still_reads_through_the_checked_protocol():
    """pygls's ``start_io`` (the in-process benchmark serves with it) hands every nested object
    of a body to ``structure_message`` first: those must come back as they are."""
    from tribuild.lsp.server import TriServer

    protocol = TriServer(0.02).ls.protocol
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "method": "textDocument/didOpen",
            "params": {
                "textDocument": {"uri": "file:///x.tri", "languageId": "tri", "version": 1}
                | {"text": "layer A {}"}
            },
        }
    )
    message = json.loads(body, object_hook=protocol.structure_message)
    assert message.method == "textDocument/didOpen"
    assert message.params.text_document.uri == "file:///x.tri"
