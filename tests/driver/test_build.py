"""`tribuild build` against the stand-in code generator: outputs, depfiles, the record of
what was written, stale outputs, failures and exit codes."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
from pathlib import Path

import pytest

import tribuild
from tests.driver.conftest import mtimes, snapshot
from tribuild.driver import outputs

FIXTURES = Path(__file__).parent / "fixtures"


def test_clean_build_writes_modules_kernels_and_depfiles(mini, cli):
    code, _, err = cli(["build"], mini)
    assert code == 0, err
    files = snapshot(mini / "out")
    assert {"net.py", "wide.py", "mlp.py", "twin.py", "net.d", "mlp.d"} <= set(files)
    assert files["net.d"].decode() == (
        "out/net.py: \\\n models/lib/blocks.tri \\\n models/net.tri \\\n Tribuild.toml\n"
    )
    assert files["mlp.d"].decode() == "out/mlp.py: \\\n models/mlp.tri \\\n Tribuild.toml\n"
    kernels = {Path(f).stem for f in files if f.startswith("kernels/")}
    used = {
        t: set(re.findall(r'"(linear_\w+)"', files[f"{t}.py"].decode()))
        for t in ("net", "wide", "mlp", "twin")
    }
    assert set.union(*used.values()) == kernels and len(kernels) == 5
    assert used["net"] == used["twin"] and not used["net"] & used["wide"]
    assert "built 4 targets: 13 written, 0 unchanged" in err
    assert oct(os.stat(mini / "out" / "net.py").st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_second_build_is_a_no_op_and_touch_rebuilds_nothing(mini, cli):
    cli(["build"], mini)
    before = mtimes(mini / "out")
    code, _, err = cli(["build"], mini)
    assert (code, err) == (0, "tribuild: no work to do\n")
    os.utime(mini / "models" / "net.tri", ns=(1, 1))  # a branch switch: same bytes
    code, _, err = cli(["build"], mini)
    assert (code, err) == (0, "tribuild: no work to do\n")
    assert mtimes(mini / "out") == before


def test_comment_edit_writes_nothing_body_edit_rewrites_its_users(mini, cli):
    cli(["build"], mini)
    before = snapshot(mini / "out")
    blocks = mini / "models" / "lib" / "blocks.tri"
    blocks.write_text("# a new comment\n" + blocks.read_text())
    code, _, err = cli(["build"], mini)
    assert code == 0 and "0 written, 13 unchanged" in err
    assert snapshot(mini / "out") == before
    stamps = mtimes(mini / "out")
    blocks.write_text(blocks.read_text().replace("return relu(fc(x))", "return fc(x)"))
    code, _, err = cli(["build", "--explain"], mini)
    after = mtimes(mini / "out")
    changed = {f for f in after if after[f] != stamps.get(f)}
    assert code == 0
    assert {"net.py", "wide.py", "twin.py"} <= changed
    assert not {"mlp.py", "mlp.d", "net.d"} & changed
    assert not [f for f in changed if f.startswith("kernels/linear_16x784_")]
    assert "net.py: written\n  target net:\n    the files of target `net` [target_build]" in err
    assert "[source_text]" in err
    assert "no build this cache remembers" not in err
    toml = mini / "Tribuild.toml"
    toml.write_text(toml.read_text().replace("args = { width = 48 }", "args = { width = 40 }"))
    code, _, err = cli(["build", "--explain"], mini)
    assert code == 0 and "wide.py: written\n  target wide:\n    the files of target `wide`" in err
    assert (
        "because it had never run\n    (no build this cache remembers made this target "
        "with this entry, args, input shape and -O level" in err
    )


def test_signature_edit_rewrites_only_the_targets_that_use_it(mini, cli):
    cli(["build"], mini)
    before = mtimes(mini / "out")
    net = mini / "models" / "net.tri"
    net.write_text(net.read_text().replace("width: int = 32", "width: int = 24"))
    code, _, err = cli(["build"], mini)
    after = mtimes(mini / "out")
    changed = {f for f in after if after[f] != before.get(f)}
    assert code == 0
    assert "net.py" in changed and "net.d" not in changed
    assert not {"twin.py", "mlp.py", "wide.py"} & changed  # twin pins width=32


def test_removed_target_outputs_are_deleted_but_edited_ones_kept(mini, cli):
    cli(["build"], mini)
    toml = mini / "Tribuild.toml"
    text = toml.read_text()
    toml.write_text(text[: text.index("[targets.mlp]")] + text[text.index("# The same") :])
    (mini / "out" / "wide.py").write_text("# edited by hand\n")
    mine = mini / "out" / "notes.txt"
    mine.write_text("not tribuild's")
    toml.write_text(toml.read_text().replace("[targets.wide]", "[targets.wider]"))
    code, _, err = cli(["build"], mini)
    files = snapshot(mini / "out")
    assert code == 0
    assert "mlp.py" not in files and "mlp.d" not in files and "wide.d" not in files
    assert files["wide.py"] == b"# edited by hand\n" and mine.exists()
    assert "1 stale kept" in err
    assert "kept out/wide.py: no target makes it any more, but it was edited" in err


def test_a_failing_target_keeps_its_outputs_and_others_build(mini, cli):
    cli(["build"], mini)
    mlp = mini / "models" / "mlp.tri"
    old = (mini / "out" / "mlp.py").read_bytes()
    mlp.write_text(mlp.read_text().replace("fc2(relu(fc1(x)))", "fc2(relu(fc1(y)))"))
    net = mini / "models" / "net.tri"
    net.write_text(net.read_text().replace("width: int = 32", "width: int = 20"))
    code, _, err = cli(["build"], mini)
    assert code == 1
    assert "mlp.tri:" in err and "build failed: 1 of 4 targets failed (mlp)" in err
    assert (mini / "out" / "mlp.py").read_bytes() == old
    assert b"width=20" in (mini / "out" / "net.py").read_bytes()
    code, _, err = cli(["build"], mini)  # no manifest after a failure
    assert code == 1 and "no work to do" not in err


def test_only_the_first_failure_is_shown_unless_keep_going(mini, cli):
    for name in ("mlp.tri", "net.tri"):
        path = mini / "models" / name
        path.write_text(path.read_text().replace("(x)))", "(y)))"))
    code, _, err = cli(["build", "-q"], mini)
    assert code == 1 and "also failed: wide, mlp, twin (--keep-going" in err
    assert err.count("error[") == 1
    code, _, err = cli(["build", "-q", "--keep-going"], mini)
    assert code == 1 and err.count("error[") == 2  # each once: net.tri's serves 3 targets


def test_selected_targets_and_usage_errors(mini, cli):
    code, _, err = cli(["build", "mlp"], mini)
    files = sorted(snapshot(mini / "out"))
    assert code == 0 and len(files) == 4 and files[1].startswith("kernels/linear_16x784_")
    assert [files[0]] + files[2:] == [".tribuild-outputs.json", "mlp.d", "mlp.py"]
    code, _, err = cli(["build", "nope"], mini)
    assert code == 2 and "no target named `nope`" in err and "net, wide, mlp, twin" in err
    for bad in ("-1", "two", "1.5"):
        code, _, err = cli(["build", "--jobs", bad], mini)
        assert code == 2 and f"expected a number of processes (0 = one per CPU), got '{bad}'" in err
    (mini / "Tribuild.toml").unlink()
    code, _, err = cli(["build"], mini)
    assert code == 2 and "no Tribuild.toml" in err


def test_a_target_that_cannot_be_built_is_a_configuration_error(mini, cli):
    toml = mini / "Tribuild.toml"
    toml.write_text(toml.read_text().replace("models/mlp.tri:MLP", "models/mlp.tri:Nope"))
    code, _, err = cli(["build"], mini)
    assert code == 2 and "Tribuild.toml:" in err and "defines no layer `Nope`" in err


def test_targets_that_cannot_be_built_are_all_named_and_stop_no_other(mini, cli):
    """Each is a configuration error at its line (exit 2, no manifest); the other targets
    are built and written all the same."""
    cli(["build", "-q"], mini)
    toml = mini / "Tribuild.toml"
    text = toml.read_text().replace("models/mlp.tri:MLP", "models/mlp.tri:Nope")
    toml.write_text(text.replace("args = { width = 48 }", "args = { width = 48, depth = 2 }"))
    blocks = mini / "models" / "lib" / "blocks.tri"
    blocks.write_text(blocks.read_text().replace("return relu(fc(x))", "return fc(x)"))
    before = snapshot(mini / "out")
    for args in (["build"], ["build", "-j", "2"], ["check"]):
        code, _, err = cli(args, mini)
        assert code == 2 and "target `mlp` cannot be built" in err, (args, err)
        assert "target `wide` cannot be built: cannot instantiate" in err, (args, err)
    after = snapshot(mini / "out")
    assert after["net.py"] != before["net.py"] and after["twin.py"] != before["twin.py"]
    assert after["mlp.py"] == before["mlp.py"] and after["wide.py"] == before["wide.py"]
    assert "no work to do" not in cli(["build"], mini)[2]


def test_query_stage_shares_are_of_their_summed_time():
    """With workers the stages' own time, summed over the processes, exceeds the wall
    time; each stage's share is of that sum, so the shares add up to 100%."""
    from tribuild.driver.timing import Report

    stages = {"check": (3.0, 10, 0, 5), "parse": (1.0, 4, 0, 0)}
    report = Report(1.0, {"build units": 0.9}, stages, [], None, None)
    text = report.text()
    assert "query stages (own time, 4.000s in all processes; share of that" in text
    shares = dict(re.findall(r"^  (check|parse) +[0-9.]+s +([0-9.]+)%", text, re.M))
    assert shares == {"check": "75.0", "parse": "25.0"}


def test_stop_after_and_dumps_write_nothing(mini, cli):
    code, out, err = cli(["build", "--stop-after", "check"], mini)
    assert code == 0 and not (mini / "out").exists()
    code, out, _ = cli(["build", "--dump-code", "net"], mini)
    assert code == 0 and '# ==> net.py <==\n"""Target net.' in out
    code, out, _ = cli(["build", "--dump-ast", "mlp"], mini)
    assert code == 0 and "# ==> models/mlp.tri:MLP <==\nLayer(name='MLP'" in out
    code, out, err = cli(["build", "-O3", "--timing"], mini)
    assert code == 0 and "at -O3" in (mini / "out" / "net.py").read_text()
    assert "query stages" in err and "slowest units" in err
    assert "resident this process" in err and "traced peak" not in err
    code, _, err = cli(["build", "--trace-memory"], mini)
    assert code == 0 and "query stages" in err and "traced peak" in err


def test_paths_outside_the_output_folder_are_refused(tmp_path):
    for bad in ("../x.py", "/etc/x", "a/../../x", "", "."):
        try:
            outputs.resolve(str(tmp_path), bad)
        except outputs.OutsideOutput:
            continue
        raise AssertionError(bad)
    assert outputs.resolve(str(tmp_path), "k/a.py") == str(tmp_path / "k" / "a.py")


def test_write_if_changed_leaves_equal_files_alone(tmp_path):
    path = str(tmp_path / "a" / "f.py")
    assert outputs.write_if_changed(path, b"x") is True
    os.utime(path, ns=(5, 5))
    assert outputs.write_if_changed(path, b"x") is False and os.stat(path).st_mtime_ns == 5
    assert outputs.write_if_changed(path, b"y") is True and Path(path).read_bytes() == b"y"
    assert not [p for p in os.listdir(tmp_path / "a") if p.endswith(".tmp")]


def test_a_forked_child_writes_with_its_own_fsync_threads(tmp_path):
    """The fsync threads are kept per process; a forked child (a build worker) must not wait
    on its copy of its parent's, which has no threads."""
    outputs.write_changed({str(tmp_path / f"p{i}"): b"parent" for i in range(3)})
    pid = os.fork()
    if pid == 0:
        signal.alarm(60)  # a child waiting on no thread would hang
        try:
            written = outputs.write_changed({str(tmp_path / f"c{i}"): b"c" for i in range(3)})
            os._exit(0 if len(written) == 3 else 1)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert [(tmp_path / f"c{i}").read_bytes() for i in range(3)] == [b"c"] * 3


def test_write_syncs_each_file_before_its_rename_and_each_folder_after(tmp_path, monkeypatch):
    """Durability without ``os.sync``: every temporary file is fsynced before any rename, and
    every folder that received a file is fsynced after its last rename; nothing else is."""
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(
        os,
        "fsync",
        lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))), real_fsync(fd))[
            1
        ],
    )
    monkeypatch.setattr(
        os,
        "replace",
        lambda src, dst: (events.append(("replace", src, dst)), real_replace(src, dst))[1],
    )
    monkeypatch.setattr(os, "sync", lambda: events.append(("sync",)))
    outputs.write_changed({str(tmp_path / "same.py"): b"x"})
    events.clear()
    files = {
        str(tmp_path / name): name.encode()
        for name in ("same.py", "a.py", "k/b.py", "k/c.py", "k/d/e.py")
    }
    files[str(tmp_path / "same.py")] = b"x"
    assert outputs.write_changed(files) == sorted(set(files) - {str(tmp_path / "same.py")})
    synced = [e[1] for e in events if e[0] == "fsync"]
    renames = [e for e in events if e[0] == "replace"]
    first_rename = events.index(renames[0])
    assert sorted(synced[: len(renames)]) == sorted(src for _, src, _ in renames)
    assert all(e[0] == "fsync" for e in events[:first_rename])
    folders = {str(tmp_path), str(tmp_path / "k"), str(tmp_path / "k" / "d")}
    assert sorted(synced[len(renames) :]) == sorted(folders)
    assert all(e[0] == "fsync" for e in events[events.index(renames[-1]) + 1 :])
    assert ("sync",) not in events and len(synced) == len(renames) + len(folders)


def test_the_record_is_written_with_the_outputs_and_renamed_last(tmp_path, monkeypatch):
    """One batch: a crash between two renames never leaves a record that claims a file
    which still holds its previous bytes (the next build would keep it as not tribuild's)."""
    renamed = []
    real_replace = os.replace
    monkeypatch.setattr(
        os,
        "replace",
        lambda src, dst: (renamed.append(os.path.relpath(dst, tmp_path)), real_replace(src, dst))[
            1
        ],
    )
    files = {".a.py": b"a", "b.py": b"b", "kernels/k.py": b"k"}
    record = outputs.Record()
    report = outputs.write_outputs(str(tmp_path), files, record, {"t": tuple(files)}, {"t"})
    assert renamed == [".a.py", "b.py", "kernels/k.py", outputs.RECORD]
    assert sorted(report.written) == sorted(files)
    assert outputs.Record.load(str(tmp_path)).targets == record.targets
    renamed.clear()
    outputs.write_outputs(
        str(tmp_path), files, outputs.Record.load(str(tmp_path)), {"t": tuple(files)}, {"t"}
    )
    assert renamed == []


def test_stale_files_are_deleted_after_the_new_outputs_are_visible(tmp_path, monkeypatch):
    """Issue 37: an unlink of a just-written file costs ~3.5 ms on ext4, and a body edit in
    `watch` deleted seven stale kernels before writing its module (~25 ms of its latency).
    Stale files are now moved aside (renamed, while the old record still lists them) and
    deleted after the new outputs and the record are in place; none is left behind."""
    out = str(tmp_path)
    old = {"m.py": b"m1", "kernels/k1.py": b"k1", "kernels/gone.py": b"g"}
    outputs.write_outputs(out, old, outputs.Record(), {"t": tuple(old)}, {"t"})
    events: list[str] = []
    real_replace, real_unlink = os.replace, os.unlink

    def replace(src, dst):
        events.append(f"replace {os.path.relpath(dst, out)}")
        return real_replace(src, dst)

    def unlink(path):
        events.append(f"unlink {os.path.basename(path)}")
        return real_unlink(path)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "unlink", unlink)
    new = {"m.py": b"m2", "kernels/k2.py": b"k2"}
    report = outputs.write_outputs(out, new, outputs.Record.load(out), {"t": tuple(new)}, {"t"})
    monkeypatch.undo()
    assert report.removed == ("kernels/gone.py", "kernels/k1.py")
    writes = [e for e in events if e.startswith("replace")]
    assert writes == ["replace kernels/k2.py", "replace m.py", f"replace {outputs.RECORD}"]
    deletes = [i for i, e in enumerate(events) if e.startswith("unlink .tribuild-stale.")]
    assert len(deletes) == 2 and min(deletes) > events.index(f"replace {outputs.RECORD}")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        outputs.RECORD,
        "kernels",
        "kernels/k2.py",
        "m.py",
    ]


def test_stale_files_a_killed_build_moved_aside_are_swept(tmp_path):
    """Killed between moving stale files aside and deleting them, a build leaves
    ``.tribuild-stale.XXXXXXXX.tmp`` in the output folder: the next build deletes them, as
    `clean` does; a temporary file of a name tribuild does not write is the user's."""
    out = str(tmp_path)
    files = {"m.py": b"m"}
    outputs.write_outputs(out, files, outputs.Record(), {"t": tuple(files)}, {"t"})
    litter, mine = tmp_path / ".tribuild-stale.a1b2c3d4.tmp", tmp_path / ".notes.abcdefgh.tmp"
    for path in (litter, mine):
        path.write_bytes(b"old kernel")
    outputs.write_outputs(out, files, outputs.Record.load(out), {"t": tuple(files)}, {"t"})
    assert not litter.exists() and mine.exists()
    litter.write_bytes(b"old kernel")
    outputs.clean(out)
    assert not litter.exists() and mine.exists()


def test_a_target_prints_its_diagnostics_in_the_order_check_does(tmp_path, cli):
    """By position, as `check` prints them. The target (A with c = 3) fails on its own
    instance's error only (line 2, column 24: 6 / 0); `check` also reports the default
    instance A(c = 2) (line 2, column 14) and B's generic error (line 11), which are no part
    of the target, so they do not fail it."""
    shutil.copy(FIXTURES / "order.tri", tmp_path / "m.tri")
    (tmp_path / "Tribuild.toml").write_text(
        '[project]\nname = "o"\nsources = ["."]\n\n'
        '[targets.t]\nentry = "m.tri:A"\nargs = { c = 3 }\n'
    )
    firsts = [
        line.split(": error")[0]
        for line in cli(["build", "-q"], tmp_path)[2].splitlines()
        if line.startswith("m.tri:")
    ]
    assert firsts == ["m.tri:2:24"]
    checked = [
        line.split(": error")[0]
        for line in cli(["check"], tmp_path)[2].splitlines()
        if line.startswith("m.tri:")
    ]
    assert checked == ["m.tri:2:14", "m.tri:2:24", "m.tri:11:16"]


def test_an_output_or_cache_folder_that_is_a_file_is_named_with_what_to_do(mini, cli):
    (mini / "out").write_text("not a folder")
    code, _, err = cli(["build", "-q"], mini)
    assert code == 2 and "out: error: the output folder is a file" in err  # relative
    (mini / "out").unlink()
    shutil.rmtree(mini / ".tribuild-cache")
    (mini / ".tribuild-cache").write_text("not a folder")
    for args in (["build"], ["cache", "stats"]):
        code, _, err = cli(args, mini)
        assert (
            code == 2
            and "tribuild: error: the cache folder is a file (or a link to "
            "nothing): move it away, or set [cache] dir in Tribuild.toml"
            in err
        ), args


def test_jobs_0_means_one_process_per_cpu_as_in_tribuild_toml(mini):
    """``--jobs 0`` and ``jobs=0`` mean what ``jobs = 0`` in Tribuild.toml means."""
    from tribuild.cli import parser

    assert parser().parse_args(["build", "-j", "0"]).jobs == (os.cpu_count() or 1)
    assert parser().parse_args(["build", "--jobs", "3"]).jobs == 3
    result = tribuild.build(str(mini), jobs=0, timing=True)
    assert not result.failed
    jobs = os.cpu_count() or 1
    expected = "workers: none" if jobs == 1 else f"for {jobs} jobs (--jobs)"
    assert expected in result.timing.workers


def test_files_written_early_are_journaled_before_their_rename(tmp_path, monkeypatch):
    """The early journal names each file with its digest and is synced before the first
    rename; a later record takes what it lists as tribuild's (stale if no target makes
    it), and writing that record deletes the journal."""
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(
        os,
        "fsync",
        lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))), real_fsync(fd))[
            1
        ],
    )
    monkeypatch.setattr(
        os, "replace", lambda src, dst: (events.append(("replace", dst)), real_replace(src, dst))[1]
    )
    out = tmp_path / "out"
    files = {str(out / "t.py"): b"t", str(out / "kernels" / "k.py"): b"k"}
    outputs.write_changed(files, early=str(out))
    journal = str(out / outputs.EARLY)
    first_rename = next(i for i, e in enumerate(events) if e[0] == "replace")
    assert ("fsync", journal) in events[:first_rename]
    record = outputs.Record.load(str(out))
    assert record.targets == {} and record.early == {
        "t.py": outputs.digest(b"t"),
        os.path.join("kernels", "k.py"): outputs.digest(b"k"),
    }
    (out / "t.py").write_text("edited by hand")
    report = outputs.write_outputs(str(out), {}, record, {}, set())
    assert report.removed == (os.path.join("kernels", "k.py"),) and report.kept == ("t.py",)
    assert not os.path.exists(journal) and outputs.Record.load(str(out)).owned() == {}


@pytest.mark.parametrize("damage", ["", "cut", "crafted"])
def test_an_early_journal_is_read_whole_or_line_by_line(tmp_path, damage):
    """Whole lines are read as they were written; a last line a crash cut short, and lines
    naming a path outside the output folder or not of the journal's shape, are skipped."""
    good = {f"t{i}/f.py": outputs.digest(str(i).encode()) for i in range(3)}
    lines = [json.dumps([rel, d]) for rel, d in good.items()]
    if damage == "cut":
        lines.append(json.dumps(["t9/f.py", "ab"])[:-4])
    elif damage == "crafted":
        lines[1:1] = [json.dumps(["../outside.py", "ab"]), json.dumps({"a": 1}), "[1, 2]"]
    (tmp_path / outputs.EARLY).write_text("\n".join(lines) + "\n")
    assert outputs.Record.load(str(tmp_path)).early == good


@pytest.mark.parametrize("out", ["out", "out/", "./out", "ABS"])
def test_the_early_journal_names_files_relative_to_the_output_folder(tmp_path, monkeypatch, out):
    """However the output folder is spelled, the journal lists what ``os.path.relpath``
    would give (it takes the rest of each path instead of calling it)."""
    monkeypatch.chdir(tmp_path)
    out = str(tmp_path / "out") if out == "ABS" else out
    rels = ["t.py", "kernels/k.py", "a/./b/../c.py"]
    files = {outputs.resolve(out, rel): rel.encode() for rel in rels}
    outputs.write_changed(files, early=out)
    assert outputs.Record.load(out).early == {
        os.path.relpath(full, out): outputs.digest(data) for full, data in files.items()
    }


def test_a_parallel_build_killed_before_its_record_leaves_nothing_for_good(mini, cli, monkeypatch):
    """The workers and this process write their targets' files as they are built; killed
    before the record, the build leaves them journaled, so the next build deletes those of
    a target it no longer has, and ``clean`` deletes everything."""
    from tribuild.driver import build as driver

    def killed(project, result, force=False):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch, pytest.raises(KeyboardInterrupt):
        patch.setattr(driver, "write_result", killed)
        cli(["build", "--jobs", "2"], mini)
    assert (mini / "out" / "mlp.py").exists() and not (mini / "out" / outputs.RECORD).exists()
    toml = mini / "Tribuild.toml"
    text = toml.read_text()
    toml.write_text(text[: text.index("[targets.mlp]")] + text[text.index("# The same") :])
    code, _, err = cli(["build"], mini)
    files = snapshot(mini / "out")
    assert code == 0 and "mlp.py" not in files and "mlp.d" not in files
    assert outputs.EARLY not in files
    code, _, err = cli(["clean"], mini)
    assert code == 0 and not (mini / "out").exists()


def test_an_error_in_a_layer_no_target_reaches_fails_check_not_the_build(mini, cli):
    """A target fails only when an item it reaches has an error: a broken layer beside the
    ones it uses, in the same file, is `check`'s to report."""
    blocks = mini / "models" / "lib" / "blocks.tri"
    blocks.write_text(
        blocks.read_text() + "\nlayer Unused(c: int) {\n    let fc = Linear(c, c)\n"
        "    fn forward(x: Tensor<float32, [N, c]>) -> Tensor<float32, [N, c]> {\n"
        "        return rleu(fc(x))\n    }\n}\n"
    )
    code, _, err = cli(["build"], mini)
    assert code == 0 and "error[" not in err, err
    code, _, err = cli(["check"], mini)
    assert code == 1 and err.count("error[E0307]") == 1, err
    blocks.write_text(blocks.read_text().replace("return relu(fc(x))", "return relu(fc(y))"))
    code, _, err = cli(["build", "--keep-going"], mini)  # Dense is reached by 3 targets
    assert code == 1 and "3 of 4 targets failed (net, wide, twin)" in err, err
    assert err.count("error[E0307]: unknown name `y`") == 1 and "rleu" not in err, err
