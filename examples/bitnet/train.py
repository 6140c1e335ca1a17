"""Train a small BitNet b1.58 language model on the Python standard library's own source code.

    python examples/bitnet/train.py --out runs/lm                        # one process
    torchrun --nproc-per-node 2 examples/bitnet/train.py --out runs/lm   # DDP, gloo
    python examples/bitnet/train.py --float --out runs/lm-float          # the float twin

The model is the `bitnet_lm_train` target of Tribuild.toml (`models/bitnet_lm.tri`), compiled
with ``tribuild.compile_model`` and trained from ``Model()`` (quantization-aware training, no
float warm start); ``--float`` trains its float twin with full-precision weights
(``Model.float_module(quantize=False)``: the same architecture, activations still 8-bit) the
same way, as the baseline that shows what ternary weights cost.

Terms:
- *corpus*: the ``*.py`` files directly in ``--corpus`` (default: the standard library's folder,
  ``sysconfig.get_paths()["stdlib"]``), sorted by name; every ``--held-out-every``-th file is
  held out, the others are training files. Each file becomes ``BOS bytes... EOS``.
- *vocabulary*: the 256 byte values, then ``BOS`` (256) and ``EOS`` (257): the target's vocab.
- *positions*: the sequence length the target is built for (its ``input`` in Tribuild.toml);
  ``--seq-len`` may not exceed it, nor may a prompt plus its new tokens.
- *step*: one optimizer step on a global batch of ``--batch`` windows of ``seq_len + 1`` tokens
  drawn from the training stream by a generator seeded with ``(seed, step)``: the data of a
  step depends on nothing else, so a resumed run sees what an uninterrupted one saw. Under
  ``torchrun`` rank ``r`` of ``W`` trains on rows ``r·B/W .. (r+1)·B/W - 1`` (DDP averages
  the gradients: one process's step on the whole batch).
- *micro-batch*: with ``--accumulate N`` each process takes its share of the step's batch in
  ``N`` consecutive slices, forward and backward one at a time, their gradients summed (each
  scaled by ``1/N``) before the one optimizer step: micro-batch ``k`` of rank ``r`` is slice
  ``r·N + k`` of ``W·N`` equal slices of the batch. One process with ``--accumulate 2`` so
  takes exactly the rows two DDP ranks take, in rank order, and sums the same gradients the
  same way (``g0/2 + g1/2``; DDP scales by ``1/W`` and all-reduces): on 1 thread its losses
  and weights are bit-identical to 2 DDP processes of 1 thread each. The loss reported for a
  step is the mean of the micro-batches' losses (then of the ranks'), summed as DDP sums them.
  Neither ``N`` nor the world size is part of the config below: a state resumes under any
  split of the batch, and continues with that split's summation order.
- *schedule*: AdamW; the learning rate rises linearly for ``--warmup`` steps, then follows a
  cosine to 10% of ``--lr`` at ``--steps``; gradients clipped to norm ``--clip``.
- *state*: ``<out>/state.pt`` every ``--checkpoint-every`` steps (rank 0; written beside and
  renamed, so a kill leaves the previous one): model, optimizer, step, losses, config. A run
  whose ``<out>`` holds one resumes from it; a state written for another config is an error.
- *bits per byte*: the mean cross-entropy of the held-out bytes (markers excluded) in bits,
  over ``--eval-windows`` windows spread evenly across the held-out stream; the *unigram
  baseline* is the same for the training bytes' frequencies (add-one smoothed).
- At the end (rank 0): the ternary model is frozen and saved in transformers' packed layout
  (``<out>/packed``, float tensors in bfloat16, ``tribuild.runtime.save``), loaded back with
  ``load_checkpoint`` and sampled from after the prompt ``def ``; the float twin is saved as
  float32 safetensors (``<out>/float``) and sampled from as it is. ``<out>/result.json`` has
  the figures.
Bad input (an empty corpus, ``--seq-len`` above the positions, a state from another config, a
world size times ``--accumulate`` that does not divide ``--batch``, ``--accumulate`` below 1)
ends in one error before training starts.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import sys
import sysconfig
import time
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

BYTES, BOS, EOS = 256, 256, 257


class SetupError(Exception):
    """A problem found before training starts; the message says what to change."""


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=Path("runs/bitnet_lm"), help="state, results")
    p.add_argument("--config", type=Path, default=ROOT / "Tribuild.toml")
    p.add_argument("--target", default="bitnet_lm_train")
    p.add_argument("--corpus", type=Path, default=Path(sysconfig.get_paths()["stdlib"]))
    p.add_argument("--held-out-every", type=int, default=10)
    p.add_argument("--float", action="store_true", help="train the full-precision twin")
    p.add_argument("--steps", type=int, default=1200)
    p.add_argument("--batch", type=int, default=16, help="global batch, in windows")
    p.add_argument(
        "--accumulate",
        type=int,
        default=1,
        metavar="N",
        help="take each process's share of the batch in N micro-batches, one optimizer step",
    )
    p.add_argument("--seq-len", type=int, default=None, help="default: the target's positions")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-every", type=int, default=50)
    p.add_argument("--eval-windows", type=int, default=64)
    p.add_argument("--sample-tokens", type=int, default=160)
    p.add_argument("--threads", type=int, default=None, help="default: CPUs / processes")
    p.add_argument("--max-steps-now", type=int, default=None, help="stop after this many steps")
    p.add_argument(
        "--skip-final", action="store_true", help="stop after training: no evaluation, no saving"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", type=Path, help="also write the result here")
    return p.parse_args(argv)


# -- setup: everything checked before training --------------------------------------------


def corpus_files(folder: Path, every: int) -> tuple[list[Path], list[Path]]:
    """``(train, held_out)`` files of the corpus folder (see the module doc)."""
    if not folder.is_dir():
        raise SetupError(f"{folder}: the corpus folder does not exist (--corpus)")
    files = sorted(f for f in folder.glob("*.py") if f.is_file() and f.stat().st_size > 0)
    if len(files) < 2:
        raise SetupError(
            f"{folder}: the corpus folder holds {len(files)} non-empty *.py file(s); training "
            "needs at least 2 (one held out), --corpus names another folder"
        )
    held = [f for i, f in enumerate(files) if i % every == every - 1] or files[-1:]
    return [f for f in files if f not in held], held


def stream(files: list[Path]) -> torch.Tensor:
    """``BOS bytes EOS`` of each file, concatenated: int16 token ids."""
    parts = []
    for f in files:
        data = torch.frombuffer(bytearray(f.read_bytes()), dtype=torch.uint8).to(torch.int16)
        parts += [
            torch.tensor([BOS], dtype=torch.int16),
            data,
            torch.tensor([EOS], dtype=torch.int16),
        ]
    return torch.cat(parts)


def target_of(args: argparse.Namespace):
    from tribuild.config.load import load_config

    config = load_config(str(args.config))
    target = next((t for t in config.targets if t.name == args.target), None)
    if target is None:
        names = ", ".join(t.name for t in config.targets)
        raise SetupError(f"{args.config}: no target {args.target!r} (targets: {names})")
    if target.input is None or len(target.input) != 2:
        raise SetupError(
            f"{args.config}: [targets.{args.target}] needs input = [1, POSITIONS], the sequence "
            "length it is trained for"
        )
    return config, target


def run_config(args: argparse.Namespace, target, seq_len: int, train: list[Path]) -> dict:
    """What a state must have been written for to be resumed here."""
    digest = hashlib.sha256()
    for f in train:
        digest.update(f"{f.name}:{f.stat().st_size};".encode())
    return {
        "target": args.target,
        "entry": f"{target.entry_path}:{target.entry_layer}",
        "args": dict(target.args),
        "float": args.float,
        "seq_len": seq_len,
        "batch": args.batch,
        "steps": args.steps,
        "lr": args.lr,
        "warmup": args.warmup,
        "weight_decay": args.weight_decay,
        "clip": args.clip,
        "seed": args.seed,
        "corpus": digest.hexdigest()[:16],
    }


def setup(args: argparse.Namespace, world: int) -> dict:
    """Every check that can fail, before any process group, compile or step (see the doc)."""
    if args.accumulate < 1:
        raise SetupError(
            f"--accumulate {args.accumulate}: the number of micro-batches a step takes must be "
            "at least 1 (1: the whole share in one forward)"
        )
    if args.batch < 1 or args.batch % (world * args.accumulate):
        raise SetupError(
            f"the global batch ({args.batch} windows, --batch) must be a positive multiple of "
            f"the world size ({world} process{'es' if world > 1 else ''}) times --accumulate "
            f"({args.accumulate}): each process trains on an equal share, in equal micro-batches"
        )
    config, target = target_of(args)
    positions = target.input[1]
    seq_len = args.seq_len if args.seq_len is not None else positions
    if not 1 <= seq_len <= positions:
        raise SetupError(
            f"--seq-len {seq_len} is longer than the model's {positions} positions "
            f"({args.config}: [targets.{args.target}] input = [1, {positions}]); use at most "
            f"{positions}, or build the target for more"
        )
    vocab = dict(target.args).get("vocab")
    if vocab != BYTES + 2:
        raise SetupError(
            f"[targets.{args.target}] has vocab = {vocab}; the byte vocabulary needs "
            f"{BYTES + 2} (256 bytes, BOS, EOS)"
        )
    train, held = corpus_files(args.corpus, args.held_out_every)
    wanted = run_config(args, target, seq_len, train)
    state = None
    path = args.out / "state.pt"
    if path.exists():
        state = torch.load(path, weights_only=False)
        if state.get("config") != wanted:
            theirs = state.get("config") or {}
            diffs = [
                f"{k} {theirs.get(k)!r} (here {v!r})"
                for k, v in wanted.items()
                if theirs.get(k) != v
            ]
            raise SetupError(
                f"{path} was written for another config: "
                + "; ".join(diffs)
                + ". Use another --out, or the same settings to resume"
            )
    return {
        "config": config,
        "target": target,
        "positions": positions,
        "seq_len": seq_len,
        "train_files": train,
        "held_files": held,
        "run_config": wanted,
        "state": state,
    }


# -- training ------------------------------------------------------------------------------


def windows(tokens: torch.Tensor, seed: int, step: int, count: int, length: int) -> torch.Tensor:
    """``count`` windows of ``length`` tokens at starts drawn for ``(seed, step)``."""
    gen = torch.Generator().manual_seed(seed * 1_000_003 + step)
    starts = torch.randint(0, len(tokens) - length, (count,), generator=gen)
    return torch.stack([tokens[s : s + length] for s in starts.tolist()]).long()


def lr_at(step: int, args: argparse.Namespace) -> float:
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def loss_of(model: torch.nn.Module, ids: torch.Tensor, bytes_only: bool = False) -> torch.Tensor:
    logits = model(ids[:, :-1])
    targets = ids[:, 1:]
    if bytes_only:
        targets = targets.masked_fill(targets >= BYTES, -100)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def held_out_bits(model: torch.nn.Module, held: torch.Tensor, count: int, length: int) -> float:
    """Bits per held-out byte over ``count`` evenly spread windows (see the module doc)."""
    starts = torch.linspace(0, len(held) - length - 1, count).long().tolist()
    ids = torch.stack([held[s : s + length + 1] for s in starts]).long()
    was = model.training
    model.eval()
    total, counted = 0.0, 0
    with torch.no_grad():
        for chunk in ids.split(8):
            n = int((chunk[:, 1:] < BYTES).sum())
            total += loss_of(model, chunk, bytes_only=True).item() * n
            counted += n
    model.train(was)
    return total / counted / math.log(2)


def unigram_bits(train: torch.Tensor, held: torch.Tensor) -> float:
    counts = torch.bincount(train[train < BYTES].long(), minlength=BYTES).double() + 1
    logp = (counts / counts.sum()).log2()
    held_bytes = held[held < BYTES].long()
    return float(-logp[held_bytes].mean())


def save_state(path: Path, payload: dict) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)  # a kill leaves the previous state whole


def sample(model: torch.nn.Module, prompt: str, new: int, positions: int, seed: int) -> str:
    from tribuild.runtime.generate import generate

    ids = torch.tensor([[BOS, *prompt.encode()]])
    new = min(new, positions - ids.shape[1])
    gen = torch.Generator().manual_seed(seed)
    model.eval()
    out = generate(model, ids, new, temperature=0.7, top_k=20, generator=gen)
    out = out[0, ids.shape[1] :].tolist()  # the continuation alone
    text = (
        bytes(t for t in out[: out.index(EOS)] if t < BYTES)
        if EOS in out
        else bytes(t for t in out if t < BYTES)
    )
    return text.decode("utf-8", errors="replace")


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.iterdir() if f.suffix == ".safetensors")


def train(args: argparse.Namespace, plan: dict, rank: int, world: int) -> dict:
    import torch.distributed as dist

    import tribuild

    target = plan["target"]
    seq_len = plan["seq_len"]
    if world > 1 and rank != 0:
        dist.barrier()  # rank 0 compiles into the project's cache first; the others read it
    Model = tribuild.compile_model(
        str(Path(plan["config"].root) / target.entry_path), target.entry_layer, **dict(target.args)
    )
    if world > 1 and rank == 0:
        dist.barrier()
    train_tokens = stream(plan["train_files"])
    held_tokens = stream(plan["held_files"])

    torch.manual_seed(args.seed)
    # --float: the twin with full-precision weights (float_module(quantize=False)), not the
    # fake-quantized one, whose arithmetic is the ternary model's
    model = Model.float_module(quantize=False) if args.float else Model()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    state = plan["state"]
    start, losses, trained_s = 0, [], 0.0
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optim"])
        start, losses, trained_s = state["step"], list(state["losses"]), state["trained_s"]
    wrapped = model
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel

        wrapped = DistributedDataParallel(model)
    model.train()
    parts = args.accumulate
    rows = args.batch // (world * parts)  # a micro-batch's windows
    stop = args.steps if args.max_steps_now is None else min(args.steps, start + args.max_steps_now)
    progress = _progress(args.quiet or rank != 0)
    task = progress.add_task(
        "training", total=args.steps, completed=start, loss=float("nan"), rate=0.0
    )
    began = time.perf_counter()
    with progress:
        for step in range(start, stop):
            for group in opt.param_groups:
                group["lr"] = lr_at(step, args)
            ids = windows(train_tokens, args.seed, step, args.batch, seq_len + 1)
            opt.zero_grad(set_to_none=True)
            summed = torch.zeros(())
            for k in range(parts):
                first = (rank * parts + k) * rows  # slice r·N + k: see *micro-batch*
                # DDP all-reduces at the share's last backward only; the others accumulate
                last = world == 1 or k == parts - 1
                with contextlib.nullcontext() if last else wrapped.no_sync():
                    loss = loss_of(wrapped, ids[first : first + rows])
                    # 1/N: exact for N a power of two, as DDP's 1/W is; the micro-batches'
                    # gradients then add as the ranks' do in the all-reduce
                    (loss / parts).backward()
                summed += loss.detach()  # l0 + l1 + ...: as the all-reduce adds them
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            opt.step()
            mean = summed / parts
            if world > 1:
                dist.all_reduce(mean)
                mean /= world
            losses.append(mean.item())
            elapsed = time.perf_counter() - began
            rate = (step + 1 - start) * args.batch * seq_len / elapsed
            progress.update(task, completed=step + 1, loss=losses[-1], rate=rate)
            if rank == 0 and ((step + 1) % args.checkpoint_every == 0 or step + 1 == args.steps):
                save_state(
                    args.out / "state.pt",
                    {
                        "config": plan["run_config"],
                        "step": step + 1,
                        "model": model.state_dict(),
                        "optim": opt.state_dict(),
                        "losses": losses,
                        "trained_s": trained_s + elapsed,
                    },
                )
    run_s = time.perf_counter() - began
    result = {
        "mode": "float" if args.float else "ternary",
        "world": world,
        "threads": torch.get_num_threads(),
        "steps": len(losses),
        "steps_this_run": stop - start,
        "resumed_from": start,
        "seq_len": seq_len,
        "batch": args.batch,
        "accumulate": parts,
        "losses": losses,
        "tokens_per_s": round((stop - start) * args.batch * seq_len / run_s, 1)
        if stop > start
        else None,
        "run_s": round(run_s, 2),
        "train_tokens": len(train_tokens),
        "held_out_tokens": len(held_tokens),
        "train_files": len(plan["train_files"]),
        "held_out_files": len(plan["held_files"]),
    }
    if world > 1:
        dist.barrier()
    if rank != 0 or len(losses) < args.steps or args.skip_final:
        return result
    result["held_out_bits_per_byte"] = held_out_bits(model, held_tokens, args.eval_windows, seq_len)
    result["unigram_bits_per_byte"] = unigram_bits(train_tokens, held_tokens)
    result.update(finish(args, plan, Model, model, held_tokens))
    return result


def finish(args, plan, Model, model, held_tokens) -> dict:
    """Save what was trained, read it back and sample from it (see the module doc)."""
    from safetensors.torch import save_file

    from tribuild.runtime.checkpoint import load_checkpoint
    from tribuild.runtime.save import save_checkpoint

    positions, seq_len = plan["positions"], plan["seq_len"]
    if args.float:
        folder = args.out / "float"
        folder.mkdir(parents=True, exist_ok=True)
        save_file(
            {k: v.contiguous() for k, v in model.state_dict().items()},
            str(folder / "model.safetensors"),
        )
        return {
            "checkpoint_bytes": folder_bytes(folder),
            "sample": sample(model, "def ", args.sample_tokens, positions, args.seed),
        }
    model.freeze()
    folder = args.out / "packed"
    save_checkpoint(model, folder, dtype=torch.bfloat16)
    loaded = load_checkpoint(Model, folder)
    return {
        "checkpoint_bytes": folder_bytes(folder),
        "packed_held_out_bits_per_byte": held_out_bits(
            loaded, held_tokens, args.eval_windows, seq_len
        ),
        "sample": sample(loaded, "def ", args.sample_tokens, positions, args.seed),
    }


def _progress(disable: bool):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:.3f}"),
        TextColumn("{task.fields[rate]:,.0f} tokens/s"),
        TimeElapsedColumn(),
        disable=disable,
    )


def main(argv: list[str] | None = None) -> dict:
    args = parse(argv)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    try:
        plan = setup(args, world)
    except SetupError as e:  # every rank finds it; rank 0 says it
        raise SystemExit(f"error: {e}" if rank == 0 else 2) from None
    torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // world))
    args.out.mkdir(parents=True, exist_ok=True)
    if world > 1:
        import torch.distributed as dist

        dist.init_process_group("gloo")
    try:
        from tribuild.runtime.launch import force_backend

        with force_backend("torch"):
            result = train(args, plan, rank, world)
    finally:
        if world > 1:
            dist.destroy_process_group()
    if rank == 0:
        result["load_average"] = [round(x, 2) for x in os.getloadavg()]
        text = json.dumps(result, indent=2) + "\n"
        (args.out / "result.json").write_text(text)
        if args.json:
            args.json.write_text(text)
        if "held_out_bits_per_byte" in result and not args.quiet:
            print(
                f"{result['mode']}: held-out {result['held_out_bits_per_byte']:.3f} bits/byte "
                f"(unigram {result['unigram_bits_per_byte']:.3f}), "
                f"{result['tokens_per_s']} tokens/s\n--- def {result['sample']}"
            )
    return result


if __name__ == "__main__":
    main()
