"""Load a BitNet b1.58 checkpoint folder into a generated module and stream new tokens.

    tribuild build bitnet_2b                      # build/zoo/bitnet_2b.py
    python examples/bitnet/generate.py build/zoo/bitnet_2b.py CHECKPOINT_FOLDER \\
        --prompt "Hello" --max-new-tokens 32

CHECKPOINT_FOLDER holds ``*.safetensors`` files in the float or transformers' packed layout
(``tribuild.runtime.checkpoint``); with a ``tokenizer.json`` beside them and the ``tokenizers``
package, ``--prompt`` is text and the tokens print as text, else ``--ids 1,2,3`` gives the
prompt and ids print. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import torch

from tribuild.runtime.checkpoint import load_checkpoint
from tribuild.runtime.generate import tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("module", help="the generated module of a BitNetLM target (.py)")
    parser.add_argument("checkpoint", help="a folder of *.safetensors files")
    parser.add_argument("--prompt", help="prompt text (needs tokenizer.json in the folder)")
    parser.add_argument("--ids", help="prompt token ids, comma-separated")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)

    spec = importlib.util.spec_from_file_location("bitnet_module", args.module)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = load_checkpoint(module.Model, args.checkpoint).to(args.device).eval()

    tokenizer = _tokenizer(Path(args.checkpoint))
    if args.ids is not None:
        prompt = [int(i) for i in args.ids.split(",")]
    elif args.prompt is not None and tokenizer is not None:
        prompt = tokenizer.encode(args.prompt).ids
    else:
        parser.error("give --ids, or --prompt with a tokenizer.json in the checkpoint folder")
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
