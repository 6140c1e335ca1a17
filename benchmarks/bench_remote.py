"""The remote build cache on a local redis-server (loopback), side by side in one run.

Cases (each a fresh `tribuild build -q` process; ratios are per round, rounds back to back):
- zoo: a fresh clone with an empty local cache against a warm remote, beside a cold local
  build of another fresh clone (no remote) and a local no-op;
- synthetic (bench_build's ~20k-line project): a fresh clone against a warm remote beside
  its cold `--jobs 1` build;
- no-op with a remote configured beside one without (and whether the no-op contacted the
  server: its connection count before and after);
- 8 fresh clones of the zoo building at once against one empty server: every output equal
  to a clean local build's, and each output file's bytes held once on the server;
- 20 builds of fresh clones with the server killed (SIGKILL) at a random point of each:
  every exit status and every output.
Writes benchmarks/results/remote.json and remote.md.

    python benchmarks/bench_remote.py [--repeats N] [--synthetic-repeats N] [--kills N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchmarks.bench_build import CHILD_ENV, TRIBUILD, copy_zoo, write_synthetic  # noqa: E402
from tests.driver.remote.server import RedisServer  # noqa: E402

RESULTS = HERE / "results"
GOALS = {
    "zoo warm remote <= 3x local no-op": ("zoo warm remote / no-op", 3.0, "max"),
    "zoo cold local >= 5x warm remote": ("zoo cold / warm remote", 5.0, "min"),
    "synthetic cold --jobs 1 >= 5x warm remote": ("synthetic cold / warm remote", 5.0, "min"),
}


def build(cwd: Path, remote: str | None, *args: str) -> float:
    """Wall seconds of one `tribuild build -q ARGS` in ``cwd`` (``remote``: its URL)."""
    env = {k: v for k, v in CHILD_ENV.items() if not k.startswith("TRIBUILD_")}
    if remote is not None:
        env["TRIBUILD_REMOTE_CACHE"] = remote
    start = time.perf_counter()
    done = subprocess.run(TRIBUILD + ["build", "-q", *args], cwd=cwd, env=env, capture_output=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"build failed in {cwd}:\n{done.stderr.decode()}")
    return seconds


def outputs(folder: Path, out: str) -> dict[str, bytes]:
    base = folder / out
    return {p.relative_to(base).as_posix(): p.read_bytes() for p in base.rglob("*") if p.is_file()}


def python(code: str) -> float:
    """Wall seconds of a Python process that runs ``code``: the floor under a build."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=CHILD_ENV, check=True)
    return time.perf_counter() - start


def zoo_rounds(base: Path, server: RedisServer, repeats: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {
        "zoo cold local": [],
        "zoo no-op": [],
        "zoo warm remote": [],
        "python -c 'import redis' (the client's import alone)": [],
    }
    build(copy_zoo(base / "zoo-writer"), server.url)  # warms the remote
    for i in range(repeats):
        cold = copy_zoo(base / f"zoo-cold-{i}")
        warm = copy_zoo(base / f"zoo-warm-{i}")
        times["zoo cold local"].append(build(cold, None))
        times["zoo no-op"].append(build(cold, None))
        times["zoo warm remote"].append(build(warm, server.url))
        times["python -c 'import redis' (the client's import alone)"].append(python("import redis"))
    return times


def synthetic_rounds(base: Path, server: RedisServer, repeats: int) -> tuple[dict, int]:
    source = base / "synthetic"
    lines = write_synthetic(source)
    shutil.copytree(source, base / "syn-writer")
    build(base / "syn-writer", server.url, "--jobs", "1")
    times: dict[str, list[float]] = {"synthetic cold --jobs 1": [], "synthetic warm remote": []}
    for i in range(repeats):
        for case in ("synthetic cold --jobs 1", "synthetic warm remote"):
            work = base / f"syn-{i}-{len(times[case])}-{case.split()[1]}"
            shutil.copytree(source, work)
            remote = server.url if "remote" in case else None
            times[case].append(build(work, remote, "--jobs", "1"))
    return times, lines


def noop_rounds(base: Path, server: RedisServer, repeats: int) -> tuple[dict, int]:
    zoo = copy_zoo(base / "zoo-noop")
    build(zoo, server.url)
    times: dict[str, list[float]] = {"zoo no-op, no remote": [], "zoo no-op, remote set": []}
    before = server.client().info("stats")["total_connections_received"]
    for i in range(repeats):  # the order alternates: the second of two runs is often faster
        for remote in (None, server.url) if i % 2 == 0 else (server.url, None):
            case = "zoo no-op, remote set" if remote else "zoo no-op, no remote"
            times[case].append(build(zoo, remote))
    after = server.client().info("stats")["total_connections_received"]
    return times, after - before - 1  # the info call's own connection


def concurrent_clones(base: Path, tmp_server: Path, reference: dict[str, bytes]) -> dict:
    server = RedisServer(tmp_server).start()
    try:
        clones = [copy_zoo(base / f"fleet-{i}") for i in range(8)]
        env = {k: v for k, v in CHILD_ENV.items() if not k.startswith("TRIBUILD_")}
        env["TRIBUILD_REMOTE_CACHE"] = server.url
        start = time.perf_counter()
        procs = [
            subprocess.Popen(TRIBUILD + ["build", "-q"], cwd=c, env=env, stderr=subprocess.PIPE)
            for c in clones
        ]
        codes = [p.wait() for p in procs]
        seconds = time.perf_counter() - start
        identical = sum(outputs(c, "build/zoo") == reference for c in clones)
        blobs = len(server.client().keys("tribuild:cas:*"))
        distinct = len({data for rel, data in reference.items() if rel.endswith(".py")})
        return {
            "clones": len(clones),
            "exit_codes": codes,
            "identical_to_clean_local": identical,
            "blobs_on_server": blobs,
            "distinct_output_files": distinct,
            "seconds": seconds,
        }
    finally:
        server.stop()


def killed_builds(base: Path, tmp_server: Path, reference: dict, count: int) -> dict:
    rng = random.Random(25)
    server = RedisServer(tmp_server).start()
    env = {k: v for k, v in CHILD_ENV.items() if not k.startswith("TRIBUILD_")}
    env["TRIBUILD_REMOTE_CACHE"] = server.url
    rows = []
    try:
        for i in range(count):
            if i % 2:  # every other build finds a warm remote
                subprocess.run(
                    TRIBUILD + ["build", "-q"], cwd=copy_zoo(base / f"kw-{i}"), env=env, check=True
                )
            folder = copy_zoo(base / f"kill-{i}")
            delay = rng.uniform(0.0, 1.0)
            proc = subprocess.Popen(
                TRIBUILD + ["build", "-q"], cwd=folder, env=env, stderr=subprocess.PIPE
            )
            time.sleep(delay)
            server.kill()
            _, err = proc.communicate()
            rows.append(
                {
                    "killed_after": round(delay, 3),
                    "exit": proc.returncode,
                    "correct": outputs(folder, "build/zoo") == reference,
                    "warnings": err.decode().count("warning: remote cache"),
                }
            )
            server.start(server.port)
    finally:
        server.stop()
    return {
        "builds": rows,
        "all_exit_0": all(r["exit"] == 0 for r in rows),
        "all_correct": all(r["correct"] for r in rows),
    }


def medians(times: dict[str, list[float]]) -> dict[str, float]:
    return {name: statistics.median(values) for name, values in times.items()}


def ratios(times: dict[str, list[float]], top: str, bottom: str) -> list[float]:
    return [a / b for a, b in zip(times[top], times[bottom], strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--synthetic-repeats", type=int, default=3)
    parser.add_argument("--kills", type=int, default=20)
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        server = RedisServer(base / "redis").start()
        try:
            times = zoo_rounds(base, server, args.repeats)
            synthetic, lines = synthetic_rounds(base, server, args.synthetic_repeats)
            noop, noop_connections = noop_rounds(base, server, args.repeats)
        finally:
            server.stop()
        times.update(synthetic)
        times.update(noop)
        reference = outputs(base / "zoo-cold-0", "build/zoo")
        fleet = concurrent_clones(base, base / "redis-fleet", reference)
        kills = killed_builds(base, base / "redis-kill", reference, args.kills)
    round_ratios = {
        "zoo cold / warm remote": ratios(times, "zoo cold local", "zoo warm remote"),
        "zoo warm remote / no-op": ratios(times, "zoo warm remote", "zoo no-op"),
        "import redis alone / zoo no-op": ratios(
            times, "python -c 'import redis' (the client's import alone)", "zoo no-op"
        ),
        "synthetic cold / warm remote": ratios(
            times, "synthetic cold --jobs 1", "synthetic warm remote"
        ),
        "no-op remote set / no remote": ratios(
            times, "zoo no-op, remote set", "zoo no-op, no remote"
        ),
    }
    ratio_medians = {name: statistics.median(values) for name, values in round_ratios.items()}
    goals = {}
    for goal, (name, bound, kind) in GOALS.items():
        value = ratio_medians[name]
        goals[goal] = value <= bound if kind == "max" else value >= bound
    goals["8 clones identical, each file once on the server"] = (
        fleet["identical_to_clean_local"] == fleet["clones"]
        and fleet["blobs_on_server"] == fleet["distinct_output_files"]
        and set(fleet["exit_codes"]) == {0}
    )
    goals[f"{args.kills} builds with the server SIGKILLed exit 0, correct"] = (
        kills["all_exit_0"] and kills["all_correct"]
    )
    goals["no-op does not contact the server"] = noop_connections == 0
    report = {
        "machine": {
            "cpus": os.cpu_count(),
            "load_before": load_before,
            "load_after": os.getloadavg(),
            "python": sys.version.split()[0],
            "commit": subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True
            ).stdout.strip(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "redis_server": subprocess.run(
                ["redis-server", "--version"], capture_output=True, text=True
            ).stdout.strip(),
        },
        "synthetic_lines": lines,
        "seconds": times,
        "median_seconds": medians(times),
        "round_ratios": round_ratios,
        "median_ratios": ratio_medians,
        "noop_connections_to_server": noop_connections,
        "concurrent_clones": fleet,
        "killed_server": kills,
        "goals": goals,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "remote.json").write_text(json.dumps(report, indent=1) + "\n")
    (RESULTS / "remote.md").write_text(markdown(report))
    print(markdown(report))


def markdown(report: dict) -> str:
    m, r = report["median_seconds"], report["median_ratios"]
    fleet, kills = report["concurrent_clones"], report["killed_server"]
    lines = [
        "# Remote build cache (Redis on loopback)",
        "",
        f"`python benchmarks/bench_remote.py` at {report['machine']['commit']}, "
        f"{report['machine']['date']}; {report['machine']['cpus']} CPUs, load "
        f"{report['machine']['load_before'][0]:.2f} before, "
        f"{report['machine']['load_after'][0]:.2f} after; {report['machine']['redis_server']}.",
        "Each case is a fresh `tribuild build -q` process; ratios are the median of each "
        "round's ratio (a round's runs are back to back).",
        "",
        "| case | median s |",
        "|---|---:|",
    ]
    lines += [f"| {name} | {seconds:.3f} |" for name, seconds in m.items()]
    lines += ["", "| ratio (per round, median) | value |", "|---|---:|"]
    lines += [f"| {name} | {value:.2f}x |" for name, value in r.items()]
    lines += [
        "",
        f"Synthetic project: {report['synthetic_lines']} lines.",
        f"No-op connections to the server: {report['noop_connections_to_server']}.",
        f"8 clones at once: exit codes {fleet['exit_codes']}, "
        f"{fleet['identical_to_clean_local']} of {fleet['clones']} identical to a clean local "
        f"build, {fleet['blobs_on_server']} blobs on the server for "
        f"{fleet['distinct_output_files']} distinct output files, {fleet['seconds']:.1f} s.",
        f"Server SIGKILLed during {len(kills['builds'])} builds: all exit 0: "
        f"{kills['all_exit_0']}, all outputs correct: {kills['all_correct']}.",
        "",
        "| goal | met |",
        "|---|---|",
    ]
    lines += [f"| {goal} | {'yes' if met else 'no'} |" for goal, met in report["goals"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
