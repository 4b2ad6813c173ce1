"""`ipexconvert generate`: text in, text out through the stored tokenizer; ids without one; clear errors."""
from __future__ import annotations

import pytest
import torch

import ipexconvert

from ipxc_cli_helpers import expect_exit, norm

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")
pytestmark = pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13),
                                reason="torch.export of transformers' Llama needs torch >= 2.13 (see docs/architecture.md)")


@pytest.fixture(scope="module")
def decoder_paths(tmp_path_factory, tiny_llama_folder):
    root = tmp_path_factory.mktemp("generate")
    with_tokenizer = ipexconvert.optimize(tiny_llama_folder, output=root / "hf.ipxc").path
    ids_only = ipexconvert.optimize("example:tiny-llama", output=root / "ids.ipxc").path
    return with_tokenizer, ids_only


def test_generate_text_greedy_and_streamed(cli, decoder_paths):
    path, _ = decoder_paths
    model = ipexconvert.load_artifact(path)
    want = model.generate("the city is", max_new_tokens=8, stop_at_eos=False).text[0]
    result = cli("generate", path, "--prompt", "the city is", "-n", "8", "--ignore-eos")
    expect_exit(result, 0)
    assert result.stdout.strip() == want
    assert "prompt 3 tokens" in norm(result.stderr) and "8 new tokens" in norm(result.stderr)
    streamed = cli("generate", path, "--prompt", "the city is", "-n", "8", "--ignore-eos", "--stream")
    expect_exit(streamed, 0)
    assert " ".join(streamed.stdout.split()) == " ".join(want.split())


def test_a_list_of_texts_is_a_batch(decoder_paths):
    path, _ = decoder_paths
    model = ipexconvert.load_artifact(path)
    one = model.generate("the city is", max_new_tokens=6, stop_at_eos=False).text[0]
    assert model.generate(["the city is", "the city is"], max_new_tokens=6, stop_at_eos=False).text == [one, one]
    # texts of different token counts: each row as it generates alone
    other = model.generate("the city is large and old", max_new_tokens=6, stop_at_eos=False).text[0]
    texts = model.generate(["the city is", "the city is large and old"], max_new_tokens=6, stop_at_eos=False).text
    assert texts == [one, other]


def test_repeated_prompts_are_a_batch_one_line_each(cli, decoder_paths):
    path, ids_only = decoder_paths
    model = ipexconvert.load_artifact(path)
    texts = ["the city is", "the city is large and old"]
    alone = [model.generate(t, max_new_tokens=5, stop_at_eos=False).text[0] for t in texts]
    result = cli("generate", path, "--prompt", texts[0], "--prompt", texts[1], "-n", "5", "--ignore-eos")
    expect_exit(result, 0)
    assert result.stdout.strip().split("\n") == alone
    assert "prompts 3 + 6 tokens" in norm(result.stderr)
    by_ids = cli("generate", ids_only, "--ids", "5,6,7", "--ids", "8,9", "-n", "4", "--ignore-eos")
    expect_exit(by_ids, 0)
    ids_model = ipexconvert.load_artifact(ids_only)
    want = [ids_model.generate(row, max_new_tokens=4, stop_at_eos=False).new_ids[0] for row in ([5, 6, 7], [8, 9])]
    assert [[int(t) for t in line.split()] for line in by_ids.stdout.strip().split("\n")] == want
    streamed = cli("generate", path, "--prompt", texts[0], "--prompt", texts[1], "--stream")
    expect_exit(streamed, 2)
    assert "--stream prints one prompt" in norm(streamed.stderr)


def test_generate_ids_and_sampling_seed(cli, decoder_paths):
    _, path = decoder_paths
    model = ipexconvert.load_artifact(path)
    want = model.generate([5, 6, 7], max_new_tokens=6, stop_at_eos=False, temperature=0.9, seed=4).new_ids[0]
    result = cli("generate", path, "--ids", "5,6,7", "-n", "6", "--ignore-eos", "--temperature", "0.9", "--seed", "4")
    expect_exit(result, 0)
    assert [int(t) for t in result.stdout.split()] == want


@pytest.mark.parametrize("args, problem", [
    ([], "one of them"),
    (["--ids", "5,x"], "not a comma-separated list"),
    (["--prompt", "hello"], "stores no tokenizer"),
    (["--ids", "5", "-n", "300"], "exceed the model's 256 positions"),
])
def test_generate_errors_exit_2(cli, decoder_paths, args, problem):
    _, path = decoder_paths
    result = cli("generate", path, *args)
    expect_exit(result, 2)
    assert problem in norm(result.stderr)


def test_generate_on_an_encoder_exits_2(cli, cnn):
    result = cli("generate", cnn["path"], "--ids", "1,2")
    expect_exit(result, 2)
    assert "not a decoder" in norm(result.stderr)


def test_bench_of_a_decoder_times_generations(cli, decoder_paths):
    _, path = decoder_paths
    result = cli("bench", path, "--rounds", "2", "--prompt-tokens", "20", "--new-tokens", "4", "--json")
    expect_exit(result, 0)
    import json

    gen = json.loads(result.stdout)["generation"]
    assert gen["prompt_tokens"] == 20 and gen["new_tokens"] == 4 and gen["prefill_ms"] > 0
    assert gen["decode_ms_per_token"] > 0 and 0 < gen["bandwidth_share"] and gen["weight_mb_per_token"] > 0.5
    # The median token's attention reads ~22 positions (20 + 4 / 2) of 1 KiB of cache (2 layers x k, v x 2 kv heads
    # x 32 dims x 4 bytes); the share counting them is the weights' share scaled by the bytes.
    assert gen["cache_mb_per_token"] == pytest.approx(22 * 1024 / 1e6)
    cache_over_weights = gen["cache_mb_per_token"] / gen["weight_mb_per_token"]
    assert gen["read_share"] == pytest.approx(gen["bandwidth_share"] * (1 + cache_over_weights))


def test_inspect_of_a_decoder_shows_its_cache(cli, decoder_paths):
    path, ids_only = decoder_paths
    result = cli("inspect", path)
    expect_exit(result, 0)
    # 2 layers x (k, v) x 2 kv heads x 32 dims x 4 bytes
    assert "decoder: KV cache of 4 tensors (float32), 1.0 KiB per position, up to 256 positions; tokenizer stored" in norm(result.stdout)
    assert "tokenizer not stored (token ids only)" in norm(cli("inspect", ids_only).stdout)


def test_activations_flag_reaches_the_guard_and_inspect(cli, tiny_llama_folder, tmp_path):
    out = tmp_path / "f.ipxc"
    expect_exit(cli("optimize", tiny_llama_folder, "--dtype", "int4", "--activations", "float", "-o", out, "--no-timing"), 0)
    assert "in 1 round, float activations" in norm(cli("inspect", out).stdout)
    refused = cli("optimize", tiny_llama_folder, "--dtype", "int4", "--activations", "int7", "-o", tmp_path / "x.ipxc")
    expect_exit(refused, 2)
    assert "weight_only.activations" in norm(refused.stderr) and not (tmp_path / "x.ipxc").exists()


def test_an_int8_kv_cache_from_the_command_line(cli, tiny_llama_folder, tmp_path):
    """--kv-cache int8: inspect names the rows and their bytes (2 layers x (k, v) x 2 kv heads x (32 codes + a 4-byte
    scale)), generate runs over them; an unknown cache dtype exits 2 and writes nothing."""
    out = tmp_path / "kv8.ipxc"
    expect_exit(cli("optimize", tiny_llama_folder, "--dtype", "int4", "--kv-cache", "int8", "-o", out, "--no-timing"), 0)
    assert "decoder: KV cache of 4 tensors (int8 rows), 288 B per position" in norm(cli("inspect", out).stdout)
    generated = cli("generate", out, "--ids", "5,6,7", "-n", "4")
    expect_exit(generated, 0)
    refused = cli("optimize", tiny_llama_folder, "--dtype", "int4", "--kv-cache", "int4", "-o", tmp_path / "x.ipxc")
    expect_exit(refused, 2)
    assert "decoder.kv_cache" in norm(refused.stderr) and not (tmp_path / "x.ipxc").exists()
