"""Train a ternary CNN written in .tri from scratch on scikit-learn's handwritten digits.

The network is ``examples/digits/digits.tri`` (three ternary 3x3 convolutions with BatchNorm
and a ternary classifier); the data is ``sklearn.datasets.load_digits`` (1797 8x8 images
shipped inside scikit-learn, nothing downloaded), split 80/20, stratified. The loop is plain
PyTorch: ``Model()`` starts from PyTorch's initialization, ``parameters()`` holds the latent
float weights that quantization-aware training ternarizes on the fly, AdamW with a one-cycle
learning rate, one-pixel random shifts as augmentation. Then the model is frozen (packed
2-bit weights only), saved, reloaded into a fresh ``Model()``, and the reloaded model's test
accuracy is reported. Measured figures: ``benchmarks/results/train_digits.md``.

Usage: ``python examples/train_digits.py [--epochs 30] [--seed 0] [--threads 1] [--out DIR]
[--json PATH]``
(needs the ``runtime`` and ``examples`` extras: torch, scikit-learn).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import tribuild  # noqa: E402

TRI = HERE / "digits" / "digits.tri"


def digits(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x_train, y_train, x_test, y_test)``: images ``[N, 1, 8, 8]`` standardized with the
    training split's mean and standard deviation."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x = torch.tensor(data.images, dtype=torch.float32).unsqueeze(1)
    y = torch.tensor(data.target, dtype=torch.long)
    train, test = train_test_split(
        list(range(len(y))), test_size=0.2, random_state=seed, stratify=data.target
    )
    mean, std = x[train].mean(), x[train].std()
    return (x[train] - mean) / std, y[train], (x[test] - mean) / std, y[test]


def shifted(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Each image moved by up to one pixel in each direction (background shifted in)."""
    padded = F.pad(x, (1, 1, 1, 1), value=float(x.min()))
    windows = padded.unfold(2, 8, 1).unfold(3, 8, 1)  # [N, 1, 3, 3, 8, 8]
    dy, dx = torch.randint(0, 3, (2, x.shape[0]), generator=gen)
    return windows[torch.arange(x.shape[0]), :, dy, dx]


def accuracy(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def train(args: argparse.Namespace) -> dict:
    torch.set_num_threads(args.threads)
    start, cpu_start = time.perf_counter(), time.process_time()
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    x_train, y_train, x_test, y_test = digits(args.seed)
    Model = tribuild.compile_model(str(args.tri), "DigitsNet", width=args.width)
    compiled = time.perf_counter()

    model = Model()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    steps = args.epochs * -(-len(y_train) // args.batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=steps)
    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(len(y_train), generator=gen)
        for i in range(0, len(order), args.batch):
            batch = order[i : i + args.batch]
            loss = F.cross_entropy(model(shifted(x_train[batch], gen)), y_train[batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        if args.verbose:
            print(f"epoch {epoch + 1}: loss {loss.item():.3f}")
    qat_accuracy = accuracy(model, x_test, y_test)

    model.freeze()
    out = Path(args.out or tempfile.mkdtemp(prefix="train_digits-"))
    out.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), out / "digits.pt")
    reloaded = Model()
    reloaded.load_state_dict(torch.load(out / "digits.pt"))
    test_accuracy = accuracy(reloaded, x_test, y_test)
    done = time.perf_counter()
    return {
        "test_accuracy": test_accuracy,
        "qat_accuracy": qat_accuracy,
        "test_images": len(y_test),
        "epochs": args.epochs,
        "seed": args.seed,
        "width": args.width,
        "saved_bytes": (out / "digits.pt").stat().st_size,
        "compile_s": round(compiled - start, 2),
        "total_s": round(done - start, 2),
        "cpu_s": round(time.process_time() - cpu_start, 2),  # this process's CPU time
        "threads": torch.get_num_threads(),
    }


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument(
        "--threads", type=int, default=1, help="torch threads (small convolutions: 1 is fastest)"
    )
    p.add_argument("--tri", type=Path, default=TRI, help="the .tri file (DigitsNet)")
    p.add_argument("--out", help="where the frozen state_dict goes (default: a temp folder)")
    p.add_argument("--json", help="also write the result as JSON here")
    p.add_argument("--verbose", action="store_true")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse(argv)
    result = train(args)
    print(
        f"test accuracy {result['test_accuracy']:.4f} on {result['test_images']} images "
        f"(before freezing {result['qat_accuracy']:.4f}), {result['epochs']} epochs, "
        f"{result['total_s']:.1f} s in all ({result['compile_s']:.1f} s compiling, "
        f"{result['cpu_s']:.1f} s of CPU time)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    os.environ.pop("TRITON_INTERPRET", None)  # the CPU path is the torch backend
    main()
