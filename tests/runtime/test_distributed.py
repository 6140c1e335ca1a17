"""Generated modules under ``torch.distributed`` on the CPU: two ``gloo`` ranks spawned here
(tests/runtime/distributed_workers.py) train the tiny BitNet LM with DDP and with FSDP2
(``fully_shard`` on each decoder layer and the root), and are compared with one process
training on the same global batches: the same losses and latent weights, ranks identical;
a Distributed Checkpoint resumed gives the losses of the uninterrupted run; freezing gives
the same packed state_dict on every rank, which ``from_float`` and the checkpoint loader
agree with; a model built on the meta device, sharded, then ``to_empty`` +
``reset_parameters``, packs what its latent weights say. docs/training.md has the rules.
"""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)
pytest.importorskip("safetensors")

import torch.multiprocessing as mp  # noqa: E402

from tests.codegen.harness import build, write  # noqa: E402
from tests.runtime import distributed_workers as workers  # noqa: E402
from tribuild.runtime.checkpoint import load_checkpoint  # noqa: E402
from tribuild.runtime.launch import force_backend  # noqa: E402
from tribuild.runtime.save import save_checkpoint  # noqa: E402

WORLD = 2
TIMEOUT_S = 240  # both ranks, start to end; a hung collective fails the test, not the run
ARGS = {"vocab": 96, "dim": 64, "layers": 2, "heads": 4, "kv_heads": 2, "hidden": 160}


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("distributed_lm")
    write(build("models/bitnet_lm.tri:BitNetLM", ARGS, "2"), folder)
    return str(folder / "model.py")


def spawn(scenario: str, path: str, out) -> list[dict]:
    """Run ``scenario`` on ``WORLD`` spawned ranks; each rank's result, or the failure."""
    context = mp.start_processes(
        workers.run,
        args=(WORLD, scenario, path, str(out), str(out / "store")),
        nprocs=WORLD,
        join=False,
        start_method="spawn",
    )
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while not context.join(timeout=max(1.0, deadline - time.monotonic())):
            if time.monotonic() > deadline:
                pytest.fail(f"{scenario}: the ranks did not finish in {TIMEOUT_S} s")
    except mp.ProcessRaisedException:
        errors = [p.read_text() for p in sorted(out.glob("rank*.error"))]
        pytest.fail(f"{scenario} failed on a rank:\n" + "\n".join(errors))
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
    return [torch.load(out / f"rank{r}.pt", weights_only=False) for r in range(WORLD)]


@pytest.fixture(scope="module")
def single(generated):
    with force_backend("torch"):
        return workers.single(generated, 4)


@pytest.fixture(scope="module")
def ddp(generated, tmp_path_factory):
    return spawn("ddp", generated, tmp_path_factory.mktemp("ddp"))


@pytest.fixture(scope="module")
def fsdp(generated, tmp_path_factory):
    return spawn("fsdp", generated, tmp_path_factory.mktemp("fsdp"))


def latents(state: dict) -> dict:
    return {k: v for k, v in state.items() if "latent_" in k or v.is_floating_point()}


def float_form(state: dict) -> dict:
    """A training state_dict as ``from_float`` reads it: each latent weight under its weight's
    key, the packed weight and its scale left out."""
    floats = {}
    for key, value in state.items():
        owner, _, name = key.rpartition(".")
        if name.startswith("latent_"):
            floats[f"{owner}.{name[len('latent_') :]}"] = value
        elif f"{owner}.latent_{name.removesuffix('_scale')}" not in state:
            floats[key] = value
    return floats


def assert_same(a: dict, b: dict, atol: float = 0.0) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if atol == 0.0 or not a[key].is_floating_point():
            assert torch.equal(a[key], b[key]), key
        else:
            torch.testing.assert_close(a[key], b[key], atol=atol, rtol=0, msg=key)


def test_ddp_ranks_agree_with_one_process_on_the_global_batch(ddp, single):
    first, second = ddp
    assert_same(first["state"], second["state"])  # every tensor, bit for bit
    assert first["losses"] == second["losses"]
    torch.testing.assert_close(first["losses"], single["losses"], atol=1e-5, rtol=0)
    reference = {k: v for k, v in single["state"].items() if k in first["state"]}
    assert_same(latents(first["state"]), latents(reference), atol=1e-5)


def test_ddp_leaves_the_packed_buffers_alone(ddp):
    ignored = ddp[0]["ignored"]
    assert "model.layers.0.self_attn.q_proj.weight" in ignored
    assert "model.layers.1.mlp.down_proj.weight_scale" in ignored
    assert not any("latent_" in name or "norm" in name for name in ignored)
    # ...and eval mode re-packs the latent weights the optimizer changed
    torch.testing.assert_close(ddp[0]["eval_logits"], ddp[1]["eval_logits"], atol=0, rtol=0)


def test_ddp_freezes_to_the_same_packed_state_on_every_rank(ddp):
    assert_same(ddp[0]["frozen"], ddp[1]["frozen"])
    assert not any("latent_" in k for k in ddp[0]["frozen"])


def test_fsdp2_ranks_agree_with_one_process_on_the_global_batch(fsdp, single):
    first, second = fsdp
    assert_same(first["state"], second["state"])
    assert first["losses"] == second["losses"]
    torch.testing.assert_close(first["losses"], single["losses"], atol=1e-5, rtol=0)
    assert_same(latents(first["state"]), latents(single["state"]), atol=1e-5)


def test_fsdp2_eval_packs_the_trained_latent_weights(fsdp, single):
    """FSDP2 refills the unsharded latent weight without moving its version counter: eval
    mode must re-pack it anyway (a stale packing gave logits far from these)."""
    for rank in fsdp:
        torch.testing.assert_close(rank["eval_logits"], rank["train_mode_logits"])
        torch.testing.assert_close(rank["eval_logits"], single["eval_logits"], atol=1e-4, rtol=0)


def test_distributed_checkpoint_resumes_the_same_losses(fsdp):
    for rank in fsdp:
        assert rank["resumed_losses"] == rank["losses"][2:]


def test_fsdp2_freezing_and_what_reads_the_frozen_state(fsdp, generated, tmp_path):
    first, second = fsdp
    assert_same(first["frozen"], second["frozen"])
    assert "fully_shard" in first["freeze_error"] and "docs/training.md" in first["freeze_error"]
    Model = workers.load_model_class(generated)
    with force_backend("torch"):
        # from_float: the latent weights are the float weights it ternarizes
        floats = float_form(first["state"])
        assert_same(Model.from_float(floats).state_dict(), first["frozen"])
        frozen = Model()
        frozen.load_state_dict(first["frozen"])
        frozen.eval()
        save_checkpoint(frozen, tmp_path / "ckpt")
        loaded = load_checkpoint(Model, tmp_path / "ckpt").eval()
        # the same codes; the scale went through 1 / (1 / g), rounded twice
        assert_same(loaded.state_dict(), first["frozen"], atol=1e-6)
        ids = workers.batch(99)[:, :-1]
        with torch.no_grad():
            torch.testing.assert_close(loaded(ids), frozen(ids), atol=1e-5, rtol=0)
            torch.testing.assert_close(frozen(ids), first["eval_logits"], atol=1e-4, rtol=0)


def test_meta_device_init_then_to_empty_and_reset_parameters(fsdp):
    from tribuild.runtime.packing import pack
    from tribuild.runtime.ternarize import ternarize

    first, second = fsdp
    assert_same(first["late_state"], second["late_state"])
    state = first["late_state"]
    key = "model.layers.0.mlp.gate_proj"
    codes, scale = ternarize(state[f"{key}.latent_weight"])
    assert torch.equal(state[f"{key}.weight"], pack(codes))
    assert torch.equal(state[f"{key}.weight_scale"], scale)
    assert state[f"{key}.latent_weight"].abs().max() > 0  # reset, not left empty
    assert first["late_loss"] == second["late_loss"]
    assert 3.0 < first["late_loss"][0] < 6.0  # ln(96) = 4.56: an untrained model's loss
