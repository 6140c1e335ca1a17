"""examples/bitnet/train.py on a tiny BitNetLM (one layer of width 32, 32 positions) and the
standard library's source: a few steps in one process, a resume that continues the losses
exactly, two DDP processes under torchrun against one process taking their micro-batches
(bit-identical) and one forward on the whole batch (close), the float twin, and the bad
input that must stop it before training (the full run's figures:
benchmarks/results/train_lm.md)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")
pytest.importorskip("rich")

from tests.codegen.harness import REPO  # noqa: E402

SCRIPT = REPO / "examples" / "bitnet" / "train.py"
TOML = """[project]
name = "train-lm-test"
sources = ["."]
out = "build"

[targets.lm]
entry = "bitnet_lm.tri:BitNetLM"
args = { vocab = 258, dim = 32, layers = 1, heads = 2, kv_heads = 1, hidden = 64 }
input = [1, 32]

[targets.wider]
entry = "bitnet_lm.tri:BitNetLM"
args = { vocab = 258, dim = 48, layers = 1, heads = 2, kv_heads = 1, hidden = 64 }
input = [1, 32]
"""


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("train_lm_example", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    folder = tmp_path_factory.mktemp("train_lm_project")  # its own compile cache
    shutil.copy(REPO / "models" / "bitnet_lm.tri", folder / "bitnet_lm.tri")
    (folder / "Tribuild.toml").write_text(TOML)
    return folder / "Tribuild.toml"


def argv(project, out, *more: str) -> list[str]:
    return [
        "--config", str(project), "--target", "lm", "--out", str(out), "--steps", "6",
        "--batch", "4", "--checkpoint-every", "3", "--eval-windows", "4",
        "--sample-tokens", "12", "--threads", "1", "--quiet", *more,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def uninterrupted(example, project, tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted")
    return example.main(argv(project, out)), out


def test_a_short_run_freezes_saves_reloads_and_samples(uninterrupted):
    result, out = uninterrupted
    assert result["steps"] == 6 and len(result["losses"]) == 6
    assert all(0 < loss < 7 for loss in result["losses"])  # ln(258) = 5.55 at the start
    assert result["train_files"] > 100 and result["held_out_files"] > 10  # the stdlib's
    assert 0 < result["unigram_bits_per_byte"] < 8
    # the packed checkpoint (bfloat16 floats) reads back to nearly the trained model
    assert result["packed_held_out_bits_per_byte"] == pytest.approx(
        result["held_out_bits_per_byte"], abs=0.05
    )
    assert (out / "packed" / "model.safetensors").exists()
    assert isinstance(result["sample"], str)


def test_a_resumed_run_continues_the_losses_exactly(example, project, uninterrupted, tmp_path):
    first = example.main(argv(project, tmp_path, "--max-steps-now", "4"))  # state at step 3
    assert first["steps"] == 4 and "held_out_bits_per_byte" not in first
    resumed = example.main(argv(project, tmp_path))
    assert resumed["resumed_from"] == 3
    assert resumed["losses"] == uninterrupted[0]["losses"]


DDP_STEPS = ["--steps", "16"]  # past where one forward on the whole batch parts from DDP


@pytest.fixture(scope="module")
def ddp(project, tmp_path_factory):
    """Two DDP processes under torchrun, 1 thread each: result.json and the output folder."""
    import json

    out = tmp_path_factory.mktemp("ddp")
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    env.pop("TRITON_INTERPRET", None)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node", "2", str(SCRIPT), *argv(project, out, *DDP_STEPS)]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert result["world"] == 2 and result["accumulate"] == 1
    return result, out


@pytest.fixture(scope="module")
def accumulated(example, project, tmp_path_factory):
    """One process of 1 thread taking each step's batch in 2 micro-batches: the DDP ranks'."""
    out = tmp_path_factory.mktemp("accumulated")
    return example.main(argv(project, out, *DDP_STEPS, "--accumulate", "2")), out


def test_two_ddp_processes_equal_one_process_accumulating_their_micro_batches(ddp, accumulated):
    # the same rows in the same order, the same gradients summed the same way (g0/2 + g1/2):
    # bit for bit, the losses and the state written after the last step
    (result, out), (alone, alone_out) = ddp, accumulated
    assert alone["world"] == 1 and alone["accumulate"] == 2
    assert alone["losses"] == result["losses"] and len(result["losses"]) == 16
    theirs = torch.load(out / "state.pt", weights_only=False)
    mine = torch.load(alone_out / "state.pt", weights_only=False)
    assert mine["step"] == theirs["step"] == 16
    for name, tensor in theirs["model"].items():
        assert torch.equal(mine["model"][name], tensor), name
    for index, slots in theirs["optim"]["state"].items():
        for slot, tensor in slots.items():
            assert torch.equal(mine["optim"]["state"][index][slot], tensor), (index, slot)


def test_two_ddp_processes_are_close_to_one_forward_on_the_whole_batch(example, project, ddp,
                                                                       tmp_path):  # fmt: skip
    # one forward on all 4 windows sums the batch's gradient in another order than the ranks'
    # 2-window sums added by the all-reduce: close, not equal (the int8/ternary rounding ties
    # can let such differences grow over the steps)
    alone = example.main(argv(project, tmp_path, *DDP_STEPS))
    torch.testing.assert_close(alone["losses"], ddp[0]["losses"], atol=1e-4, rtol=0)


def test_an_accumulating_run_resumes_exactly(example, project, accumulated, tmp_path):
    first = example.main(argv(project, tmp_path, *DDP_STEPS, "--accumulate", "2",
                              "--max-steps-now", "8"))  # fmt: skip
    assert first["steps"] == 8  # its state: step 6
    resumed = example.main(argv(project, tmp_path, *DDP_STEPS, "--accumulate", "2"))
    assert resumed["resumed_from"] == 6
    assert resumed["losses"] == accumulated[0]["losses"]


def test_the_float_twin_trains_and_saves_a_float_checkpoint(example, project, tmp_path):
    from tribuild.runtime.checkpoint import read_folder

    result = example.main(argv(project, tmp_path, "--float"))
    assert result["mode"] == "float" and len(result["losses"]) == 6
    tensors = read_folder(tmp_path / "float")
    assert tensors["model.layers.0.mlp.up_proj.weight"].shape == (64, 32)  # float, not packed


@pytest.mark.parametrize(
    "more, env, message",
    [
        (["--seq-len", "33"], {}, r"--seq-len 33 is longer than the model's 32 positions"),
        ([], {"WORLD_SIZE": "3"}, r"global batch \(4 windows, --batch\) must be a positive "
         r"multiple of the world size \(3 processes\)"),
        (["--accumulate", "3"], {}, r"global batch \(4 windows, --batch\) must be a positive "
         r"multiple of the world size \(1 process\) times --accumulate \(3\)"),
        (["--accumulate", "2"], {"WORLD_SIZE": "4"}, r"multiple of the world size \(4 "
         r"processes\) times --accumulate \(2\)"),
        (["--accumulate", "0"], {}, r"--accumulate 0: the number of micro-batches a step takes "
         r"must be at least 1"),
    ],
)  # fmt: skip
def test_bad_settings_stop_before_training(example, project, tmp_path, monkeypatch, more, env,
                                           message):  # fmt: skip
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit, match=message):
        example.main(argv(project, tmp_path / "out", *more))
    assert not (tmp_path / "out").exists()  # nothing started


def test_an_empty_corpus_folder_stops_before_training(example, project, tmp_path):
    (tmp_path / "corpus").mkdir()
    with pytest.raises(SystemExit, match=r"corpus folder holds 0 non-empty \*.py file"):
        example.main(argv(project, tmp_path / "out", "--corpus", str(tmp_path / "corpus")))
    assert not (tmp_path / "out").exists()


def test_a_state_from_another_config_stops_before_training(example, project, uninterrupted):
    _, out = uninterrupted  # its state.pt was written for target lm, batch 4
    state = (out / "state.pt").read_bytes()
    with pytest.raises(SystemExit, match=r"state.pt was written for another config: .*dim"):
        example.main([*argv(project, out), "--target", "wider"])
    with pytest.raises(SystemExit, match=r"another config: batch 4 \(here 2\)"):
        example.main([*argv(project, out), "--batch", "2"])
    assert (out / "state.pt").read_bytes() == state  # untouched
