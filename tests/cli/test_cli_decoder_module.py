"""`ipexconvert optimize` of a user's own decoder (a checkpoint and --model-factory, the signature declared with
--input): --eos-token-id and --tokenizer reach the artifact, `generate` drives it, and a module that breaks the
decoder signature exits 2 with what breaks."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

import ipexconvert

import tiny_decoder
from ipxc_cli_helpers import expect_exit, expect_usage_error, norm


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("own-decoder") / "own.safetensors"
    save_file({k: v.contiguous() for k, v in tiny_decoder.build(seed=3).state_dict().items()}, str(path))
    return path


def _inputs() -> list[str]:
    return [arg for text in tiny_decoder.input_args() for arg in ("--input", text)]


def test_optimize_with_decoder_flags_then_generate(cli, checkpoint, tmp_path):
    out = tmp_path / "own.ipxc"
    result = cli("optimize", checkpoint, "--model-factory", "tiny_decoder:build", "--model-kwargs", '{"seed": 3}',
                 *_inputs(), "--eos-token-id", "7", "--eos-token-id", "9", "--bos-token-id", "1", "-o", out,
                 "--no-timing", "--json")
    expect_exit(result, 0)
    decoder = json.loads(result.stdout)["manifest"]["decoder"]
    assert (decoder["eos_token_ids"], decoder["bos_token_id"], decoder["cache_dim"]) == ([7, 9], 1, "past")
    want = ipexconvert.load_artifact(out).generate([5, 6, 7], max_new_tokens=6, stop_at_eos=False).new_ids[0]
    assert want == tiny_decoder.eager_greedy(tiny_decoder.build(seed=3), torch.tensor([[5, 6, 7]]), 6)[0]
    generated = cli("generate", out, "--ids", "5,6,7", "-n", "6", "--ignore-eos")
    expect_exit(generated, 0)
    assert [int(t) for t in generated.stdout.split()] == want


def test_a_tokenizer_that_is_not_a_file_exits_2(cli, checkpoint, tmp_path):
    result = cli("optimize", checkpoint, "--model-factory", "tiny_decoder:build", *_inputs(),
                 "--tokenizer", tmp_path / "none.json", "-o", tmp_path / "own.ipxc", "--no-timing")
    expect_usage_error(result, "none.json is not a file")


def test_a_module_that_breaks_the_signature_exits_2(cli, checkpoint, tmp_path):
    result = cli("optimize", checkpoint, "--model-factory", "tiny_decoder:build",
                 "--model-kwargs", '{"drop": ["present_value_1"]}', *_inputs(), "-o", tmp_path / "own.ipxc",
                 "--no-timing")
    text = expect_usage_error(result, "looks like a decoder", "it lacks present_value_1")
    assert "docs/decoders.md" in text and not (tmp_path / "own.ipxc").exists()


def test_decoder_flags_on_a_model_that_is_not_a_decoder_exit_2(cli, small_checkpoint, tmp_path):
    result = cli("optimize", small_checkpoint, "--model-factory", "ipxc_cli_testmodels:build", "--model-kwargs",
                 '{"hidden": 12}', "--input", "x:batch,16",
                 "--eos-token-id", "2", "-o", tmp_path / "small.ipxc", "--no-timing")
    assert "apply to decoders" in norm(expect_usage_error(result))
