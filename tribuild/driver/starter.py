"""`tribuild init`: a starter project, the Tribuild.toml of ``config.STARTER_TOML`` and the
model it names, ``models/mlp.tri:MLP`` (a forward over ``[N, 784]``, ``hidden = 256`` by
default), and a ``.gitignore`` entry for the output and cache folders. Nothing is written when
Tribuild.toml or the model exists already."""

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


IGNORED = ("/build/", "/.tribuild-cache/")
"""What the starter's Tribuild.toml makes: its output folder and its cache folder."""


def init_project(folder: str, name: str | None = None) -> tuple[str, ...]:
    """Write the starter files into ``folder``; FileExistsError naming the first that
    exists. Returns the paths written (``.gitignore`` when it was made or extended)."""
    for rel in (CONFIG_FILE, MODEL_PATH):
        if os.path.exists(os.path.join(folder, rel)):
            raise FileExistsError(os.path.join(folder, rel))
    model = os.path.join(folder, MODEL_PATH)
    os.makedirs(os.path.dirname(model), exist_ok=True)
    with open(model, "x", encoding="utf-8") as file:
        file.write(MODEL)
    written = (write_starter(folder, name), model)
    return written + _ignore(folder)


def _ignore(folder: str) -> tuple[str, ...]:
    """Add the output and cache folders to ``folder``'s .gitignore (made if missing)."""
    path = os.path.join(folder, ".gitignore")
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except FileNotFoundError:
        text = ""
    missing = [line for line in IGNORED if line not in text.splitlines()]
    if not missing:
        return ()
    with open(path, "a", encoding="utf-8") as file:
        if text and not text.endswith("\n"):
            file.write("\n")
        file.write("# written by tribuild: generated modules and the build cache\n")
        file.write("".join(f"{line}\n" for line in missing))
    return (path,)
