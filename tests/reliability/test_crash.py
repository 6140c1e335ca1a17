"""Crash safety: `tribuild build` killed with SIGKILL at any point loses nothing.

Two ways to pick the moment:
- *kill points*: ``killer`` kills the build just before its Nth file-system change (every
  write-mode open, rename, unlink, fsync, ...). An incremental build of the project passes
  about 30 of them, and every one is tried: a stride of 5 missed the one after the
  record's rename, where a build used to forget stale outputs it had not deleted yet. A
  clean build with two workers is tried at each of its own process's kill points too.
- *random delays*: a plain subprocess killed after a uniform random delay up to 1.5 times
  the length of a whole build (interpreter start-up, lock, store load, compile included).

After each kill, the output folder must hold only files of the two known versions, each
with the complete bytes of one of them (every ``.py`` compiles), the record and the early
journal must be valid JSON, and no temporary file may sit at an output path. Then a full
build must give exactly the reference outputs of the version on disk, and leave no
temporary file anywhere. `tribuild compile` (make's and ninja's rule) is killed at each of
its kill points too: a new module must never sit beside an old depfile.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

from tests.reliability.project import (
    CACHE,
    OUT,
    check_python,
    command,
    env,
    outputs,
    set_version,
    temp_files,
    tribuild,
)

RANDOM_KILLS = 40 if os.environ.get("TRIBUILD_RELIABILITY_FULL") else 8
RECORD = ".tribuild-outputs.json"
EARLY = ".tribuild-outputs.early"  # a parallel build's journal of what it wrote early


def check_interrupted(root, references) -> None:
    """Every output is complete and holds the bytes of one of the two versions."""
    files = outputs(root)
    for rel, data in files.items():
        if rel == RECORD:
            json.loads(data)
            continue
        if rel == EARLY:
            assert all(len(json.loads(line)) == 2 for line in data.splitlines()), data
            continue
        if rel.endswith(".tmp"):  # litter of the killed build, at no output's path
            assert all(rel not in refs for refs in references.values()), rel
            continue
        known = [refs[rel] for refs in references.values() if rel in refs]
        assert data in known, f"{rel} holds bytes of neither version"
    check_python({rel: data for rel, data in files.items() if not rel.endswith(".tmp")})


def finish(root, version, references) -> None:
    """A full build after the kill gives exactly a clean build's outputs, and no litter."""
    done = tribuild(root, "build", "-q")
    assert done.returncode == 0, done.stderr
    assert outputs(root) == references[version]
    assert temp_files(root / OUT) == [] and temp_files(root / CACHE) == []


def edit(root, version: str, n: int) -> None:
    """Set ``version`` with a comment no earlier build saw: the outputs are the version's,
    and the store has new values to write (a value seen before is not written again), so
    every build passes the same kill points, the writing of a new value pack included."""
    set_version(root, version)
    with open(root / "models" / "net.tri", "a") as f:
        f.write(f"\n# edit {n}\n")


def killed_build(root, n: int, *args: str, count_file=None) -> subprocess.CompletedProcess:
    """``tribuild build -q ARGS`` killed at its Nth kill point (0: never; then the count of
    kill points it passed goes to ``count_file``)."""
    extra = {"TRIBUILD_KILL_COUNT": str(count_file)} if count_file else {}
    done = subprocess.run(
        [sys.executable, "-m", "tests.reliability.killer", str(n), "build", "-q", *args],
        cwd=root,
        env=env() | extra,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode in (0, -signal.SIGKILL), (n, done.returncode, done.stderr)
    return done


def kill_points(root, *args: str, clean: bool = False) -> int:
    """How many kill points a build with ``args`` from version a to b passes (from an empty
    cache and output folder if ``clean``); leaves version a built."""
    count = root / "kill-count"
    edit(root, "b", 0)
    if clean:
        shutil.rmtree(root / CACHE)
    assert killed_build(root, 0, *args, count_file=count).returncode == 0
    set_version(root, "a")
    assert tribuild(root, "build", "-q").returncode == 0
    return int(count.read_text())


def kill_each_point(root, references, *args: str, clean: bool = False) -> None:
    """Kill a build with ``args`` at each of its kill points in turn, alternating the two
    versions; after each, check what was left and that a full build repairs it."""
    assert tribuild(root, "build", "-q").returncode == 0
    total = kill_points(root, *args, clean=clean)
    assert total > 10
    version, killed = "a", 0
    for n in range(1, total + 1):
        version = "b" if version == "a" else "a"
        edit(root, version, n)
        if clean:
            shutil.rmtree(root / CACHE)
        killed += killed_build(root, n, *args).returncode == -signal.SIGKILL
        check_interrupted(root, references)
        finish(root, version, references)
    assert killed >= total - 2  # b to a may pass fewer points


def test_kill_at_each_file_system_change(project, references):
    kill_each_point(project, references)


def test_kill_a_parallel_clean_build_at_each_file_system_change(project, references):
    """From an empty cache with two workers: they write outputs as their targets build while
    this process merges; it then records the outputs, saves the store and the manifest.
    The kill points are this process's: the workers' are not counted."""
    kill_each_point(project, references, "-j2", clean=True)


def test_kill_after_random_delays(project, references):
    rng = random.Random(8)
    start = time.monotonic()
    assert tribuild(project, "build", "-q").returncode == 0
    whole = time.monotonic() - start
    version, outcomes = "a", {"killed": 0, "finished": 0}
    for _ in range(RANDOM_KILLS):
        version = "b" if version == "a" else "a"
        set_version(project, version)
        if rng.random() < 0.2:  # now and then from an empty cache: the worker path
            subprocess.run(["rm", "-rf", str(project / CACHE)], check=True)
        proc = subprocess.Popen(
            command("build", "-q", "-j2"),
            cwd=project,
            env=env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0, 1.5 * whole))
        proc.send_signal(signal.SIGKILL)
        outcomes["killed" if proc.wait() == -signal.SIGKILL else "finished"] += 1
        check_interrupted(project, references)
        finish(project, version, references)
    assert outcomes["killed"] > 0, outcomes


SOLO = {  # a source that gains an import: the depfile must name it once the module is new
    "alone": (
        "layer Solo(width: int = 16) {\n"
        "    let fc = TernaryLinear(64, width, bias=true)\n\n"
        "    fn forward(x: Tensor<float32, [N, 64]>) -> Tensor<float32, [N, width]> {\n"
        "        return relu(fc(x))\n    }\n}\n"
    ),
    "importing": (
        'import "lib/blocks.tri"\n\n'
        "layer Solo(width: int = 16) {\n"
        "    let a = Dense(64, width)\n\n"
        "    fn forward(x: Tensor<float32, [N, 64]>) -> Tensor<float32, [N, width]> {\n"
        "        return a(x)\n    }\n}\n"
    ),
}
COMPILE = ("compile", "models/solo.tri", "-o", "gen/solo.py", "--depfile", "gen/solo.py.d")


def killed_compile(root, n: int, count_file=None) -> subprocess.CompletedProcess:
    """``tribuild compile`` (make's rule) killed at its Nth kill point, as ``killed_build``."""
    extra = {"TRIBUILD_KILL_COUNT": str(count_file)} if count_file else {}
    done = subprocess.run(
        [sys.executable, "-m", "tests.reliability.killer", str(n), *COMPILE],
        cwd=root,
        env=env() | extra,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode in (0, -signal.SIGKILL), (n, done.returncode, done.stderr)
    return done


def test_kill_a_compile_at_each_file_system_change(project):
    """make's rule, killed at each kill point of a compile whose source just gained an
    import: whenever the module holds the new bytes, the depfile names the import (else make
    would never rerun the rule when the import changes). The module was renamed into place
    before the depfile was written: a kill between the two left a new module and the old
    depfile, 2 kills in 12 of ``make -j4``."""
    solo = project / "models" / "solo.tri"
    modules = {}
    for version in SOLO:
        solo.write_text(SOLO[version])
        assert tribuild(project, *COMPILE).returncode == 0
        modules[version] = (project / "gen" / "solo.py").read_bytes()
    assert modules["alone"] != modules["importing"]
    count = project / "kill-count"
    solo.write_text(SOLO["alone"] + "# count\n")
    assert tribuild(project, *COMPILE).returncode == 0
    solo.write_text(SOLO["importing"] + "# count\n")
    assert killed_compile(project, 0, count_file=count).returncode == 0
    total = int(count.read_text())
    assert total > 5
    killed = 0
    for n in range(1, total + 1):
        solo.write_text(SOLO["alone"] + f"# {n}\n")
        assert tribuild(project, *COMPILE).returncode == 0
        solo.write_text(SOLO["importing"] + f"# {n}\n")
        killed += killed_compile(project, n).returncode == -signal.SIGKILL
        module = (project / "gen" / "solo.py").read_bytes()
        assert module in modules.values(), n
        if module == modules["importing"]:
            depfile = (project / "gen" / "solo.py.d").read_text()
            assert "models/lib/blocks.tri" in depfile, (n, depfile)
        check_python({"solo.py": module})
        assert tribuild(project, *COMPILE).returncode == 0
        assert (project / "gen" / "solo.py").read_bytes() == modules["importing"]
        assert temp_files(project / "gen") == []
    assert killed >= total - 1


def test_clean_removes_what_killed_builds_left(project, references):
    """L1: a killed build leaves ``.NAME.XXXXXXXX.tmp`` files beside outputs it was writing
    (167 after one attack); a build deletes only those of the outputs it writes, and
    `tribuild clean` deleted none ("removed 0 files"). The names are those a killed first
    build leaves: a module, a kernel, a depfile, the record."""
    assert tribuild(project, "build", "-q").returncode == 0
    kernel = next(rel for rel in references["a"] if rel.startswith("kernels/"))
    litter = [
        ".net.py.a1b2c3d4.tmp",
        ".fresh.py.zzzz9999.tmp",
        ".net.d.abcdefgh.tmp",
        f"kernels/.{kernel.split('/')[1]}.0123abcd.tmp",
        f".{RECORD}.k3k3k3k3.tmp",
    ]
    for rel in litter:
        (project / OUT / rel).write_bytes(b"half a file")
    mine = project / OUT / ".notes.txt.abcdefgh.tmp"  # not a name tribuild writes: kept
    mine.write_text("the user's")
    done = tribuild(project, "clean")
    assert done.returncode == 0, done.stderr
    assert sorted(
        p.relative_to(project / OUT).as_posix() for p in (project / OUT).rglob("*.tmp")
    ) == [mine.name]
    assert f"removed {len(references['a']) - 1 + len(litter)} files" in done.stderr  # no record


def test_compile_removes_old_kernel_temporaries(project):
    """L1: killed compiles under make left kernel temporaries that nothing removed (the
    kernels folder is shared by rules running at once, so a compile left them all). A
    compile now deletes those not changed for an hour; a fresh one may be another rule's."""
    solo = project / "models" / "solo.tri"
    solo.write_text(SOLO["alone"])
    assert tribuild(project, *COMPILE).returncode == 0
    kernels = project / "gen" / "kernels"
    old, fresh = kernels / ".k.py.aaaaaaaa.tmp", kernels / ".k.py.bbbbbbbb.tmp"
    for path in (old, fresh):
        path.write_bytes(b"half a kernel")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert tribuild(project, *COMPILE).returncode == 0
    assert not old.exists() and fresh.exists()
