"""The `cast` built-in end to end: checked, lowered, generated as `Tensor.to`, and run (CPU):
a float16 model calls a float32 layer through two casts and matches PyTorch's arithmetic."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

HALF = """layer Half(c: int = 4) {
    let fc = Linear(c, 3)
    fn forward(x: Tensor<float16, [N, c]>) -> Tensor<float16, [N, 3]> {
        return cast(fc(cast(x, "float32")), "float16")
    }
}
"""


def test_cast_runs_as_tensor_to(tmp_path):
    import tribuild

    (tmp_path / "half.tri").write_text(HALF)
    model = tribuild.compile_model(str(tmp_path / "half.tri"), "Half")()
    x = torch.randn(5, 4, dtype=torch.float16)
    y = model(x)
    assert y.dtype == torch.float16 and y.shape == (5, 3)
    expected = torch.nn.functional.linear(x.float(), model.fc.weight, model.fc.bias).half()
    assert torch.equal(y, expected)
    source = next((tmp_path / ".tribuild-cache" / "models").glob("half_Half_*.py")).read_text()
    assert ".to(torch.float32)" in source and ".to(torch.float16)" in source


def test_a_dtype_mismatch_suggests_the_cast(tmp_path):
    import tribuild
    from tribuild.driver.api import BuildError

    text = "fn wide(x: Tensor<float32, [N, 4]>) -> Tensor<float32, [N, 4]> { return x }\n"
    text += HALF.replace('fc(cast(x, "float32"))', "fc(wide(x))")
    (tmp_path / "half.tri").write_text(text)
    with pytest.raises(BuildError) as err:
        tribuild.compile_model(str(tmp_path / "half.tri"), "Half")
    assert 'help: convert it: cast(..., "float32")' in str(err.value)
