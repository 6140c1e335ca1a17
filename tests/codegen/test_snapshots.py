"""Snapshots of generated sources (tests/fixtures/snapshots/<case>/<file>.txt, rewritten with
``TRIBUILD_UPDATE_GOLDEN=1``), determinism (fresh databases, other build orders: same bytes),
the quoting helper, and the compile path never importing torch or triton."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.codegen.harness import REPO, build
from tribuild.codegen.pyname import attr, ident, literal, member
from tribuild.driver.sources import load_sources, scan
from tribuild.engine import Database

SNAPSHOTS = REPO / "tests" / "fixtures" / "snapshots"
UPDATE = os.environ.get("TRIBUILD_UPDATE_GOLDEN") == "1"
# (case, entry, args, level)
CASES = [
    ("mnist_mlp-O0", "models/mlp.tri:MnistMLP", {}, "0"),
    ("lenet5-O2", "models/lenet.tri:LeNet5", {}, "2"),
    ("resnet18-O2", "models/resnet.tri:ResNet", {"blocks": [2, 2, 2, 2]}, "2"),
    ("bitnet_block-O3", "models/bitnet.tri:BitNetBlock", {}, "3"),
    (
        "bitnet_lm-O2",
        "models/bitnet_lm.tri:BitNetLM",
        {"vocab": 96, "dim": 64, "layers": 2, "heads": 4, "kv_heads": 2, "hidden": 160},
        "2",
    ),
]


@pytest.mark.parametrize("case,entry,args,level", CASES, ids=[c[0] for c in CASES])
def test_snapshot(case, entry, args, level):
    result = build(entry, args, level, name=case.split("-")[0])
    folder = SNAPSHOTS / case
    files = {f.relpath + ".txt": f.text for f in result.files}
    if UPDATE:
        for old in folder.rglob("*.txt"):
            old.unlink()
        for rel, text in files.items():
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(text)
    stored = {str(p.relative_to(folder)): p.read_text() for p in folder.rglob("*.txt")}
    assert sorted(stored) == sorted(files)
    for rel, text in files.items():
        assert text == stored[rel], f"{case}/{rel} differs from its snapshot"


def test_generation_is_deterministic_across_databases_and_orders():
    first = [build(e, a, lvl) for _, e, a, lvl in CASES]
    db = Database()
    load_sources(db, str(REPO), scan(str(REPO), ("models",)))
    again = [build(e, a, lvl, db=db) for _, e, a, lvl in reversed(CASES)][::-1]
    assert first == again
    assert all(r.files for r in first)


def test_the_quoting_helper():
    assert ident("x") == "x" and ident("class") == "class_" and ident("torch") == "torch_"
    assert attr("self", "conv1") == "self.conv1"
    assert attr("self", "lambda") == 'getattr(self, "lambda")'
    assert member(("layer1", 0, "if")) == 'getattr(self.layer1[0], "if")'
    assert literal("a'b\"c") == repr("a'b\"c") and literal("relu") == '"relu"'
    assert literal((1, 2.5, True)) == "(1, 2.5, True)" and literal((3,)) == "(3,)"
    assert literal(float("inf")) == "float('inf')"
    with pytest.raises(ValueError):
        ident("not an identifier")


def test_python_keywords_as_names_generate_valid_code(tmp_path):
    (tmp_path / "m.tri").write_text("""
layer Block(c: int = 4) {
    let lambda = TernaryLinear(c, c)
    let torch = ReLU()
    fn forward(x: Tensor<float32, [N, c]>) -> Tensor<float32, [N, c]> {
        let class = lambda(x)
        return torch(class) + x
    }
}
""")
    db = Database()
    load_sources(db, str(tmp_path), ("m.tri",))
    for level in "02":
        text = build("m.tri:Block", {}, level, db=db).files[0].text
        compile(text, "model.py", "exec")
        assert 'getattr(self, "lambda")' in text and "self.torch" in text


def test_the_compile_path_imports_neither_torch_nor_triton():
    code = (
        "import sys; from tests.codegen.harness import build; "
        "build('models/resnet.tri:ResNet', {}, '3'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
