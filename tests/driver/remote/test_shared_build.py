"""The remote cache against a real redis-server: clones that share it, what a hit leaves in
the local store, poisoned entries of each kind, and the no-op path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.driver.remote.conftest import REPO, snapshot
from tribuild.config.load import load_config
from tribuild.remote import entries

ZOO_TARGETS = len(load_config(REPO / "Tribuild.toml").targets)  # the clones build them all


def stats(folder: Path) -> dict:
    return json.loads((folder / ".tribuild-cache" / "remote-stats.json").read_text())


def keys(server, kind: str) -> list[bytes]:
    return sorted(server.client().keys(f"tribuild:{kind}:*"))


def test_a_second_clone_takes_every_target_from_the_remote(remote_env, clone, cli, zoo_reference):
    first, second = clone("first"), clone("second")
    code, _, err = cli(["build", "-q"], first)
    assert code == 0 and "warning" not in err
    assert stats(first)["misses"] == ZOO_TARGETS and stats(first)["entries_written"] == ZOO_TARGETS
    code, _, err = cli(["build", "-q"], second)
    assert code == 0 and "warning" not in err
    got = stats(second)
    assert (got["hits"], got["misses"], got["refused"], got["errors"]) == (ZOO_TARGETS, 0, 0, 0)
    assert snapshot(second) == snapshot(first) == zoo_reference
    # each file's bytes once on the server: a kernel shared by targets is one blob
    distinct = {data for rel, data in zoo_reference.items() if rel.endswith(".py")}
    assert len(keys(remote_env, "cas")) == len(distinct)
    assert len(keys(remote_env, "ac")) == ZOO_TARGETS
    # the hit build is a complete build: the next one is a no-op
    code, _, err = cli(["build"], second)
    assert (code, err) == (0, "tribuild: no work to do\n")


def test_a_build_of_hits_lexes_no_file(remote_env, clone, cli):
    """The import closures that the action keys digest come from the remote's import lists:
    a clone whose targets are all hits runs no query but its inputs."""
    code, _, err = cli(["build", "-q", "--timing"], clone("first"))
    assert code == 0 and "\n  parse " in err
    assert len(keys(remote_env, "imp")) > 0
    second = clone("second")
    code, _, err = cli(["build", "-q", "--timing"], second)
    assert code == 0 and stats(second)["hits"] == ZOO_TARGETS
    stages = err.split("query stages", 1)[1]
    assert "\n  parse " not in stages and "\n  resolve " not in stages, stages


def test_a_wrong_import_list_is_refused_and_replaced(remote_env, clone, cli, zoo_reference):
    """An import list that leaves out what a file imports (well framed: written by someone
    without a secret to check) gives its targets action keys that miss those files. The
    targets are built here, their entries go under the keys of their true closures, and the
    list is refused and replaced."""
    cli(["build", "-q"], clone("first"))
    client = remote_env.client()
    lists = {k: client.get(k) for k in keys(remote_env, "imp")}
    victim = next(k for k, v in lists.items() if b"resnet_blocks.tri" in v)
    true_list = lists[victim]
    client.set(victim, entries.frame(victim.decode(), b"[]", None))
    actions = keys(remote_env, "ac")
    second = clone("second")
    code, _, err = cli(["build", "-q"], second)
    assert code == 0 and "does not match the file" in err and err.count("warning") == 1
    assert 0 < stats(second)["misses"] < ZOO_TARGETS
    assert snapshot(second) == zoo_reference
    assert client.get(victim) == true_list and keys(remote_env, "ac") == actions
    third = clone("third")
    assert cli(["build", "-q"], third)[0] == 0
    assert stats(third)["hits"] == ZOO_TARGETS and snapshot(third) == zoo_reference


def test_stats_command_and_explain_name_the_remote(remote_env, clone, cli):
    cli(["build", "-q"], clone("first"))
    second = clone("second")
    code, _, err = cli(["build", "-q", "--explain", "--timing"], second)
    assert code == 0
    assert "taken from the remote cache" in err
    assert "remote cache" in err.split("total", 1)[1]  # --timing's stage
    code, out, _ = cli(["cache", "stats"], second)
    assert code == 0 and f"{ZOO_TARGETS} hits, 0 misses" in out


def test_after_hits_an_edit_rebuilds_only_what_it_invalidated(
    remote_env, clone, cli, monkeypatch, tmp_path
):
    cli(["build", "-q"], clone("first"))
    second = clone("second")
    assert cli(["build", "-q"], second)[0] == 0 and stats(second)["hits"] == ZOO_TARGETS
    edited = second / "models" / "blocks" / "conv_bn_act.tri"
    text = edited.read_text()
    assert text.count("SiLU()") == 1
    edited.write_text(text.replace("SiLU()", "ReLU()"))  # a body edit: other outputs
    # with the remote: the targets that import the file are built here, the others are hits
    assert cli(["build", "-q"], second)[0] == 0
    users = _importers(second, "models/blocks/conv_bn_act.tri")
    assert 0 < len(users) < ZOO_TARGETS
    assert stats(second)["misses"] == len(users) and stats(second)["hits"] == ZOO_TARGETS - len(
        users
    )
    # a clean local build of the edited sources gives the same bytes
    reference = clone("reference")
    (reference / "models" / "blocks" / "conv_bn_act.tri").write_text(edited.read_text())
    monkeypatch.setenv("TRIBUILD_REMOTE_CACHE", "")
    assert cli(["build", "-q"], reference)[0] == 0
    assert snapshot(second) == snapshot(reference)
    # and without the remote, the store the hits left behind builds the same bytes again
    (second / "build").rename(tmp_path / "old-build")
    assert cli(["build", "-q"], second)[0] == 0
    assert snapshot(second) == snapshot(reference)


def _importers(folder: Path, path: str) -> list[str]:
    """The targets whose depfile lists ``path``."""
    out = folder / "build" / "zoo"
    return [d.stem for d in out.glob("*.d") if f" {path}" in d.read_text()]


@pytest.mark.parametrize("kind", ["truncated", "garbage", "wrong key", "blob bytes"])
def test_a_corrupt_entry_is_refused_and_overwritten(kind, remote_env, clone, cli, zoo_reference):
    cli(["build", "-q"], clone("first"))
    client = remote_env.client()
    actions = keys(remote_env, "ac")
    victim = actions[0]
    if kind == "truncated":
        client.set(victim, client.get(victim)[:-7])
    elif kind == "garbage":
        client.set(victim, b"\x00\xffnot an entry")
    elif kind == "wrong key":  # another target's entry copied under this key
        client.set(victim, client.get(actions[1]))
    else:  # a blob whose bytes were changed: a module that would run other code
        body = json.loads(client.get(victim).partition(b"\n")[2])
        digest = body["files"][0][1]
        client.set(f"tribuild:cas:{digest}", b"import os; os.system('echo pwned')\n")
    second = clone("second")
    code, _, err = cli(["build", "-q"], second)
    assert code == 0
    assert err.count("warning: remote cache") == 1 and "refused" in err
    got = stats(second)
    assert got["refused"] >= 1 and got["errors"] == 0 and got["misses"] >= 1
    assert snapshot(second) == zoo_reference
    assert not any(b"pwned" in data for data in snapshot(second).values())
    # the build that refused it wrote a good entry back: a third clone takes everything
    third = clone("third")
    assert cli(["build", "-q"], third)[0] == 0
    assert stats(third)["hits"] == ZOO_TARGETS and snapshot(third) == zoo_reference


def test_signed_entries(remote_env, clone, cli, monkeypatch, zoo_reference):
    # an unsigned writer (one without the secret): a reader with the secret refuses it all
    cli(["build", "-q"], clone("unsigned"))
    monkeypatch.setenv("TRIBUILD_CACHE_SECRET", "team secret")
    reader = clone("reader")
    code, _, err = cli(["build", "-q"], reader)
    assert code == 0 and "not signed" in err and err.count("warning") == 1
    lists = len(keys(remote_env, "imp"))  # import lists, refused with the action entries
    assert lists > 0 and stats(reader)["hits"] == 0
    assert stats(reader)["refused"] == ZOO_TARGETS + lists and snapshot(reader) == zoo_reference
    # that reader wrote signed entries over them: readers with the secret take them
    signed = clone("signed")
    assert cli(["build", "-q"], signed)[0] == 0 and stats(signed)["hits"] == ZOO_TARGETS
    # a reader with another secret refuses every one
    monkeypatch.setenv("TRIBUILD_CACHE_SECRET", "another secret")
    monkeypatch.setenv("TRIBUILD_REMOTE_WRITE", "0")
    other = clone("other")
    code, _, err = cli(["build", "-q"], other)
    assert code == 0 and "signature does not match" in err
    assert stats(other)["refused"] == ZOO_TARGETS + lists and snapshot(other) == zoo_reference


def test_a_forged_entry_never_reaches_an_output(remote_env, clone, cli, monkeypatch, zoo_reference):
    """Someone who can write to the server but has no secret puts a well-formed entry there,
    pointing at a module of their own: readers with the secret never write it."""
    monkeypatch.setenv("TRIBUILD_CACHE_SECRET", "team secret")
    cli(["build", "-q"], clone("first"))
    client = remote_env.client()
    evil = b"import os\nos.system('echo pwned')\n"
    evil_digest = entries.content_digest(evil)
    client.set(f"tribuild:cas:{evil_digest}", evil)
    for key in keys(remote_env, "ac"):
        body = json.loads(client.get(key).partition(b"\n")[2])
        body["files"] = [[rel, evil_digest] for rel, _ in body["files"]]
        text = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        client.set(key, entries.frame(key.decode(), text, b"a guessed secret"))
    second = clone("second")
    code, _, err = cli(["build", "-q"], second)
    assert code == 0 and "signature does not match" in err
    assert stats(second)["hits"] == 0 and snapshot(second) == zoo_reference


def test_read_only_and_write_only(remote_env, clone, cli, monkeypatch):
    monkeypatch.setenv("TRIBUILD_REMOTE_WRITE", "0")
    cli(["build", "-q"], clone("laptop"))
    assert keys(remote_env, "ac") == []
    monkeypatch.setenv("TRIBUILD_REMOTE_WRITE", "1")
    monkeypatch.setenv("TRIBUILD_REMOTE_READ", "0")
    cli(["build", "-q"], clone("ci"))
    assert len(keys(remote_env, "ac")) == ZOO_TARGETS
    ci2 = clone("ci2")
    cli(["build", "-q"], ci2)
    assert stats(ci2)["hits"] == 0


def test_remote_settings_from_tribuild_toml(redis_server, clone, cli, monkeypatch):
    monkeypatch.delenv("TRIBUILD_REMOTE_CACHE", raising=False)
    folder = clone("configured")
    toml = folder / "Tribuild.toml"
    toml.write_text(
        toml.read_text().replace(
            "[cache]\n", f'[cache]\nremote = "{redis_server.url}"\nremote_prefix = "team-a:"\n'
        )
    )
    assert cli(["build", "-q"], folder)[0] == 0
    assert len(redis_server.client().keys("team-a:ac:*")) == ZOO_TARGETS
    assert redis_server.client().keys("tribuild:*") == []
    # the variable takes precedence: set empty, it turns the remote off
    monkeypatch.setenv("TRIBUILD_REMOTE_CACHE", "")
    other = clone("other")
    other_toml = other / "Tribuild.toml"
    other_toml.write_text(toml.read_text())
    assert cli(["build", "-q"], other)[0] == 0
    assert not (other / ".tribuild-cache" / "remote-stats.json").exists()


PROBE = """\
import json, sys
from tribuild.cli import main
code = main(sys.argv[1:])
print(json.dumps([code, "redis" in sys.modules]))
"""


def test_a_no_op_neither_imports_redis_nor_contacts_the_server(remote_env, clone, cli):
    folder = clone("noop")
    assert cli(["build", "-q"], folder)[0] == 0
    before = remote_env.client().info("stats")["total_connections_received"]
    env = dict(os.environ, TRIBUILD_REMOTE_CACHE=remote_env.url)
    run = subprocess.run(
        [sys.executable, "-c", PROBE, "build"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert json.loads(run.stdout.splitlines()[-1]) == [0, False], run.stderr
    after = remote_env.client().info("stats")["total_connections_received"]
    assert after == before + 1  # this test's own client, nothing else


def test_remote_check(remote_env, clone, cli, monkeypatch):
    folder = clone("check")
    code, out, _ = cli(["cache", "remote-check"], folder)
    assert code == 0, out
    assert "ping: ok" in out and "write: ok" in out and "read: ok" in out
    assert "signing: off" in out
    monkeypatch.setenv("TRIBUILD_CACHE_SECRET", "s")
    code, out, _ = cli(["cache", "remote-check"], folder)
    assert code == 0 and "signing: ok" in out
    assert remote_env.client().keys("tribuild:check:*") == []  # the test key is deleted
    remote_env.stop()
    code, out, _ = cli(["cache", "remote-check"], folder)
    assert code == 1 and "ping: failed: ConnectionError" in out
    monkeypatch.setenv("TRIBUILD_REMOTE_CACHE", "")
    code, out, _ = cli(["cache", "remote-check"], folder)
    assert code == 1 and "no remote cache configured" in out


def _poison(remote_env, key: bytes, count: int) -> None:
    listed = json.dumps([f"models/missing{i}.tri" for i in range(count)]).encode()
    remote_env.client().set(key, entries.frame(key.decode(), listed, None))


def test_an_import_list_naming_100000_files_is_checked_not_followed(
    remote_env, clone, cli, zoo_reference
):
    """Well framed (no secret set), a list naming 100,000 missing files made a fresh clone
    read them all (12-35 s). A list longer than ``MAX_LISTED`` is checked against its file
    first, refused and replaced."""
    cli(["build", "-q"], clone("first"))
    client = remote_env.client()
    lists = {k: client.get(k) for k in keys(remote_env, "imp")}
    victim = next(k for k, v in lists.items() if b"resnet_blocks.tri" in v)
    _poison(remote_env, victim, 100_000)
    second = clone("second")
    code, _, err = cli(["build", "-q"], second)
    assert code == 0 and "it names 100000 files, not what the file imports" in err, err
    assert err.count("warning") == 1 and stats(second)["refused"] == 1
    assert snapshot(second) == zoo_reference
    assert client.get(victim) == lists[victim]


def test_a_list_naming_missing_files_is_corrected_though_no_target_imports_its_file(
    remote_env, clone, cli
):
    """A short list naming files that are not there is checked when they turn out missing,
    for every file of the scan: only the closures of built targets were corrected before."""
    first = clone("first")
    (first / "models" / "unused.tri").write_text('import "mlp.tri"\n')
    cli(["build", "-q"], first)
    client = remote_env.client()
    lists = {k: client.get(k) for k in keys(remote_env, "imp")}
    (victim,) = [k for k, v in lists.items() if v is not None and b'["models/mlp.tri"]' in v]
    _poison(remote_env, victim, 3)
    second = clone("second")
    (second / "models" / "unused.tri").write_text('import "mlp.tri"\n')
    code, _, err = cli(["build", "-q"], second)
    assert code == 0 and "it names 3 files, not what the file imports" in err, err
    assert client.get(victim) == lists[victim]
