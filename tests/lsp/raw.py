"""A raw client for the language server's wire: `tribuild lsp` as a subprocess, bytes written to
its stdin as they are (a malformed header, a body that is no JSON), and what it writes back
read from its stdout and stderr by two threads.

Terms:
- *message*: one body the server framed on stdout, parsed as JSON.
- *logged*: the server's ``window/logMessage`` texts, in order; *stderr*: its standard error.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path

from tests.lsp.conftest import SERVER, TIMEOUT


class RawServer:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.proc = subprocess.Popen(
            SERVER,
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.messages: queue.Queue = queue.Queue()
        self.logged: list[str] = []
        self.stderr = b""
        self.seen: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._errors, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    self.messages.put(None)
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            assert length is not None
            self.messages.put(json.loads(out.read(length)))

    def _errors(self) -> None:
        err = self.proc.stderr
        assert err is not None
        for line in iter(err.readline, b""):
            self.stderr += line

    def send_bytes(self, data: bytes) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        stdin.write(data)
        stdin.flush()

    def send(self, message: dict | list | str | bytes) -> None:
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.send_bytes(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    def request(self, id: object, method: str, params: object = None) -> None:
        message: dict = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def notify(self, method: str, params: object = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params or {}})

    def next(self, timeout: float = TIMEOUT) -> dict | None:
        """The next message (answering the server's own requests as a client would not:
        they are kept in ``seen`` and left unanswered); None when the stream ended."""
        message = self.messages.get(timeout=timeout)
        if message is not None:
            self.seen.append(message)
            if message.get("method") == "window/logMessage":
                self.logged.append(message["params"]["message"])
        return message

    def reply_to(self, id: object, timeout: float = TIMEOUT) -> dict:
        """The response to request ``id`` (other messages are kept in ``seen``)."""
        deadline = time.monotonic() + timeout
        while True:
            message = self.next(max(deadline - time.monotonic(), 0.01))
            assert message is not None, f"the stream ended before the reply to {id!r}"
            if message.get("id") == id and "method" not in message:
                return message

    def until(self, predicate, timeout: float = TIMEOUT) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            message = self.next(max(deadline - time.monotonic(), 0.01))
            assert message is not None, "the stream ended"
            if predicate(message):
                return message

    def initialize(self, watch: bool = False) -> dict:
        caps: dict = {}
        if watch:
            caps = {"workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}}}
        self.request(0, "initialize", {"rootUri": self.root.as_uri(), "capabilities": caps})
        reply = self.reply_to(0)
        self.notify("initialized")
        return reply

    def shutdown(self) -> int:
        """``shutdown`` then ``exit``: the exit code (the shutdown reply must come)."""
        self.request("bye", "shutdown")
        reply = self.reply_to("bye")
        assert reply.get("result", "missing") is None and "error" not in reply, reply
        self.notify("exit")
        return self.wait()

    def wait(self, timeout: float = TIMEOUT) -> int:
        code = self.proc.wait(timeout=timeout)
        time.sleep(0.05)  # the reading threads drain what is left
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
