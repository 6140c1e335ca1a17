"""Load a BitNet b1.58 checkpoint folder into a generated module and stream new tokens.

    tribuild build bitnet_2b                      # build/zoo/bitnet_2b.py
    python examples/bitnet/generate.py build/zoo/bitnet_2b.py CHECKPOINT_FOLDER \\
        --prompt "Hello" --max-new-tokens 32

CHECKPOINT_FOLDER holds ``*.safetensors`` files in the float or transformers' packed layout
(``tribuild.runtime.checkpoint``); with a ``tokenizer.json`` beside them and the ``tokenizers``
package, ``--prompt`` is text and the tokens print as text, else ``--ids 1,2,3`` gives the
prompt and ids print. Nothing is downloaded. Without a checkpoint, ``--random`` runs the
model with its random initialization (seeded), which checks the path end to end in seconds:

    tribuild build bitnet_lm_tiny
    python examples/bitnet/generate.py build/zoo/bitnet_lm_tiny.py --random --ids 1,2,3

A missing folder, a token id outside the vocabulary and the like end in one line, exit 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from typing import NoReturn

import torch

from tribuild.runtime.checkpoint import CheckpointError, load_checkpoint
from tribuild.runtime.generate import tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("module", help="the generated module of a BitNetLM target (.py)")
    parser.add_argument("checkpoint", nargs="?", help="a folder of *.safetensors files")
    parser.add_argument(
        "--random", action="store_true", help="no checkpoint: random weights (seed 0), frozen"
    )
    parser.add_argument("--prompt", help="prompt text (needs tokenizer.json in the folder)")
    parser.add_argument("--ids", help="prompt token ids, comma-separated")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--float-layers",
        choices=("int8", "as-loaded"),
        default="int8",
        help="the embedding and head in 8 bits a weight (default: a quarter of float32's bytes "
        "to read per token), or as the checkpoint holds them",
    )
    args = parser.parse_args(argv)

    if (args.checkpoint is None) == (not args.random):
        parser.error("give a CHECKPOINT_FOLDER, or --random for random weights")

    def fail(message: str) -> NoReturn:  # one line, not a usage text or a traceback
        parser.exit(2, f"{parser.prog}: error: {message}\n")

    if not Path(args.module).is_file():
        fail(f"{args.module}: no such module (build it first: tribuild build TARGET)")
    if args.checkpoint is not None and not Path(args.checkpoint).is_dir():
        fail(f"{args.checkpoint}: no such folder")
    spec = importlib.util.spec_from_file_location("bitnet_module", args.module)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        if args.random:
            torch.manual_seed(0)
            model = module.Model().freeze()
        else:  # 8-bit head, embedding rows read from the file (tribuild.runtime.int8)
            int8 = args.float_layers == "int8"
            model = load_checkpoint(module.Model, args.checkpoint, int8_floats=int8)
    except (CheckpointError, ImportError) as err:
        fail(str(err))
    model = model.to(args.device).eval()
    if args.float_layers == "int8" and args.random:
        from tribuild.runtime.int8 import quantize_floats

        quantize_floats(model)

    tokenizer = _tokenizer(Path(args.checkpoint)) if args.checkpoint is not None else None
    if args.ids is not None:
        try:
            prompt = [int(i) for i in args.ids.split(",")]
        except ValueError:
            fail(f"--ids: expected comma-separated integers, got {args.ids!r}")
    elif args.prompt is not None and tokenizer is not None:
        prompt = tokenizer.encode(args.prompt).ids
    else:
        parser.error("give --ids, or --prompt with a tokenizer.json in the checkpoint folder")
    vocab = module.Model.ARGS.get("vocab")
    outside = [i for i in prompt if i < 0 or (vocab is not None and i >= vocab)]
    if outside or not prompt:
        top = f"0 to {vocab - 1} (the model's vocab)" if vocab is not None else "0 or more"
        fail(f"token ids must be {top}, got {outside or 'none'}")
    ids = torch.tensor([prompt], device=args.device)

    start = time.perf_counter()
    count = 0
    for token in tokens(model, ids, args.max_new_tokens, args.temperature, args.top_k):
        t = int(token[0, 0])
        text = tokenizer.decode([t]) if tokenizer is not None else f"{t} "
        sys.stdout.write(text)
        sys.stdout.flush()
        count += 1
    seconds = time.perf_counter() - start
    print(f"\n[{count} tokens in {seconds:.2f} s]", file=sys.stderr)
    return 0


def _tokenizer(folder: Path):
    if not (folder / "tokenizer.json").exists():
        return None
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None
    return Tokenizer.from_file(str(folder / "tokenizer.json"))


if __name__ == "__main__":
    sys.exit(main())
