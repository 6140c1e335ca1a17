"""Cache corruption: a damaged store, manifest or explanation record never makes a wrong output.

Each case starts from a copy of a project built at version a, damages one file of its cache
folder in one way (``KINDS``), edits the source to version b and builds: the build must
succeed with exactly the outputs of a clean build of b, and say what it dropped at most once
per problem. For the store, a further build (back to a; for the pack, then b again) must
match clean builds too; damage the first build did not read may be reported by the second,
never twice, and the third reports nothing. The manifest and the explanation record get
four kinds of damage, the store all eight.
A store written by another tribuild (another salt, another format) is ignored: it is neither
read nor reported as damage.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.reliability import store_edit
from tests.reliability.project import CACHE, env, make_project, outputs, set_version, tribuild
from tribuild.engine.store import disk as store


def _flip(at):
    def edit(path: Path) -> None:
        data = bytearray(path.read_bytes())
        data[at(len(data))] ^= 0x5A
        path.write_bytes(bytes(data))

    return edit


KINDS = {
    "empty": lambda p: p.write_bytes(b""),
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "flip-first": _flip(lambda n: 0),
    "flip-middle": _flip(lambda n: n // 2),
    "flip-last": _flip(lambda n: n - 1),
    "deleted": lambda p: p.unlink(),
    "garbage": lambda p: p.write_bytes(random.Random(p.name).randbytes(p.stat().st_size)),
    "swapped-halves": lambda p: p.write_bytes(
        p.read_bytes()[p.stat().st_size // 2 :] + p.read_bytes()[: p.stat().st_size // 2]
    ),
}
FILES = {
    "graph": "graph-*.json",
    "pack": "values-*.pack",
    "manifest": "build-manifest.json",
    "explain": "explain.json",
}
STORE = ("graph", "pack")
CASES = [
    (part, kind)
    for part in sorted(FILES)
    for kind in sorted(KINDS)
    if part in STORE or kind in ("empty", "flip-middle", "deleted", "garbage")
]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = make_project(tmp_path_factory.mktemp("built") / "project", "a")
    assert tribuild(root, "build", "-q").returncode == 0
    return root


def copy(built: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(built, tmp_path / "project", symlinks=True))


def reports(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "engine store:" in line]


def build_and_compare(root: Path, version: str, references) -> list[str]:
    set_version(root, version)
    done = tribuild(root, "build", "-q")
    assert done.returncode == 0, done.stderr
    assert outputs(root) == references[version]
    assert "Traceback" not in done.stderr
    return reports(done.stderr)


@pytest.mark.parametrize(("part", "kind"), CASES)
def test_damaged_cache_file(built, tmp_path, references, part, kind):
    root = copy(built, tmp_path)
    (target,) = (root / CACHE).glob(FILES[part])
    KINDS[kind](target)
    said = build_and_compare(root, "b", references)
    assert all(n == 1 for n in Counter(said).values()), said
    if part == "graph" and kind != "deleted":
        assert len(said) == 1 and "corrupt graph file" in said[0], said
    if part in STORE:  # a damaged entry the first build did not read is found now, once
        again = build_and_compare(root, "a", references)
        assert not set(again) & set(said) and all(n == 1 for n in Counter(again).values())
        if part == "pack":
            assert build_and_compare(root, "b", references) == []


def test_save_drops_damage_it_did_not_read(built, tmp_path, references):
    root = copy(built, tmp_path)
    (pack,) = (root / CACHE).glob(FILES["pack"])
    KINDS["flip-middle"](pack)
    build_and_compare(root, "b", references)
    done = tribuild(root, "cache", "validate")
    assert done.returncode == 0, done.stderr


def test_damaged_output_record(built, tmp_path, references):
    """The record of what tribuild wrote, damaged: nothing is lost, the build is right."""
    root = copy(built, tmp_path)
    (root / "out" / ".tribuild-outputs.json").write_bytes(b"{\"targets\": [1, 2")
    assert build_and_compare(root, "b", references) == []


def test_explain_after_damage(built, tmp_path):
    root = copy(built, tmp_path)
    (root / CACHE / "explain.json").write_bytes(b"\xff\x00[")
    done = tribuild(root, "explain", "out/net.py")
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr


def test_store_of_another_salt_is_ignored(built, tmp_path, references):
    root = copy(built, tmp_path)
    graph = store_edit.graph_file(root / CACHE)
    meta, ints = store_edit.read(graph)
    store_edit.write(graph, meta | {"salt": meta["salt"] + "-other"}, ints)
    assert build_and_compare(root, "b", references) == []


def test_store_of_another_format_is_ignored(built, tmp_path, references):
    root = copy(built, tmp_path)
    graph = store_edit.graph_file(root / CACHE)
    meta, ints = store_edit.read(graph)
    other = graph.with_name("graph-0123456789abcdef.json")
    store_edit.write(other, meta | {"salt": "another version"}, ints, fmt=store.FORMAT + 1)
    graph.unlink()
    assert build_and_compare(root, "b", references) == []
    assert other.exists()  # left for its own version (until the size limit evicts it)


def _same_size_edit(root: Path, version: str) -> Path:
    """Set ``version`` of net.tri (the versions differ by one digit: same size) and put its
    mtime back, as ``cp -p`` or a fast editor in one timestamp tick leaves it."""
    net = root / "models" / "net.tri"
    before = net.stat()
    set_version(root, version)
    os.utime(net, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = net.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    return net


def _stamp_as_now(entry: list, path: Path, at: int) -> None:
    """Make a manifest row of ``path`` hold the file's stamp from index ``at`` on (size,
    mtime, ctime, inode, as many as the row holds there; the digest of an input row stays)."""
    st = path.stat()
    entry[1:3] = [st.st_size, st.st_mtime_ns]
    entry[at : at + 2] = [st.st_ctime_ns, st.st_ino][: max(0, len(entry) - at)]


def test_same_size_edit_with_its_mtime_put_back_is_rebuilt(built, tmp_path, references):
    """M4: the manifest compared only size and mtime, so this edit (relu -> tanh in the
    attack, a digit here) gave `no work to do` and left the old outputs. The ctime moved."""
    root = copy(built, tmp_path)
    _same_size_edit(root, "b")
    done = tribuild(root, "build", "-q")
    assert done.returncode == 0, done.stderr
    assert outputs(root) == references["b"]


def test_racily_clean_input_is_hashed(built, tmp_path, references):
    """An edit in the same timestamp tick as the build leaves every stamp as recorded (a
    coarse file system, simulated by writing the file's stamp into the manifest): the input
    is within the tick of the manifest's own write, so its digest is checked, as git does."""
    root = copy(built, tmp_path)
    net = _same_size_edit(root, "b")
    path = root / CACHE / "build-manifest.json"
    data = json.loads(path.read_bytes())
    (row,) = [e for e in data["inputs"] if e[0] == "models/net.tri"]
    _stamp_as_now(row, net, 4)
    path.write_text(json.dumps(data))
    done = tribuild(root, "build", "-q")
    assert done.returncode == 0, done.stderr
    assert outputs(root) == references["b"]


PROBE = """\
import tribuild
print(tribuild.compile_model("models/mlp.tri", "MLP", hidden=8).__name__)
"""


def test_compile_model_checks_the_cached_module_before_running_it(tmp_path):
    """M4: `compile_model` imported the cached module when its size and mtime matched, so a
    same-size edit of it ran whatever it held. Here the edit's stamp is even written into
    the model manifest (an edit in the build's timestamp tick): only the module's digest,
    checked before it is run, catches it."""
    root = make_project(tmp_path / "project")

    def probe() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", PROBE], cwd=root, env=env(), capture_output=True, text=True
        )

    assert probe().stdout.split() == ["MLP"]
    (module,) = (root / CACHE / "models").glob("mlp_MLP_*.py")
    clean = module.read_bytes()
    payload = b"raise SystemExit(7)\n"
    module.write_bytes(payload + b"#" * (len(clean) - len(payload)))
    (record,) = (root / CACHE).glob("model-mlp_MLP_*.json")
    data = json.loads(record.read_bytes())
    (row,) = [e for e in data["outputs"] if e[0].endswith(module.name)]
    _stamp_as_now(row, module, 3)
    record.write_text(json.dumps(data))
    done = probe()
    assert (done.returncode, done.stdout.split()) == (0, ["MLP"]), done.stderr
    assert module.read_bytes() == clean


def _zero_link(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _folder(path: Path) -> None:
    path.mkdir()
    (path / "inside").write_text("a file in the folder")


SPECIAL = {"zero-link": _zero_link, "fifo": _fifo, "folder": _folder}
SPECIAL_FILES = {
    "record": "out/.tribuild-outputs.json",
    "early": "out/.tribuild-outputs.early",
    "manifest": f"{CACHE}/build-manifest.json",
    "explain": f"{CACHE}/explain.json",
    "graph": f"{CACHE}/graph-*.json",
    "pack": f"{CACHE}/values-*.pack",
    "salt": f"{CACHE}/salt.json",
    "lock": f"{CACHE}/lock",
}


def _limit_memory() -> None:  # /dev/zero read without bound: a MemoryError, not the OOM killer
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


@pytest.mark.parametrize("kind", sorted(SPECIAL))
@pytest.mark.parametrize("part", sorted(SPECIAL_FILES))
def test_special_file_in_cache_or_output_folder(built, tmp_path, references, part, kind):
    """M3 and L2: a link to /dev/zero was read until the OOM killer struck (24 GB), a FIFO
    hung every build, a folder gave `Is a directory` (exit 2) on every build. Each is now
    taken for a damaged file: dropped, rebuilt, and the build is a clean build's."""
    root = copy(built, tmp_path)
    (path,) = [root / p for p in [SPECIAL_FILES[part]] if "*" not in p] or list(
        root.glob(SPECIAL_FILES[part])
    )
    if path.exists():
        path.unlink()
    SPECIAL[kind](path)
    set_version(root, "b")
    for _ in range(2):  # the first build drops it, the second finds a clean cache
        done = tribuild(root, "build", "-q", timeout=60, preexec_fn=_limit_memory)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        assert outputs(root) == references["b"]
