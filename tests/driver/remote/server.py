"""A real ``redis-server`` (Debian's package) on a free loopback port, with its own folder
and configuration file, for the remote cache's tests and benchmark. Never a system service,
never a mock."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

REDIS_SERVER = shutil.which("redis-server")
SKIP_REASON = "redis-server is not on PATH (`apt-get install redis-server`; .ci/run does it)"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """One ``redis-server`` process: ``start``, ``stop``, ``kill`` (SIGKILL), ``pause``
    (SIGSTOP) and ``resume``; ``url`` for tribuild, ``client()`` for the test."""

    def __init__(self, folder: Path, extra: str = "") -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.extra = extra
        self.port = 0
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, port: int | None = None) -> RedisServer:
        for _ in range(5):  # another process may take a free port before the server binds it
            self.port = port or free_port()
            config = self.folder / "redis.conf"
            config.write_text(
                f"port {self.port}\nbind 127.0.0.1\ndir {self.folder}\nsave \"\"\n"
                f"appendonly no\ndaemonize no\nlogfile {self.folder / 'redis.log'}\n{self.extra}\n"
            )
            self.process = subprocess.Popen([REDIS_SERVER, str(config)], cwd=self.folder)
            if self._wait_ready():
                return self
            self.stop()
            if port:
                break
        raise RuntimeError(f"redis-server did not start; see {self.folder / 'redis.log'}")

    def _wait_ready(self, seconds: float = 10.0) -> bool:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.process.poll() is not None:
                return False
            try:
                if self.client().ping():
                    return True
            except Exception:  # noqa: BLE001 (not listening yet)
                time.sleep(0.02)
        return False

    def client(self):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def pause(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.resume()
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.process = None
