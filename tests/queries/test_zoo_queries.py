"""The zoo through the query layer: clean, persistent, and incremental == clean under edits."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.budget import examples
from tests.queries.zoo import REPO, check_all, copy_zoo
from tribuild.config.load import load_config
from tribuild.driver.session import salt
from tribuild.engine import Database

TARGETS = load_config(REPO / "Tribuild.toml").targets


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    return copy_zoo(tmp_path_factory.mktemp("zoo"))


def test_every_zoo_file_and_target_checks_clean(zoo):
    results = check_all(Database(), zoo, TARGETS)
    for name, value in results.items():
        diags = value.diagnostics if hasattr(value, "diagnostics") else value
        assert diags == (), name
        assert getattr(value, "problem", None) is None, name


def test_a_fresh_process_reuses_everything(zoo, tmp_path):
    db = Database()
    first = check_all(db, zoo, TARGETS)
    report = db.save(tmp_path, salt())
    assert report.unencodable == {} and report.dropped_keys == 0
    loaded = Database.load(tmp_path, salt())
    with loaded.log() as log:
        again = check_all(loaded, zoo, TARGETS)
    assert again == first
    assert log.executed == []


def test_one_edit_after_load_runs_only_that_file(zoo, tmp_path):
    db = Database()
    check_all(db, zoo, TARGETS)
    db.save(tmp_path, salt())
    loaded = Database.load(tmp_path, salt())
    path = zoo / "models" / "lenet.tri"
    original = path.read_text()
    try:
        path.write_text(original.replace("\nlayer", "\n# a comment\nlayer", 1))
        with loaded.log() as log:
            check_all(loaded, zoo, TARGETS)
    finally:
        path.write_text(original)
    assert {name for name, _ in log.executed} <= {
        "read_error",
        "chunks",
        "chunk_text",
        "chunk_lexed",
        "item_places",
        "item_index",
        "item_tokens",
    }
    assert {args[0] for _, args in log.executed} == {"models/lenet.tri"}


# -- incremental == clean, under random edit sequences -------------------------------------

EDITS = ("comment", "delete_token", "duplicate_line", "swap_relu", "revert")


def _edit(text: str, original: str, kind: str, rnd: random.Random) -> str:
    lines = text.split("\n")
    at = rnd.randrange(len(lines))
    if kind == "comment":
        lines.insert(at, "# edited")
    elif kind == "delete_token":
        words = lines[at].split(" ")
        if len(words) > 1:
            del words[rnd.randrange(len(words))]
        lines[at] = " ".join(words)
    elif kind == "duplicate_line":
        lines.insert(at, lines[at])
    elif kind == "swap_relu":
        return (
            text.replace("relu(", "gelu(", 1)
            if "relu(" in text
            else text.replace("gelu(", "relu(", 1)
        )
    else:
        return original
    return "\n".join(lines)


@settings(
    max_examples=examples(6),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    st.lists(
        st.tuples(st.integers(0, 10_000), st.sampled_from(EDITS), st.integers(0, 2**16)),
        min_size=1,
        max_size=3,
    )
)
def test_incremental_equals_clean(zoo, edits):
    files = sorted((zoo / "models").rglob("*.tri"))
    originals = {f: f.read_text() for f in files}
    db = Database()
    check_all(db, zoo, TARGETS)
    try:
        for pick, kind, seed in edits:
            path = files[pick % len(files)]
            path.write_text(_edit(path.read_text(), originals[path], kind, random.Random(seed)))
            assert check_all(db, zoo, TARGETS) == check_all(Database(), zoo, TARGETS)
    finally:
        for f, text in originals.items():
            f.write_text(text)
