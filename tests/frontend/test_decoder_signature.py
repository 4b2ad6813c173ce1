"""frontend/decoder_signature.py: any imported model whose signature is a decoder's (input_ids and past_* in, logits
and present_* out) gets the manifest's decoder record, whatever the source: a hand-written nn.Module converts to an
artifact whose generate() gives the module's own greedy tokens, so does its .pt2 archive (dims named by torch), and a
signature that names a cache but breaks the contract is a clear UserInputError (exit 2)."""
from __future__ import annotations

import pytest
import torch

import ipexconvert
from ipexconvert.errors import UserInputError
from ipexconvert.frontend.base import ImportRequest, import_model
from ipexconvert.frontend.decoder_signature import decoder_from_signature
from ipexconvert.ir import Graph
from ipexconvert.ir.spec import DimRange, TensorSpec

import tiny_decoder
from tiny_decoder import CACHE, LAYERS, VOCAB, TinyDecoder, eager_greedy

NEW_TOKENS = 20


# ---- the record of a signature (graphs written here) ------------------------------------------------------------------

def _signature(layers: int = 2, logits=("batch", 1, VOCAB)) -> tuple[dict, dict, dict]:
    inputs = {"input_ids": ("int64", ["batch", "seq"])}
    outputs = {"logits": ("float32", list(logits))}
    for i in range(layers):
        for kind in ("key", "value"):
            inputs[f"past_{kind}_{i}"] = ("float32", ["batch", 2, "past", 16])
            outputs[f"present_{kind}_{i}"] = ("float32", ["batch", 2, "past + seq", 16])
    dims = {"batch": (1, 8), "seq": (1, 128), "past": (0, 127)}
    return inputs, outputs, dims


def _graph(inputs: dict, outputs: dict, dims: dict) -> Graph:
    values = {name: TensorSpec(dtype=dtype, shape=shape) for name, (dtype, shape) in {**inputs, **outputs}.items()}
    return Graph(inputs=list(inputs), outputs=list(outputs), nodes=[], values=values,
                 dims={name: DimRange(min=lo, max=hi) for name, (lo, hi) in dims.items()})


def test_a_decoder_signature_gets_its_record():
    record = decoder_from_signature(_graph(*_signature()), "model")
    assert record.cache == [("past_key_0", "present_key_0"), ("past_value_0", "present_value_0"),
                            ("past_key_1", "present_key_1"), ("past_value_1", "present_value_1")]
    assert (record.input_ids, record.logits, record.cache_dim) == ("input_ids", "logits", "past")
    assert record.eos_token_ids == [] and record.bos_token_id is None and record.tokenizer is None


def test_logits_of_every_position_and_other_dim_names_are_accepted():
    inputs, outputs, dims = _signature(logits=("b", "s", VOCAB))
    rename = {"batch": "b", "seq": "s", "past": "cached"}

    def renamed(shape):
        return [rename.get(d, d) if d != "past + seq" else "cached + s" for d in shape]

    inputs = {n: (t, renamed(s)) for n, (t, s) in inputs.items()}
    outputs = {n: (t, renamed(s) if n != "logits" else s) for n, (t, s) in outputs.items()}
    dims = {rename[n]: r for n, r in dims.items()}
    assert decoder_from_signature(_graph(inputs, outputs, dims), "model").cache_dim == "cached"


def test_a_signature_without_a_cache_is_no_decoder():
    inputs = {"input_ids": ("int64", ["batch", "seq"])}
    assert decoder_from_signature(_graph(inputs, {"logits": ("float32", ["batch", "seq", VOCAB])},
                                         {"batch": (1, 8), "seq": (1, 128)}), "model") is None


def _edit(change):
    inputs, outputs, dims = _signature()
    change(inputs, outputs, dims)
    return _graph(inputs, outputs, dims)


@pytest.mark.parametrize("change, problem", [
    (lambda i, o, d: o.update(past_key_2=o.pop("present_key_1")), "past_key_2 is an output"),
    (lambda i, o, d: i.pop("input_ids"), "has no input_ids input"),
    (lambda i, o, d: i.update(input_ids=("int32", ["batch", "seq"])), "input_ids is int32"),
    (lambda i, o, d: i.update(input_ids=("int64", ["batch", 1])), "sequence dim of input_ids is fixed at 1"),
    (lambda i, o, d: o.pop("present_value_1"), "it lacks present_value_1"),
    (lambda i, o, d: [i.pop("past_key_1"), o.pop("present_key_1")], "it lacks past_key_1, present_key_1"),
    (lambda i, o, d: i.update(position_ids=("int64", ["batch", "seq"])), "inputs other than input_ids and the cache"),
    (lambda i, o, d: o.update(hidden=("float32", ["batch", "seq", 32])), "outputs other than logits and the cache"),
    (lambda i, o, d: o.update(logits=("float32", ["batch", VOCAB])), "logits is float32 [batch, 256]"),
    (lambda i, o, d: o.update(logits=("float32", ["batch", 3, VOCAB])), "not float [batch, 1, vocab]"),
    (lambda i, o, d: i.update(past_value_0=("float32", ["batch", "past", 32])), "past_value_0 is float32 [batch, past, 32]"),
    (lambda i, o, d: i.update(past_key_0=("float32", ["batch", 2, 7, 16])), "(axis 2, 7) is not a dynamic dim"),
    (lambda i, o, d: [i.update(past_key_1=("float32", ["batch", 2, "other", 16])), d.update(other=(0, 9))],
     "past_key_1's cached length is other, where earlier cache tensors have past"),
    (lambda i, o, d: d.update(past=(1, 127)), "the cached length past starts at 1"),
    (lambda i, o, d: o.update(present_key_0=("float32", ["batch", 2, "seq", 16])), "present_key_0 is float32 [batch, 2, seq, 16]"),
    (lambda i, o, d: o.update(present_value_1=("bfloat16", ["batch", 2, "past + seq", 16])), "not past_value_1 with the new"),
])
def test_an_inconsistent_decoder_signature_is_refused(change, problem):
    with pytest.raises(UserInputError, match="looks like a decoder") as caught:
        decoder_from_signature(_edit(change), "model")
    assert problem in caught.value.problem and caught.value.fix and caught.value.exit_code == 2


# ---- a module of the signature, end to end ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def module():
    return TinyDecoder()


@pytest.fixture(scope="module")
def artifact(module, tmp_path_factory):
    return ipexconvert.optimize(module, tiny_decoder.example_inputs(), dynamic_dims=tiny_decoder.dynamic_dims(),
                                output=tmp_path_factory.mktemp("own-decoder") / "own.ipxc")


def _prompt(batch: int, length: int, seed: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("batch, length", [(1, 7), (2, 5)])
def test_a_module_of_the_signature_generates_its_own_greedy_tokens(module, artifact, batch, length):
    record = artifact.manifest.decoder
    assert record is not None and record.cache_dim == "past" and len(record.cache) == 2 * LAYERS
    appends = [p.changes["cache_appends"] for p in artifact.manifest.passes if p.name == "cache_append"]
    assert appends == [2 * LAYERS]  # the cache grows in place
    model = ipexconvert.load_artifact(artifact.path)
    prompt = _prompt(batch, length, seed=length)
    assert model.generate(prompt, max_new_tokens=NEW_TOKENS, stop_at_eos=False).new_ids == \
        eager_greedy(module, prompt, NEW_TOKENS)
    streamed = [step.tolist() for step in model.stream(prompt, max_new_tokens=NEW_TOKENS, stop_at_eos=False)]
    assert [list(row) for row in zip(*streamed)] == eager_greedy(module, prompt, NEW_TOKENS)


def test_logits_of_every_position_generate_as_well(tmp_path):
    module = TinyDecoder(all_logits=True, seed=1)
    result = ipexconvert.optimize(module, tiny_decoder.example_inputs(), dynamic_dims=tiny_decoder.dynamic_dims(),
                                  output=tmp_path / "all.ipxc")
    assert [o.spec.shape for o in result.manifest.outputs if o.name == "logits"] == [["batch", "seq", VOCAB]]
    prompt = _prompt(1, 9, seed=3)
    got = ipexconvert.load_artifact(result.path).generate(prompt, max_new_tokens=NEW_TOKENS, stop_at_eos=False)
    assert got.new_ids == eager_greedy(module, prompt, NEW_TOKENS)


def test_a_pt2_archive_of_the_module_generates_too(module, tmp_path):
    """A saved archive's dims are torch's symbols (here it even gives past_key_1 a length symbol of its own), so the
    user names them as for a module; the cache dim need not be called `past`."""
    inputs = tiny_decoder.example_inputs(batch=2)
    batch, seq = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("seq", min=1, max=tiny_decoder.MAX_POSITIONS)
    past = torch.export.Dim("past", min=0, max=tiny_decoder.MAX_POSITIONS - 1)
    shapes = {"input_ids": {0: batch, 1: seq}, **{name: {0: batch, 2: past} for name in CACHE}}
    torch.export.save(torch.export.export(module, (), inputs, dynamic_shapes=shapes, strict=False), tmp_path / "own.pt2")
    result = ipexconvert.optimize(tmp_path / "own.pt2", trust_pickle=True, output=tmp_path / "own.ipxc",
                                  dynamic_dims=tiny_decoder.dynamic_dims(cache_dim="cached"))
    record = result.manifest.decoder
    assert record is not None and record.cache_dim == "cached" and result.manifest.dims["cached"].min == 0
    prompt = _prompt(2, 6, seed=4)
    got = ipexconvert.load_artifact(result.path).generate(prompt, max_new_tokens=NEW_TOKENS, stop_at_eos=False)
    assert got.new_ids == eager_greedy(module, prompt, NEW_TOKENS)


# ---- modules that break the signature ---------------------------------------------------------------------------------

def _import(module, dims=None, inputs=None):
    return import_model(module, ImportRequest(example_inputs=inputs or tiny_decoder.example_inputs(),
                                              dynamic_dims=dims or tiny_decoder.dynamic_dims()))


@pytest.mark.parametrize("module, dims, problem", [
    (TinyDecoder(outputs="tuple"), None, "its outputs are output_0, output_1"),
    (TinyDecoder(drop=("present_value_1",)), None, "it lacks present_value_1"),
    (TinyDecoder(logits_rank2=True), None, "logits is float32 [batch, 256], not float [batch, 1, vocab]"),
    (TinyDecoder(present_new_only=True), None, "present_key_0 is float32 [batch, 2, seq, 16], not past_key_0 with"),
    (TinyDecoder(), tiny_decoder.dynamic_dims(cache_min=1), "the cached length past starts at 1"),
], ids=["tuple-outputs", "missing-present", "logits-rank-2", "present-without-past", "cache-from-1"])
def test_a_module_that_breaks_the_signature_is_a_clear_error(module, dims, problem):
    with pytest.raises(UserInputError, match="looks like a decoder") as caught:
        _import(module, dims)
    assert problem in caught.value.problem and caught.value.exit_code == 2


def test_an_input_generate_would_not_feed_is_refused():
    inputs = tiny_decoder.example_inputs()
    inputs = {"input_ids": inputs.pop("input_ids"), "attention_mask": torch.ones(1, 6, dtype=torch.int64), **inputs}
    dims = tiny_decoder.dynamic_dims()
    dims["attention_mask"] = dims["input_ids"]
    with pytest.raises(UserInputError, match="inputs other than input_ids and the cache \\(attention_mask\\)"):
        _import(tiny_decoder.WithAttentionMask(), dims, inputs)


def test_a_module_without_a_cache_is_not_a_decoder():
    class Classifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.head = torch.nn.Embedding(VOCAB, 8), torch.nn.Linear(8, 3)

        def forward(self, input_ids):
            return {"logits": self.head(self.embed(input_ids).mean(1))}

    imported = _import(Classifier(), {}, {"input_ids": torch.randint(0, VOCAB, (2, 5))})
    assert imported.decoder is None and imported.program.graph.outputs == ["logits"]  # a dict's keys name the outputs

