"""Model sources: .pt2 archives, state-dict checkpoints with --model-factory, pickled modules
(refused unless trusted), Hugging Face folders, and the errors for paths that are none of these."""
from __future__ import annotations

import textwrap

import pytest
import torch
from safetensors.torch import save_file

from ipexconvert.api import load_artifact, optimize
from ipexconvert.errors import UnsafeCheckpointError, UserInputError

PASSES = ["remove_identity", "dead_code"]  # keep these tests independent of the optimisation passes

FACTORY_MODULE = "ipx_test_factory_models"
FACTORY_SOURCE = textwrap.dedent('''
    import torch
    from torch import nn


    class SmallNet(nn.Module):
        def __init__(self, width=4):
            super().__init__()
            self.conv = nn.Conv2d(3, width, 3, padding=1)
            self.head = nn.Linear(width, 5)

        def forward(self, x):
            y = torch.relu(self.conv(x)).mean((2, 3))
            return self.head(y)


    def build(width=4):
        return SmallNet(width)
''')


@pytest.fixture(scope="module")
def factory_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("factory")
    (folder / f"{FACTORY_MODULE}.py").write_text(FACTORY_SOURCE)
    return folder


@pytest.fixture
def factory(factory_dir, monkeypatch):
    """The factory module, importable as FACTORY_MODULE for the duration of one test."""
    monkeypatch.syspath_prepend(str(factory_dir))
    import importlib

    return importlib.import_module(FACTORY_MODULE)


def _image(batch: int) -> torch.Tensor:
    return torch.randn(batch, 3, 8, 8)


def _assert_artifact_matches(artifact_path, module, inputs: dict[str, torch.Tensor], atol=1e-5):
    loaded = load_artifact(artifact_path)
    got = loaded(**inputs)
    with torch.no_grad():
        want = module(**inputs)
    got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=atol, rtol=1e-4)


# ---- torch.export archives --------------------------------------------------------------------------------------


def test_pt2_round_trip_matches_the_original_module(factory, tmp_path):
    module = factory.build().eval()
    batch = torch.export.Dim("batch", min=1, max=16)
    ep = torch.export.export(module, (_image(2),), dynamic_shapes=({0: batch},))
    torch.export.save(ep, tmp_path / "model.pt2")

    result = optimize(tmp_path / "model.pt2", output=tmp_path / "model.ipxc", passes=PASSES, trust_pickle=True)

    assert result.manifest.source.kind == "export"
    assert result.manifest.source.sha256
    _assert_artifact_matches(result.path, module, {"x": _image(2)})
    _assert_artifact_matches(result.path, module, {"x": _image(5)})  # the dynamic batch survives the archive


def test_corrupt_pt2_is_a_user_input_error(tmp_path):
    (tmp_path / "broken.pt2").write_bytes(b"not a zip archive")
    with pytest.raises(UserInputError, match="not a readable torch.export archive") as info:
        optimize(tmp_path / "broken.pt2", output=tmp_path / "out.ipxc", passes=PASSES)
    assert "torch.export.save" in info.value.fix
    assert not (tmp_path / "out.ipxc").exists()


# ---- state-dict checkpoints with a model factory -------------------------------------------------------------------


def _save_state_dict(module, path):
    if path.suffix == ".safetensors":
        save_file({k: v.contiguous() for k, v in module.state_dict().items()}, str(path))
    else:
        torch.save(module.state_dict(), path)


@pytest.mark.parametrize("suffix", [".safetensors", ".pt"])
def test_state_dict_with_model_factory_loads_the_checkpoint_weights(factory, tmp_path, suffix):
    trained = factory.build(width=6).eval()  # random init: differs from what the factory builds next time
    checkpoint = tmp_path / f"weights{suffix}"
    _save_state_dict(trained, checkpoint)

    result = optimize(checkpoint, {"x": _image(2)}, output=tmp_path / "model.ipxc", passes=PASSES,
                      model_factory=f"{FACTORY_MODULE}:build", model_kwargs={"width": 6})

    assert result.manifest.source.kind == "state-dict"
    _assert_artifact_matches(result.path, trained, {"x": _image(2)})


def test_training_checkpoint_layout_with_state_dict_key_is_accepted(factory, tmp_path):
    trained = factory.build().eval()
    torch.save({"epoch": 3, "state_dict": trained.state_dict()}, tmp_path / "ckpt.pt")
    result = optimize(tmp_path / "ckpt.pt", {"x": _image(2)}, output=tmp_path / "model.ipxc", passes=PASSES,
                      model_factory=f"{FACTORY_MODULE}:build")
    _assert_artifact_matches(result.path, trained, {"x": _image(2)})


def test_state_dict_without_model_factory_asks_for_one(factory, tmp_path):
    _save_state_dict(factory.build(), tmp_path / "weights.safetensors")
    with pytest.raises(UserInputError, match="holds only weights") as info:
        optimize(tmp_path / "weights.safetensors", {"x": _image(2)}, output=tmp_path / "m.ipxc", passes=PASSES)
    assert "--model-factory" in info.value.fix


def test_state_dict_that_does_not_fit_the_factory_model_is_refused(factory, tmp_path):
    _save_state_dict(factory.build(width=6), tmp_path / "weights.safetensors")
    with pytest.raises(UserInputError, match="does not fit") as info:
        optimize(tmp_path / "weights.safetensors", {"x": _image(2)}, output=tmp_path / "m.ipxc", passes=PASSES,
                 model_factory=f"{FACTORY_MODULE}:build", model_kwargs={"width": 4})
    assert "--model-kwargs" in info.value.fix


@pytest.mark.parametrize("spec, problem", [
    ("no_colon_here", "not of the form package.module:function"),
    ("ipx_no_such_module_anywhere:build", "cannot import --model-factory"),
    (f"{FACTORY_MODULE}:no_such_function", "cannot import --model-factory"),
])
def test_bad_model_factory_is_a_user_input_error(factory, tmp_path, spec, problem):
    _save_state_dict(factory.build(), tmp_path / "weights.safetensors")
    with pytest.raises(UserInputError, match=problem):
        optimize(tmp_path / "weights.safetensors", {"x": _image(2)}, output=tmp_path / "m.ipxc", passes=PASSES,
                 model_factory=spec)


def test_truncated_safetensors_checkpoint_is_a_user_input_error(factory, tmp_path):
    path = tmp_path / "weights.safetensors"
    _save_state_dict(factory.build(), path)
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(UserInputError, match="not a readable safetensors file"):
        optimize(path, {"x": _image(2)}, output=tmp_path / "m.ipxc", passes=PASSES, model_factory=f"{FACTORY_MODULE}:build")


# ---- whole pickled modules -----------------------------------------------------------------------------------------------


def test_pickled_module_is_refused_without_trust_pickle(factory, tmp_path):
    torch.save(factory.build().eval(), tmp_path / "whole_model.pt")
    with pytest.raises(UnsafeCheckpointError) as info:
        optimize(tmp_path / "whole_model.pt", {"x": _image(2)}, output=tmp_path / "m.ipxc", passes=PASSES)
    assert "pickled" in info.value.problem and "arbitrary code" in info.value.problem
    assert "--trust-pickle" in info.value.fix
    assert not (tmp_path / "m.ipxc").exists()


def test_pickled_module_is_accepted_with_trust_pickle(factory, tmp_path):
    module = factory.build().eval()
    torch.save(module, tmp_path / "whole_model.pt")
    result = optimize(tmp_path / "whole_model.pt", {"x": _image(2)}, output=tmp_path / "m.ipxc", passes=PASSES,
                      trust_pickle=True)
    assert result.manifest.source.kind == "pickle"
    _assert_artifact_matches(result.path, module, {"x": _image(2)})


# ---- Hugging Face folders --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=32, max_position_embeddings=16)
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval()
    folder = tmp_path_factory.mktemp("tiny-bert")
    model.save_pretrained(folder)
    return folder, model


@pytest.fixture(scope="module")
def bert_artifact(bert_folder, tmp_path_factory):
    folder, _ = bert_folder
    return optimize(folder, output=tmp_path_factory.mktemp("bert-out") / "bert.ipxc", passes=PASSES)


def test_hf_folder_converts_with_named_outputs_and_dynamic_batch_and_seq(bert_artifact):
    manifest = bert_artifact.manifest
    assert manifest.source.kind == "hf-folder"
    assert [o.name for o in manifest.outputs] == ["last_hidden_state", "pooler_output"]
    assert [i.name for i in manifest.inputs] == ["input_ids", "attention_mask"]
    assert manifest.inputs[0].spec.shape == ["batch", "seq"]
    assert manifest.dims["seq"].max == 16  # the config's max_position_embeddings


@pytest.mark.parametrize("batch, seq", [(1, 16), (3, 7)])
def test_hf_folder_artifact_matches_the_transformers_model(bert_folder, bert_artifact, batch, seq):
    _, model = bert_folder
    input_ids = torch.randint(1, 64, (batch, seq))
    attention_mask = torch.ones(batch, seq, dtype=torch.int64)
    attention_mask[-1, seq // 2:] = 0  # padding in the last example
    got_hidden, got_pooled = load_artifact(bert_artifact.path)(input_ids, attention_mask)
    with torch.no_grad():
        want = model(input_ids=input_ids, attention_mask=attention_mask)
    torch.testing.assert_close(got_hidden, want.last_hidden_state, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got_pooled, want.pooler_output, atol=1e-4, rtol=1e-4)


def test_folder_without_config_json_is_refused(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(UserInputError, match="without config.json") as info:
        optimize(tmp_path, output=tmp_path / "m.ipxc", passes=PASSES)
    assert "Hugging Face model folder" in info.value.fix


def test_folder_without_safetensors_weights_is_refused(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    (tmp_path / "pytorch_model.bin").write_bytes(b"pickle")
    with pytest.raises(UserInputError, match=r"no \*\.safetensors weights") as info:
        optimize(tmp_path, output=tmp_path / "m.ipxc", passes=PASSES)
    assert "safe_serialization" in info.value.fix


# ---- paths that are no model ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["missing.pt2", "missing.safetensors", "missing_folder"])
def test_missing_path_says_it_does_not_exist(tmp_path, name):
    with pytest.raises(UserInputError, match="does not exist") as info:
        optimize(tmp_path / name, output=tmp_path / "m.ipxc", passes=PASSES)
    assert str(tmp_path / name) in info.value.problem
    assert info.value.fix


def test_unknown_file_kind_lists_what_is_supported(tmp_path):
    (tmp_path / "model.tflite").write_bytes(b"\x08\x01")
    with pytest.raises(UserInputError, match="cannot tell what kind of model") as info:
        optimize(tmp_path / "model.tflite", output=tmp_path / "m.ipxc", passes=PASSES)
    assert ".pt2" in info.value.fix and "Hugging Face" in info.value.fix


def test_unknown_example_name_lists_the_examples(tmp_path):
    with pytest.raises(UserInputError, match="tiny-cnn"):
        optimize("example:no-such-model", output=tmp_path / "m.ipxc", passes=PASSES)
