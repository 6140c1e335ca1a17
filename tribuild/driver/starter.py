"""`tribuild init`: a starter project, the Tribuild.toml of ``config.STARTER_TOML`` and the
model it names, ``models/mlp.tri:MLP`` (a forward over ``[N, 784]``, ``hidden = 256`` by
default). Nothing is written when either file exists already."""

from __future__ import annotations

import os

from tribuild.config.load import write_starter
from tribuild.project import CONFIG_FILE

MODEL_PATH = os.path.join("models", "mlp.tri")
MODEL = """\
# A starter model: a ternary multilayer perceptron over flattened 28x28 images.
# Build it with `tribuild build`; the module lands in build/mlp.py.

layer MLP(hidden: int = 256) {
    let fc1 = TernaryLinear(784, hidden, bias=true)
    let fc2 = Linear(hidden, 10)

    fn forward(x: Tensor<float32, [N, 784]>) -> Tensor<float32, [N, 10]> {
        return fc2(relu(fc1(x)))
    }
}
"""


def init_project(folder: str, name: str | None = None) -> tuple[str, str]:
    """Write the starter files into ``folder``; FileExistsError naming the first that
    exists. Returns the paths written."""
    for rel in (CONFIG_FILE, MODEL_PATH):
        if os.path.exists(os.path.join(folder, rel)):
            raise FileExistsError(os.path.join(folder, rel))
    model = os.path.join(folder, MODEL_PATH)
    os.makedirs(os.path.dirname(model), exist_ok=True)
    with open(model, "x", encoding="utf-8") as file:
        file.write(MODEL)
    return write_starter(folder, name), model
