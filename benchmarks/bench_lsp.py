"""Latency and memory of `tribuild lsp`, measured through the protocol.

The server runs in this process (``TriServer`` on two pipes, in a thread of its own, exactly
as `tribuild lsp` serves stdio); this file is its client: it frames JSON-RPC messages onto
one pipe and reads the other in a reader thread. Every figure is a round trip through the
protocol: from just before a message is written to the arrival of its answer.

Cases, each on a copy of the zoo's models:
- *diagnostics after a body edit*: `resnet_blocks.tri` open; a one-character edit of the
  body of ``ResStage`` (the loop over a stage's blocks, which every ResNet instantiates four
  times: 8 blocks in all for ResNet-18, 50 for ResNet-152) toggles an error on and off
  (``b(x)`` <-> ``bb(x)``, so every edit changes what is published), from the ``didChange``
  to the ``publishDiagnostics`` of the file; reported beyond the debounce, for a project
  whose one target is ResNet-18 and one whose one target is ResNet-152 (goal: <= 15 ms
  beyond the debounce, and flat in model size);
- *re-check*: the same edit, through the queries the server asks, in this process without
  the protocol: the part of the latency that may grow with the model;
- *hover*, *definition* (goal <= 5 ms) and *completion* (goal <= 10 ms) in `resnet.tri`, on
  the whole zoo's Tribuild.toml;
- *start*: a warm persistent cache (``tribuild check`` ran), then a new server: from the
  ``initialize`` request to the diagnostics of a file holding one error (goal <= 0.5 s); also
  as a subprocess (`python -m tribuild lsp`, imports included), for reference;
- *memory*: N scripted edits (default 10,000; each waits for its diagnostics), the
  process's resident size after the first 100 and at the end (goal: within 20%).

Writes benchmarks/results/lsp.json and lsp.md. The machine is shared: figures are medians,
the load average before and after is recorded.

    python benchmarks/bench_lsp.py [--repeats N] [--edits N] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
BLOCKS = "models/blocks/resnet_blocks.tri"
DEBOUNCE_MS = 50
EDIT = ("            x = b(x)", "            x = bb(x)")  # ResStage's forward, in every ResNet


def zoo(base: Path, name: str, targets: list[str] | None) -> Path:
    """A copy of the zoo's models with the zoo's Tribuild.toml (``targets`` None) or one
    holding only ``targets``."""
    dest = base / name
    shutil.copytree(REPO / "models", dest / "models")
    if targets is None:
        shutil.copy(REPO / "Tribuild.toml", dest / "Tribuild.toml")
        return dest
    table = tomllib.loads((REPO / "Tribuild.toml").read_text())["targets"]
    text = '[project]\nname = "bench"\nsources = ["models"]\nout = "out"\n'
    for target in targets:
        entry = table[target]
        args = ", ".join(f"{k} = {json.dumps(v)}" for k, v in entry["args"].items())
        text += (
            f'\n[targets.{target}]\nentry = "{entry["entry"]}"\nargs = {{ {args} }}\n'
            f'input = {json.dumps(entry["input"])}\n'
        )
    (dest / "Tribuild.toml").write_text(text)
    return dest


class Client:
    """A JSON-RPC client of a server on two pipes: the in-process ``TriServer`` or a
    subprocess."""

    def __init__(
        self, root: Path, subprocess_server: bool = False, debounce_ms: float = DEBOUNCE_MS
    ) -> None:
        self.root = root
        self.responses: dict[int, queue.Queue] = {}
        self.published: queue.Queue = queue.Queue()
        self.next_id = 0
        self.lock = threading.Lock()
        if subprocess_server:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tribuild", "lsp", "--debounce", str(debounce_ms)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            self.out, self.inp = self.proc.stdin, self.proc.stdout
        else:
            from tribuild.lsp.server import TriServer

            self.proc = None
            to_server, from_client = os.pipe()
            to_client, from_server = os.pipe()
            server = TriServer(debounce_ms / 1e3)
            self.server = server
            threading.Thread(
                target=server.ls.start_io,
                args=(os.fdopen(to_server, "rb"), os.fdopen(from_server, "wb")),
                daemon=True,
            ).start()
            self.out = os.fdopen(from_client, "wb")
            self.inp = os.fdopen(to_client, "rb")
        threading.Thread(target=self._read, daemon=True).start()

    def _send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        with self.lock:
            self.out.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            self.out.flush()

    def _read(self) -> None:
        while True:
            length = 0
            while (line := self.inp.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line:
                return
            message = json.loads(self.inp.read(length))
            at = time.perf_counter()
            if "method" in message and "id" in message:  # a request of the server's
                self._send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            elif message.get("method") == "textDocument/publishDiagnostics":
                self.published.put((at, message["params"]))
            elif "id" in message:
                self.responses[message["id"]].put((at, message))

    def request(self, method: str, params: dict) -> tuple[float, dict]:
        """The answer, and the seconds from sending to its arrival."""
        self.next_id += 1
        box: queue.Queue = queue.Queue()
        self.responses[self.next_id] = box
        start = time.perf_counter()
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        at, message = box.get(timeout=120)
        if "error" in message:
            raise RuntimeError(message["error"])
        return at - start, message.get("result")

    def notify(self, method: str, params: dict) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def initialize(self) -> float:
        took, _ = self.request(
            "initialize",
            {"processId": os.getpid(), "rootUri": self.root.as_uri(), "capabilities": {}},
        )
        self.notify("initialized", {})
        return took

    def uri(self, rel: str) -> str:
        return (self.root / rel).as_uri()

    def open(self, rel: str, text: str | None = None) -> str:
        uri = self.uri(rel)
        text = (self.root / rel).read_text() if text is None else text
        self.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "tri", "version": 1, "text": text}},
        )
        return uri

    def change(self, uri: str, text: str, version: int) -> None:
        self.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
        )

    def diagnostics(self, uri: str, version: int | None = None) -> tuple[float, list]:
        """The next publication for ``uri`` (of ``version``, if given): when, and what."""
        while True:
            at, params = self.published.get(timeout=120)
            if params["uri"] == uri and (version is None or params.get("version") == version):
                return at, params["diagnostics"]

    def close(self) -> None:
        try:
            self.request("shutdown", None)
            self.notify("exit", None)
        except (OSError, RuntimeError):
            pass
        if self.proc is not None:
            self.proc.wait(60)


def position(text: str, needle: str, delta: int = 0) -> dict:
    at = text.index(needle) + delta
    return {"line": text.count("\n", 0, at), "character": at - (text.rfind("\n", 0, at) + 1)}


def edit_latency(base: Path, target: str, repeats: int) -> dict:
    """ms from a didChange to the file's new diagnostics, beyond the debounce."""
    root = zoo(base, f"edit-{target}", [target])
    client = Client(root)
    client.initialize()
    text = (root / BLOCKS).read_text()
    uri = client.open(BLOCKS)
    broken = text.replace(*EDIT, 1)
    runs = []
    version = 1
    for i in range(repeats * 2 + 2):
        version += 1
        start = time.perf_counter()
        client.change(uri, broken if i % 2 == 0 else text, version)
        at, found = client.diagnostics(uri, version)
        assert bool(found) == (i % 2 == 0), found
        if i >= 2:  # the first toggles warm the checker's tables
            runs.append((at - start) * 1e3 - DEBOUNCE_MS)
        time.sleep(0.05)
    client.close()
    return {"median_ms": statistics.median(runs), "runs_ms": [round(r, 2) for r in runs]}


def recheck_latency(base: Path, target: str, repeats: int) -> dict:
    """ms to re-check after the same edit, in this process through the queries the server
    asks (the file's diagnostics and the target's report), without the protocol: the part
    of the edit latency that can grow with the model."""
    from tribuild.config.load import load_config
    from tribuild.driver.sources import load_sources, scan
    from tribuild.engine import Database
    from tribuild.queries.inputs import SourceText, source_text
    from tribuild.queries.report import file_diagnostics
    from tribuild.queries.targets import target_report

    root = zoo(base, f"recheck-{target}", [target])
    (entry,) = load_config(root / "Tribuild.toml").targets
    db = Database()
    load_sources(db, str(root), scan(str(root), ("models",)))
    text = (root / BLOCKS).read_text()
    broken = text.replace(*EDIT, 1)
    runs = []
    for i in range(repeats * 2 + 2):
        db.set(source_text, BLOCKS, SourceText(broken if i % 2 == 0 else text))
        start = time.perf_counter()
        found = file_diagnostics(db, BLOCKS)
        target_report(db, entry.entry_path, entry.entry_layer, entry.args, entry.input)
        took = (time.perf_counter() - start) * 1e3
        assert bool(found) == (i % 2 == 0), found
        if i >= 2:
            runs.append(took)
    return {"median_ms": statistics.median(runs), "runs_ms": [round(r, 3) for r in runs]}


def requests(base: Path, repeats: int) -> dict:
    root = zoo(base, "requests", None)
    client = Client(root)
    client.initialize()
    text = (root / "models/resnet.tri").read_text()
    uri = client.open("models/resnet.tri")
    doc = {"uri": uri}
    cases = {
        "hover (a local: its shape per instance)": (
            "textDocument/hover",
            {"textDocument": doc, "position": position(text, "x = stem(x)")},
        ),
        "hover (an imported layer)": (
            "textDocument/hover",
            {"textDocument": doc, "position": position(text, "ResStage(64")},
        ),
        "definition (across an import)": (
            "textDocument/definition",
            {"textDocument": doc, "position": position(text, "ResStage(64")},
        ),
        "completion (in forward)": (
            "textDocument/completion",
            {"textDocument": doc, "position": position(text, "        x = stem(x)\n", 8)},
        ),
    }
    out = {}
    for name, (method, params) in cases.items():
        client.request(method, params)  # first: fills the query caches
        runs = [client.request(method, params)[0] * 1e3 for _ in range(repeats)]
        out[name] = {"median_ms": statistics.median(runs), "runs_ms": [round(r, 3) for r in runs]}
    client.close()
    return out


def start(base: Path, repeats: int) -> dict:
    """From ``initialize`` to the diagnostics of a file with one error, the cache warm."""
    root = zoo(base, "start", None)
    mlp = root / "models" / "mlp.tri"
    mlp.write_text(mlp.read_text().replace("relu(", "rleu(", 1))
    subprocess.run(
        [sys.executable, "-m", "tribuild", "check"], cwd=root, capture_output=True, check=False
    )
    out = {}
    for name, as_process in (("in-process", False), ("subprocess", True)):
        runs = []
        for _ in range(repeats):
            begin = time.perf_counter()
            client = Client(root, subprocess_server=as_process)
            client.initialize()
            at, found = client.diagnostics(client.uri("models/mlp.tri"))
            assert found, "the broken file has a diagnostic"
            runs.append(at - begin)
            client.close()
        out[name] = {"median_s": statistics.median(runs), "runs_s": [round(r, 3) for r in runs]}
    return out


def rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory(base: Path, edits: int) -> dict:
    """Edits of `resnet_blocks.tri`, each toggling an error (and naming its number in a
    comment, so every text is new), each waiting for its diagnostics; no debounce."""
    root = zoo(base, "memory", None)
    client = Client(root, debounce_ms=0)
    client.initialize()
    text = (root / BLOCKS).read_text()
    uri = client.open(BLOCKS)
    broken = text.replace(*EDIT, 1)
    samples = []
    began = time.perf_counter()
    for i in range(edits):
        client.change(uri, (broken if i % 2 == 0 else text) + f"# edit {i}\n", i + 2)
        client.diagnostics(uri, i + 2)
        if i + 1 in (100, edits) or (i + 1) % 1000 == 0:
            samples.append((i + 1, rss_bytes()))
    seconds = time.perf_counter() - began
    client.close()
    first = dict(samples)[100]
    last = samples[-1][1]
    return {
        "edits": edits,
        "seconds": round(seconds, 1),
        "rss_after_100_mb": round(first / 2**20, 1),
        "rss_end_mb": round(last / 2**20, 1),
        "growth": round(last / first - 1, 4),
        "samples_mb": [(n, round(b / 2**20, 1)) for n, b in samples],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--edits", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=RESULTS, help="where lsp.json and lsp.md go")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        result = {
            "edit": {t: edit_latency(base, t, args.repeats) for t in ("resnet18", "resnet152")},
            "recheck": {
                t: recheck_latency(base, t, args.repeats * 4) for t in ("resnet18", "resnet152")
            },
            "requests": requests(base, args.repeats * 4),
            "start": start(base, max(3, args.repeats // 3)),
            "memory": memory(base, args.edits),
        }
    result["meta"] = {
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "debounce_ms": DEBOUNCE_MS,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg()[0],
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "lsp.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / "lsp.md").write_text(report(result))
    print(report(result))


def report(r: dict) -> str:
    m = r["meta"]
    lines = [
        "# tribuild lsp: latency and memory through the protocol",
        "",
        f"{m['cpus']} CPUs, Python {m['python']}, commit {m['commit']}, debounce "
        f"{m['debounce_ms']} ms, load average before {m['load_average_before']:.2f}, after "
        f"{m['load_average_after']:.2f}. The server runs in the benchmark's process on two "
        "pipes; every figure is a round trip of JSON-RPC messages. Medians.",
        "",
        "| case | median | goal | met |",
        "|---|---:|---|---|",
    ]
    for target, e in r["edit"].items():
        ok = e["median_ms"] <= 15
        lines.append(
            f"| diagnostics after a body edit, {target} target, beyond the debounce | "
            f"{e['median_ms']:.1f} ms | <= 15 ms | {'yes' if ok else 'no'} |"
        )
    for target, e in r["recheck"].items():
        lines.append(
            f"| re-check after the same edit, {target} target, queries only (no protocol) | "
            f"{e['median_ms']:.2f} ms | (the part that may grow with the model) |  |"
        )
    for name, q in r["requests"].items():
        goal = 10 if name.startswith("completion") else 5
        ok = q["median_ms"] <= goal
        lines.append(
            f"| {name} | {q['median_ms']:.2f} ms | <= {goal} ms | {'yes' if ok else 'no'} |"
        )
    for name, s in r["start"].items():
        goal = "<= 0.5 s" if name == "in-process" else "(reference: imports included)"
        ok = "yes" if s["median_s"] <= 0.5 else "no"
        lines.append(
            f"| start, warm cache, to the first diagnostics ({name}) | {s['median_s']:.3f} s | "
            f"{goal} | {ok if name == 'in-process' else ''} |"
        )
    mem = r["memory"]
    ok = abs(mem["growth"]) <= 0.2
    lines.append(
        f"| resident memory after {mem['edits']} edits vs after 100 | "
        f"{mem['rss_end_mb']} MB vs {mem['rss_after_100_mb']} MB ({mem['growth']:+.1%}) | "
        f"within 20% | {'yes' if ok else 'no'} |"
    )
    flat = r["edit"]["resnet152"]["median_ms"] / max(r["edit"]["resnet18"]["median_ms"], 1e-9)
    recheck = r["recheck"]["resnet152"]["median_ms"] / r["recheck"]["resnet18"]["median_ms"]
    lines += [
        "",
        f"ResNet-152 / ResNet-18 (the goal: flat in model size): {flat:.2f}x for the "
        f"diagnostics through the protocol, {recheck:.2f}x for the re-check alone. The edit is "
        "in ResStage's forward, a loop over the blocks of each stage (8 in ResNet-18, 50 in "
        "ResNet-152); the check runs each distinct step of it once.",
        "",
        f"Memory samples (edits, MB): {mem['samples_mb']}; {mem['edits']} edits took "
        f"{mem['seconds']} s (no debounce; each waits for its diagnostics).",
        "",
        "Runs (ms): " + "; ".join(f"{t}: {e['runs_ms']}" for t, e in r["edit"].items()),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
