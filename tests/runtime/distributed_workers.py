"""The ranks of tests/runtime/test_distributed.py: each function runs in a process of its own
(``torch.multiprocessing`` spawn, ``gloo``, 2 ranks), trains the generated tiny BitNet LM
and writes what the test compares to ``<out>/rank<r>.pt``.

Every rank builds the same ``Model()`` from the same seed, so the ranks start equal, as one
process does; the global batch of step ``s`` is ``batch(s)``, rank ``r`` trains on its rows
``r·B/W .. (r+1)·B/W - 1``.
"""

from __future__ import annotations

import datetime
import importlib.util
import traceback
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

VOCAB, BATCH, TOKENS, LR = 96, 4, 16, 3e-3


def load_model_class(path: str):
    """The ``Model`` class of the generated module at ``path``."""
    spec = importlib.util.spec_from_file_location("distributed_generated", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Model


def batch(step: int) -> torch.Tensor:
    """The global batch of ``step``: token ids ``[BATCH, TOKENS + 1]``."""
    gen = torch.Generator().manual_seed(1000 + step)
    return torch.randint(0, VOCAB, (BATCH, TOKENS + 1), generator=gen)


def loss_of(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    logits = model(ids[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def train(model, opt, steps: range, rank: int, world: int) -> list[float]:
    """Losses of the global batch (the ranks' mean) at each step of ``steps``."""
    losses = []
    rows = BATCH // world
    for step in steps:
        ids = batch(step)[rank * rows : (rank + 1) * rows]
        loss = loss_of(model, ids)
        opt.zero_grad()
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        if world > 1:
            dist.all_reduce(mean)
            mean /= world
        losses.append(mean.item())
    return losses


def single(path: str, steps: int) -> dict:
    """One process on the whole global batch: the reference the ranks are compared with."""
    torch.manual_seed(0)
    model = load_model_class(path)()
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    losses = train(model, opt, range(steps), 0, 1)
    model.eval()
    with torch.no_grad():
        logits = model(batch(99)[:, :-1])
    return {"losses": losses, "state": model.state_dict(), "eval_logits": logits}


def run(rank: int, world: int, scenario: str, path: str, out: str, store: str) -> None:
    """The entry of each spawned process."""
    from tribuild.runtime.launch import force_backend

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"file://{store}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=60),
    )
    try:
        with force_backend("torch"):
            result = SCENARIOS[scenario](rank, world, path, Path(out))
        torch.save(result, Path(out) / f"rank{rank}.pt")
    except BaseException:
        (Path(out) / f"rank{rank}.error").write_text(traceback.format_exc())
        raise
    finally:
        dist.destroy_process_group()


def ddp(rank: int, world: int, path: str, out: Path) -> dict:
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    model = load_model_class(path)()
    wrapped = DistributedDataParallel(model)
    opt = torch.optim.AdamW(wrapped.parameters(), lr=LR)
    losses = train(wrapped, opt, range(4), rank, world)
    model.eval()
    with torch.no_grad():
        logits = model(batch(99)[:, :-1])
    state = model.state_dict()
    ignored = sorted(wrapped.parameters_to_ignore)
    frozen = model.freeze().state_dict()
    return {
        "losses": losses,
        "state": state,
        "eval_logits": logits,
        "ignored": ignored,
        "frozen": frozen,
    }


def _shard(model) -> None:
    from torch.distributed.fsdp import fully_shard

    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)


def _full_state(model) -> dict:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))


def fsdp(rank: int, world: int, path: str, out: Path) -> dict:
    """FSDP2 on each decoder layer and the root; Distributed Checkpoint after step 2, then
    two more steps; a second model resumes from the checkpoint; freezing; meta-device init."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    Model = load_model_class(path)
    torch.manual_seed(0)
    model = Model()
    _shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    losses = train(model, opt, range(2), rank, world)
    model_state, optim_state = get_state_dict(model, opt)
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=str(out / "dcp"))
    losses += train(model, opt, range(2, 4), rank, world)
    model.eval()
    with torch.no_grad():
        logits = model(batch(99)[:, :-1])
    model.train()
    with torch.no_grad():  # the training-mode forward ternarizes the latent weights anew
        train_mode_logits = model(batch(99)[:, :-1])
    state = _full_state(model)
    try:
        model.freeze()
        freeze_error = ""
    except RuntimeError as e:
        freeze_error = str(e)

    torch.manual_seed(1)  # another init: the checkpoint must replace it
    resumed = Model()
    _shard(resumed)
    resumed_opt = torch.optim.AdamW(resumed.parameters(), lr=LR)
    model_state, optim_state = get_state_dict(resumed, resumed_opt)
    loaded = {"model": model_state, "optim": optim_state}
    dcp.load(loaded, checkpoint_id=str(out / "dcp"))
    set_state_dict(
        resumed, resumed_opt, model_state_dict=loaded["model"], optim_state_dict=loaded["optim"]
    )
    resumed_losses = train(resumed, resumed_opt, range(2, 4), rank, world)

    plain = Model()  # freezing after sharded training: a plain model with the full state
    plain.load_state_dict(state)
    frozen = plain.freeze().state_dict()

    with torch.device("meta"):
        late = Model()
    _shard(late)
    late.to_empty(device="cpu")
    torch.manual_seed(2)
    for module in late.modules():
        reset = getattr(module, "reset_parameters", None)
        if callable(reset):
            reset()
    late_state = _full_state(late)
    late_loss = train(late, torch.optim.AdamW(late.parameters(), lr=LR), range(1), rank, world)
    return {
        "losses": losses,
        "resumed_losses": resumed_losses,
        "state": state,
        "eval_logits": logits,
        "train_mode_logits": train_mode_logits,
        "frozen": frozen,
        "freeze_error": freeze_error,
        "late_state": late_state,
        "late_loss": late_loss,
    }


SCENARIOS = {"ddp": ddp, "fsdp": fsdp}
