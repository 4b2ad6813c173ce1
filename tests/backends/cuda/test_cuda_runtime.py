"""The CUDA backend end to end: artifacts converted on the CPU, loaded with device="cuda", against their own
CPU outputs; the plan replayed from a CUDA graph; input checks that must hold without a read-back.
CI has no GPU: those tests skip there with the reason, and the no-GPU error is tested instead."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import ipexconvert
from ipexconvert.backends.cuda import unavailable_reason
from ipexconvert.errors import UserInputError

NO_GPU = unavailable_reason()
needs_gpu = pytest.mark.skipif(NO_GPU is not None, reason=f"needs a CUDA GPU: {NO_GPU}")


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("cuda_artifacts")
    made = {}
    for example, dtype in (("tiny-cnn", "fp32"), ("tiny-cnn", "bf16"), ("tiny-cnn", "int8"),
                           ("tiny-bert", "fp32"), ("tiny-bert", "bf16"), ("tiny-bert", "int8")):
        path = folder / f"{example}.{dtype}.ipxc"
        ipexconvert.optimize(f"example:{example}", dtype=dtype, output=path, calib_synthetic=dtype == "int8")
        made[f"{example}.{dtype}"] = path
    return made


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a.double().flatten(), b.double().flatten(), dim=0))


@pytest.mark.skipif(NO_GPU is None, reason="this machine has a GPU: the no-GPU error cannot happen here")
def test_cuda_without_a_gpu_is_a_clear_user_error(tmp_path):
    path = tmp_path / "t.ipxc"
    ipexconvert.optimize("example:tiny-cnn", dtype="fp32", output=path)
    with pytest.raises(UserInputError, match="device cuda cannot be used"):
        ipexconvert.load_artifact(path, device="cuda")


# bf16 on the GPU against the same artifact on the CPU: two bf16 computations with different rounding.
MIN_COSINE = {"fp32": 0.99999, "bf16": 0.999, "int8": 0.999}


@needs_gpu
@pytest.mark.parametrize("name", ["tiny-cnn.fp32", "tiny-cnn.bf16", "tiny-cnn.int8",
                                  "tiny-bert.fp32", "tiny-bert.bf16", "tiny-bert.int8"])
def test_gpu_outputs_match_the_cpu(artifacts, name):
    from ipexconvert.artifact import read_example_inputs

    path = artifacts[name]
    inputs = read_example_inputs(path)
    cpu = ipexconvert.load_artifact(path, device="cpu").run_dict(inputs)
    model = ipexconvert.load_artifact(path, device="cuda")
    for call in range(3):  # warm-up + capture, then replays
        gpu = model.run_dict(inputs)
        for key, want in cpu.items():
            got = gpu[key]
            assert got.device.type == "cuda" and got.shape == want.shape and got.dtype == want.dtype
            c = cosine(got.cpu(), want)
            assert c >= MIN_COSINE[name.split(".")[1]], f"{name} {key} call {call}: cosine {c:.6f}"
    assert set(model.runner.graph_status().values()) == {"graph"}, model.runner.graph_status()


@needs_gpu
def test_each_shape_gets_its_own_graph_and_replays_read_new_inputs(artifacts):
    path = artifacts["tiny-bert.fp32"]
    model = ipexconvert.load_artifact(path, device="cuda")
    reference = ipexconvert.load_artifact(path, device="cpu")
    g = torch.Generator().manual_seed(0)
    for seq, padding in ((8, 0), (16, 3), (8, 5), (12, 0), (16, 7), (8, 2)):  # replays see new ids and masks
        ids = torch.randint(0, 1000, (2, seq), generator=g)
        mask = torch.ones(2, seq, dtype=torch.int64)
        mask[1, seq - padding:] = 0
        inputs = {"input_ids": ids, "attention_mask": mask}
        inputs = {k: v for k, v in inputs.items() if k in model.signature.input_names}
        got, want = model.run_dict(inputs), reference.run_dict(inputs)
        for key in want:
            assert cosine(got[key].cpu(), want[key]) >= 0.99999, f"seq {seq} {key}"
    assert len(model.runner.graph_status()) == 3


@needs_gpu
def test_ids_outside_the_table_are_refused_after_a_replay_and_the_model_still_works(artifacts):
    path = artifacts["tiny-bert.fp32"]
    model = ipexconvert.load_artifact(path, device="cuda")
    names = model.signature.input_names
    good = {n: torch.ones(1, 8, dtype=torch.int64) for n in names}
    first = model.run_dict(good)
    model.run_dict(good)  # now a replay
    bad = dict(good, input_ids=torch.full((1, 8), 10**6, dtype=torch.int64))
    with pytest.raises(UserInputError, match="outside an embedding table"):
        model.run_dict(bad)
    again = model.run_dict(good)
    assert torch.equal(again["last_hidden_state"], first["last_hidden_state"])
    # ids already on the GPU: checked there (a flag read after the replay), not on the host
    on_gpu = {k: v.cuda() for k, v in bad.items()}
    with pytest.raises(UserInputError, match="outside an embedding table"):
        model.run_dict(on_gpu)
    again = model.run_dict({k: v.cuda() for k, v in good.items()})
    assert torch.equal(again["last_hidden_state"], first["last_hidden_state"])


@needs_gpu
def test_nan_propagates_on_the_gpu(artifacts):
    model = ipexconvert.load_artifact(artifacts["tiny-cnn.fp32"], device="cuda")
    name = model.signature.input_names[0]
    x = torch.randn(1, 3, 64, 64)
    x[0, :, 5, 5] = float("nan")
    out = model(**{name: x})
    assert torch.isnan(out).any()


@needs_gpu
def test_int8_artifact_refuses_nan_on_the_gpu(artifacts):
    model = ipexconvert.load_artifact(artifacts["tiny-cnn.int8"], device="cuda")
    name = model.signature.input_names[0]
    x = torch.randn(1, 3, 64, 64)
    x[0, 0, 0, 0] = float("inf")
    with pytest.raises(UserInputError, match="NaN or Inf"):
        model(**{name: x})


@needs_gpu
def test_cli_run_bench_check_on_the_gpu(artifacts, tmp_path):
    from typer.testing import CliRunner

    from ipexconvert.cli import app

    path = str(artifacts["tiny-bert.bf16"])
    runner = CliRunner()
    result = runner.invoke(app, ["check", path, "--reference", "example:tiny-bert", "--device", "cuda"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["bench", path, "--device", "cuda", "--rounds", "3", "--against", "example:tiny-bert"])
    assert result.exit_code == 0, result.output
    assert "one CUDA graph replay per call" in result.output
    result = runner.invoke(app, ["run", path, "--device", "cuda", "-o", str(tmp_path / "o.safetensors")])
    assert result.exit_code == 0, result.output
