"""Names in generated modules: members named like ``nn.Module`` attributes are renamed
(``m_<name>``) and keep working; locals, parameters, classes and fns named like what the
module uses are quoted; no layer, file or target name can inject code."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tests.codegen.harness import build, write_and_import  # noqa: E402
from tribuild.codegen.pyname import MODULE_ATTRS, docstring, member_names  # noqa: E402
from tribuild.driver.sources import load_sources  # noqa: E402
from tribuild.engine import Database  # noqa: E402
from tribuild.queries.inputs import SourceText, source_text  # noqa: E402
from tribuild.runtime import model as gpu_model  # noqa: E402
from tribuild.runtime.launch import force_backend  # noqa: E402

CLASHING = (
    "training",
    "forward",
    "eval",
    "state_dict",
    "to",
    "cuda",
    "modules",
    "__init__",
    "_parameters",
    "from_float",
    "ARGS",
)
SRC = """
fn nn(x: Tensor<float32, [N, 4]>) -> Tensor<float32, [N, 4]> {
    let F = relu(x)
    return F * 2.0
}
fn build(x: Tensor<float32, [N, 4]>, self: Tensor<float32, [N, 4]>) -> Tensor<float32, [N, 4]> {
    let a = x + self; let b = a * a; let c = b - a; let d = c * c; let e = d + b; let f = e * 0.5
    let g = f + a; let h = g * g; let i = h - g; let j = i * 0.25; let k = j + x
    return k
}
layer F() {
    let training = TernaryLinear(4, 4)
    let m_training = TernaryLinear(4, 4)
    let forward = TernaryLinear(4, 4)
    let eval = TernaryLinear(4, 4, bias=true)
    let state_dict = LayerNorm(4)
    let to = TernaryLinear(4, 4)
    let cuda = [TernaryLinear(4, 4), TernaryLinear(4, 4)]
    let modules = Sequential([TernaryLinear(4, 4), ReLU()])
    let __init__ = TernaryLinear(4, 4)
    let _parameters = TernaryLinear(4, 4)
    let from_float = TernaryLinear(4, 4)
    let ARGS = TernaryLinear(4, 4)
    let self = TernaryLinear(4, 4)
    let lambda = TernaryLinear(4, 4)
    fn forward(x: Tensor<float32, [N, 4]>) -> Tensor<float32, [N, 4]> {
        let torch = training(x) + m_training(x)
        let F = forward(torch) + eval(torch)
        let Model = state_dict(to(F)) + cuda[0](F) + cuda[1](F)
        let class = modules(Model) + __init__(Model) + _parameters(Model) + from_float(Model)
        let K = ARGS(class)
        let model = self(K) + lambda(K)
        return build(nn(model), x)
    }
}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("names")
    (root / "m.tri").write_text(SRC)
    db = Database()
    load_sources(db, str(root), ("m.tri",))
    return root, db


def test_module_attrs_cover_the_installed_torch():
    attrs = set(dir(torch.nn.Module)) | set(vars(torch.nn.Module())) | set(dir(gpu_model.Module))
    assert {a for a in attrs if not a.startswith("__")} <= MODULE_ATTRS


def test_member_names_rule():
    names = member_names(
        ("training", "m_training", "conv", "__x", "forward", "m_forward", "m_m_forward")
    )
    assert names == {
        "training": "m_m_training",
        "m_training": "m_training",
        "conv": "conv",
        "__x": "m___x",
        "forward": "m_m_m_forward",
        "m_forward": "m_forward",
        "m_m_forward": "m_m_forward",
    }


@pytest.mark.parametrize("level", "02")
def test_clashing_names_build_a_working_module(project, level, tmp_path):
    root, db = project
    gen = write_and_import(build("m.tri:F", {}, level, db=db), tmp_path)
    m = gen.build()
    keys = {k.split(".")[0] for k in m.state_dict()}
    assert {
        "m_m_training",
        "m_training",
        "m_forward",
        "m_eval",
        "m_state_dict",
        "m_to",
        "m_cuda",
        "m_modules",
        "m___init__",
        "m__parameters",
        "m_from_float",
        "m_ARGS",
        "self",
        "lambda",
    } == keys
    torch.manual_seed(0)
    state = {
        k: torch.randn(v.shape[0], 4)
        if k.endswith("weight") and v.dtype == torch.uint8
        else v.float()
        for k, v in m.state_dict().items()
        if not k.endswith("_scale") and "latent_" not in k  # the packed form's keys
    }
    model = gen.Model.from_float(state)
    assert model.train() is model and model.training and not model.eval().training  # not hijacked
    assert isinstance(model.m_training, torch.nn.Module) and len(list(model.modules())) > 10
    x = torch.randn(3, 4)
    with torch.no_grad(), force_backend("torch"):
        y = model(x)
        assert y.shape == (3, 4) and torch.isfinite(y).all()
        assert torch.equal(gen.build().eval().__class__.from_float(state).eval()(x), y)


def test_levels_agree_on_clashing_names(project, tmp_path):
    root, db = project
    mods = [write_and_import(build("m.tri:F", {}, lv, db=db), tmp_path / f"O{lv}") for lv in "02"]
    torch.manual_seed(1)
    state = {
        k: torch.randn(v.shape[0], 4) if v.dtype == torch.uint8 else v.float() + 0.1
        for k, v in mods[0].build().state_dict().items()
        if not k.endswith("_scale") and "latent_" not in k  # the packed form's keys
    }
    x = torch.randn(2, 4)
    with torch.no_grad(), force_backend("torch"):
        a, b = (m.Model.from_float(state).eval()(x) for m in mods)
    torch.testing.assert_close(a, b)


INJECTIONS = [
    'x"""; import os; os.system("echo pwned") #',
    "a\\",
    'b"',
    "c\\\"\"\"\nraise SystemExit(3)\n#",
]


@pytest.mark.parametrize("text", INJECTIONS)
def test_docstrings_cannot_be_closed_early(text):
    namespace: dict = {}
    exec(compile(f"X = {docstring(text)}\n", "t.py", "exec"), namespace)
    assert namespace["X"] == text and set(namespace) == {"X", "__builtins__"}


def test_a_crafted_file_name_and_target_name_stay_inside_the_docstrings(tmp_path):
    # the driver refuses such a file name when it reads the file (quotes, `;`, `(` and
    # backslashes cannot be named in a depfile: tests/driver/test_depfile_names.py); the
    # docstrings hold against it anyway, set here as the text of a source of that name
    name = 'evil\\"""; import sys; sys.exit(7); """'
    db = Database()
    db.set(
        source_text,
        f"{name}.tri",
        SourceText(
            "layer L() { let fc = TernaryLinear(2, 2)\n"
            "fn forward(x: Tensor<float32, [N, 2]>) -> Tensor<float32, [N, 2]> "
            "{ return fc(x) } }\n"
        ),
    )
    gen = write_and_import(
        build(f"{name}.tri:L", {}, "2", db=db), tmp_path / "out"
    )  # exits if injected
    assert (
        "sys.exit(7)" in gen.__doc__ and "sys.exit(7)" in gen.Model.__doc__ and callable(gen.build)
    )
