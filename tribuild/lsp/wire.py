"""The wire: framed JSON-RPC messages read from the client, checked before pygls handles them.

pygls's own loop went silent on a header without a valid ``Content-Length`` (every later
message was read as part of a header line, even ``shutdown``), sent no reply to a request
whose params it could not read (the client waited forever) and logged a traceback for a body
that is no JSON, an array or a message without ``method``. Here:

Terms:
- *frame*: header lines, an empty line, then ``Content-Length`` bytes of body. ``Frames``
  reads them from a byte stream with a buffer of its own (no line need end where a body does).
- *resync*: after a header block without a valid ``Content-Length`` (missing, not a number,
  more than ``MAX_BODY``, a line that is no ``Name: value``, no empty line within
  ``MAX_HEADER`` bytes), the bytes up to the next ``Content-Length:`` header are dropped and
  reading goes on from it; one line says so.
- *checked message*: a body that is a JSON object with ``"jsonrpc": "2.0"`` and either a
  string ``method`` (a request when it has an ``id``, else a notification) or an ``id`` and
  a ``result`` or ``error`` (a response to the server's own request). Anything else gets one
  logged line and, where the JSON-RPC rules ask for one, an error response: -32700 for a
  body that is not JSON, -32600 for any other malformed message (``id`` null where it has
  none), -32602 for a request whose params do not fit its method's type.
- *one line*: what the server logs of a malformed message goes to the client
  (``window/logMessage``) and to standard error, one line each, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
from typing import Any, BinaryIO

from cattrs.errors import BaseValidationError
from lsprotocol import types as lsp
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcParseError,
)
from pygls.io_ import StdoutWriter
from pygls.protocol import LanguageServerProtocol

MAX_BODY = 64 << 20  # a 6 MB document is over the source limit (4 MiB), yet must arrive
_HEADER = re.compile(rb"Content-Length:[ \t]*", re.IGNORECASE)
_LENGTH = re.compile(rb"(\d{1,12})[ \t]*")
_FIELD = re.compile(rb"[!#-'*+.0-9A-Z^-z|~-]+:[ \t]*[\x20-\x7e\t]*")  # RFC 7230's token: value
_END = re.compile(rb"\r?\n\r?\n")
MAX_HEADER = 8192  # bytes of one header block (LSP defines two short headers)
_SHOWN = 80  # characters of a malformed message shown in its log line


class Frames:
    """Bodies of framed messages read from ``stream`` (a binary stream with ``read1``)."""

    def __init__(self, stream: BinaryIO, problem) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.problem = problem  # problem(text): one line about the stream

    def _fill(self) -> bool:
        chunk = self.stream.read1(1 << 16)  # type: ignore[attr-defined]
        self.buffer += chunk
        return bool(chunk)

    def next(self) -> bytes | None:
        """The next body; None when the stream ends."""
        while True:
            while self.buffer[:1] in (b"\r", b"\n"):  # line breaks between messages
                del self.buffer[:1]
            end = _END.search(self.buffer, 0, MAX_HEADER)
            if end is None and len(self.buffer) <= MAX_HEADER:
                if not self._fill():
                    return None
                continue
            length = _length(bytes(self.buffer[: end.start()])) if end else None
            if end is not None and length is not None:
                while len(self.buffer) < end.end() + length:
                    if not self._fill():
                        return None
                body = bytes(self.buffer[end.end() : end.end() + length])
                del self.buffer[: end.end() + length]
                return body
            shown = _shown(bytes(self.buffer[: end.start() if end else _SHOWN]))
            self.problem(
                f"a message header without a valid Content-Length ({shown}): skipped to the "
                "next message"
            )
            if not self._resync():
                return None

    def _resync(self) -> bool:
        """Drop what comes before the next ``Content-Length:`` header after the buffer's
        first byte (the start of the header refused). False when the stream ends first."""
        start = 1
        while True:
            found = _HEADER.search(self.buffer, start)
            if found:
                del self.buffer[: found.start()]
                return True
            keep = len(b"content-length:") - 1  # a header cut between two reads
            start = max(len(self.buffer) - keep, 1)
            if not self._fill():
                return False


def _length(block: bytes) -> int | None:
    """The body length a header block gives: its one ``Content-Length`` (digits, at most
    ``MAX_BODY``), every line a ``Name: value`` header; None for any other block."""
    length = None
    for line in block.split(b"\n"):
        line = line.removesuffix(b"\r")
        if not _FIELD.fullmatch(line):
            return None
        if _HEADER.match(line):
            value = _LENGTH.fullmatch(line, _HEADER.match(line).end())  # type: ignore[union-attr]
            if value is None or length is not None or int(value.group(1)) > MAX_BODY:
                return None
            length = int(value.group(1))
    return length


def _shown(data: bytes | str) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    text = text.encode("unicode_escape").decode("ascii")  # one line, nothing for a terminal
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


class CheckedProtocol(LanguageServerProtocol):
    """pygls's protocol, fed checked messages (``deliver``), less a leak and a race.

    The leak: pygls 2.1 keeps, in ``_request_futures``, the future of every notification
    whose built-in handler is a generator (``didOpen``, ``didChange``, ``didClose``...) and
    never removes it: one future per keystroke (``benchmarks/bench_lsp.py`` measured 4 KB per
    edit). Here a notification's future goes once it is done. The race: ``shutdown`` cancels
    every pending future while iterating over that dict, and a cancelled future's callback
    ran here at once: a client that never answered ``client/registerCapability`` got
    "dictionary changed size during iteration" in reply to ``shutdown``. So the dict is
    replaced, never changed while someone may iterate over it."""

    def _check_handler_result(self, future) -> None:
        super()._check_handler_result(future)
        if any(held is future for held in self._request_futures.values()):
            self._request_futures = {
                key: held for key, held in self._request_futures.items() if held is not future
            }

    def problem(self, text: str) -> None:
        """One line about a malformed message: to the client's log and to standard error."""
        line = f"tribuild lsp: {text}"
        print(line, file=sys.stderr, flush=True)
        if self.writer is not None:
            self.notify(
                lsp.WINDOW_LOG_MESSAGE,
                lsp.LogMessageParams(type=lsp.MessageType.Warning, message=line),
            )

    def refuse(self, msg_id: Any, error: JsonRpcException) -> None:
        """An error response; a plain dict, so that an unknown id is written ``null`` (pygls
        leaves a None field out, and JSON-RPC asks for the member)."""
        body = {"code": error.code, "message": error.message}
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": body})

    def deliver(self, body: bytes) -> None:
        """Check ``body`` and hand the message to pygls, or log and answer what is wrong."""
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as err:
            self.problem(f"a message that is not JSON ({err}): {_shown(body)}")
            self.refuse(None, JsonRpcParseError())
            return
        why = _malformed(data)
        if why is not None:
            msg_id = data.get("id") if isinstance(data, dict) else None
            msg_id = msg_id if _valid_id(msg_id) else None
            self.problem(f"{why}: {_shown(body)}")
            self.refuse(msg_id, JsonRpcInvalidRequest(f"Invalid Request: {why}"))
            return
        method = data.get("method")
        try:
            message = self.structure_message(data)
        except Exception as err:
            what = _first_error(err)
            if method is None:
                self.problem(f"a response the server cannot read ({what}): {_shown(body)}")
            elif "id" in data:
                self.problem(f"invalid params for request `{method}` ({what})")
                self.refuse(
                    data["id"], JsonRpcInvalidParams(f"Invalid params for {method}: {what}")
                )
            else:
                self.problem(f"invalid params for notification `{method}` ({what})")
            return
        self.handle_message(message)

    def structure_message(self, data: dict[str, Any]):
        """pygls's, without its traceback on the log: raises what cattrs raised."""
        if "jsonrpc" not in data:
            # pygls's own reader (``start_io``, which the in-process benchmark runs) passes this
            # as json's object_hook, so every nested object comes here first: leave those as
            # they are; a top-level message without it never gets here (``_malformed``)
            return data
        if "method" in data:
            kind = self.get_message_type(data["method"])
            if "id" in data:
                kind = kind or _plain("JsonRPCRequestMessage")
            else:
                kind = kind or _plain("JsonRPCNotification")
        elif "error" in data:
            kind = lsp.ResponseErrorMessage
        else:
            kind = self._result_types.pop(data["id"], None) or _plain("JsonRPCResponseMessage")
        return self._converter.structure(data, kind)


def _plain(name: str):
    from pygls.protocol import json_rpc

    return getattr(json_rpc, name)


def _malformed(data: Any) -> str | None:
    """What makes ``data`` no JSON-RPC message the server takes, or None."""
    if isinstance(data, list):
        return "a batch (a JSON array), which the language server protocol does not use"
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    if data.get("jsonrpc") != "2.0":
        return 'a message without "jsonrpc": "2.0"'
    if "id" in data and not _valid_id(data["id"]):
        return "a message whose id is neither a string nor an integer"
    if "method" in data:
        if not isinstance(data["method"], str):
            return "a message whose method is not a string"
        return None
    if "id" not in data:
        return "a message with neither a method nor an id"
    if "result" not in data and "error" not in data:
        return "a message with an id but no method, result or error"
    return None


def _first_error(err: BaseException) -> str:
    """A one-line account of why params did not fit (cattrs nests its errors)."""
    while isinstance(err, BaseValidationError) and err.exceptions:
        err = err.exceptions[0]
    notes = getattr(err, "__notes__", None) or []
    where = f" {notes[-1]}" if notes else ""
    return _shown(f"{type(err).__name__}: {err}{where}")


def serve(ls, stdin: BinaryIO, stdout: BinaryIO) -> int:
    """Serve ``ls`` (a pygls LanguageServer with a ``CheckedProtocol``) until the client says
    exit or the stream ends: pygls's ``start_io``, with ``Frames`` and ``deliver`` reading.
    Returns the exit code (0 after ``shutdown``, 1 without: the protocol's rule)."""
    protocol: CheckedProtocol = ls.protocol
    ls._stop_event = stop = threading.Event()
    protocol.set_writer(StdoutWriter(stdout))
    frames = Frames(stdin, protocol.problem)

    async def loop() -> None:
        running = asyncio.get_running_loop()
        while not stop.is_set():
            body = await running.run_in_executor(ls.thread_pool, frames.next)
            if body is None:  # the client's end is closed: say so where it can still be read
                print("tribuild lsp: the client closed the stream without `exit`", file=sys.stderr)
                return
            protocol.deliver(body)

    try:
        asyncio.run(loop())
        return 0 if protocol._shutdown else 1
    except SystemExit as done:  # `exit`: pygls exits with the protocol's code
        return done.code if isinstance(done.code, int) else 1
    except BrokenPipeError:
        print("tribuild lsp: the client closed its end: stopping", file=sys.stderr)
        return 1
    finally:
        ls.shutdown()
