"""Declared dtypes are a contract (issue 37): a layer declared on `Tensor<float16, ...>`
holds its parameters in float16 and runs float16 input; the entry's input check checks the
dtype as it checks the shape, with one ValueError naming the layer, the declared type and
what came (float32, float64, int64 alike); a model moved to another dtype takes inputs of it.
"""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from tests.codegen.harness import build, write_and_import  # noqa: E402
from tribuild.driver.sources import load_sources  # noqa: E402
from tribuild.engine import Database  # noqa: E402
from tribuild.runtime.launch import force_backend  # noqa: E402

HALF = """layer Half(c: int = 8) {
    let fc1 = TernaryLinear(c, 16, bias=true)
    let norm = LayerNorm(16)
    let fc2 = Linear(16, 4)

    fn forward(x: Tensor<float16, [N, c]>) -> Tensor<float16, [N, 4]> {
        return fc2(norm(relu(fc1(x))))
    }
}

layer Mixed(c: int = 8) {
    let fc1 = Linear(c, 16)
    let fc2 = Linear(16, 4)

    fn forward(x: Tensor<float16, [N, c]>) -> Tensor<float32, [N, 4]> {
        return fc2(cast(relu(fc1(x)), "float32"))
    }
}
"""


@pytest.fixture(scope="module")
def half(tmp_path_factory):
    root = tmp_path_factory.mktemp("half")
    (root / "h.tri").write_text(HALF)
    db = Database()
    load_sources(db, str(root), ("h.tri",))
    return (
        write_and_import(build("h.tri:Half", {}, "2", db=db), root / "half"),
        write_and_import(build("h.tri:Mixed", {}, "2", db=db), root / "mixed"),
    )


@pytest.fixture(autouse=True)
def _torch_backend():
    with force_backend("torch"):
        yield


def test_a_float16_layer_holds_float16_parameters_and_runs_float16(half):
    m = half[0].Model().eval()
    floats = {n: p.dtype for n, p in m.named_parameters()}
    assert set(floats.values()) == {torch.float16}, floats
    with torch.no_grad():
        y = m(torch.randn(3, 8).half())
        assert y.dtype == torch.float16 and y.shape == (3, 4)
        assert m.freeze()(torch.randn(2, 8).half()).dtype == torch.float16


def test_a_cast_in_forward_decides_the_dtype_of_the_layers_after_it(half):
    m = half[1].Model().eval()
    assert m.fc1.weight.dtype == torch.float16 and m.fc2.weight.dtype == torch.float32
    with torch.no_grad():
        assert m(torch.randn(3, 8).half()).dtype == torch.float32


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_another_dtype_is_one_clear_error(half, dtype):
    m = half[0].Model().eval()
    with pytest.raises(ValueError) as err:
        m(torch.ones(3, 8, dtype=dtype))
    got = str(dtype).removeprefix("torch.")
    assert str(err.value) == (
        f"Half: input x must be Tensor<float16, [N, 8]>, got Tensor<{got}, [3, 8]>"
    )


def test_a_moved_model_takes_inputs_of_its_new_dtype(half):
    m = half[0].Model().eval()
    moved = copy.deepcopy(m).float()
    assert moved.input_dtypes == (torch.float32,)
    with torch.no_grad():
        assert moved(torch.randn(2, 8)).dtype == torch.float32
        with pytest.raises(ValueError, match="got Tensor<float16"):
            moved(torch.randn(2, 8).half())
    assert copy.deepcopy(moved).half().input_dtypes == (torch.float16,)
    assert m.input_dtypes == (torch.float16,)  # the original is untouched


def test_the_zoo_mlp_refuses_float64_and_int64_input_clearly(tmp_path):
    gen = write_and_import(build("models/mlp.tri:MnistMLP", {}, "2"), tmp_path)
    m = gen.Model().eval()
    for dtype, got in ((torch.float64, "float64"), (torch.int64, "int64")):
        with pytest.raises(ValueError) as err:
            m(torch.zeros(2, 1, 28, 28, dtype=dtype))
        assert str(err.value) == (
            f"MnistMLP: input x must be Tensor<float32, [N, 1, 28, 28]>, "
            f"got Tensor<{got}, [2, 1, 28, 28]>"
        )
