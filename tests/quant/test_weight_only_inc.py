"""GPTQ and AWQ through Intel Neural Compressor (quant/weight_only_inc.py), converted end to end on the tiny-llama folder
and calibrated on the built-in calibration sentences (the accuracy check reads the corpus, another text): per layer, our
codes dequantize to INC's own dequantized weight (int8: but where INC chose -128, stored as -127, one scale step off);
the artifacts pass the teacher-forced budget with every quantized layer taking INC's codes; GPTQ's layer outputs on the
calibration text are closer to float than round-to-nearest's; AWQ's rescaled norms are in the traced float program.
Also the refusals: no calibration text, no neural-compressor, a source GPTQ / AWQ do not run on.

Each conversion runs once per module, on MAX_WINDOWS_HERE calibration windows and 64 teacher-forced positions."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from torch import nn

from ipexconvert.api import OptimizeResult, optimize
from ipexconvert.errors import UserInputError
from ipexconvert.inspection import summarize, weight_only_codes_line
from ipexconvert.ir.ops.woq_linear import dequantize
from ipexconvert.quant import weight_only_inc
from ipexconvert.quant.options import WeightOnlyOptions
from ipexconvert.quant.weight_only import QuantizedWeight, quantize_weight

MAX_WINDOWS_HERE = 4
LAYERS = 14  # tiny-llama: 2 blocks of q, k, v, o, gate, up, down
needs_torch_2_13 = pytest.mark.skipif(
    tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13),
    reason="torch.export of transformers' Llama needs torch >= 2.13 (see docs/architecture.md)")


@pytest.fixture(scope="module")
def inc_version():
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    try:
        return weight_only_inc.check_available()
    except UserInputError as e:
        pytest.skip(f"{e.problem} ({e.fix})")


@pytest.fixture(scope="module")
def calib_text(tmp_path_factory) -> Path:
    from ipexconvert.examples.sentences import CALIBRATION_SENTENCES

    path = tmp_path_factory.mktemp("calibration") / "calibration.txt"
    path.write_text("\n".join(CALIBRATION_SENTENCES) + "\n", encoding="utf-8")
    return path


@dataclass
class Converted:
    result: OptimizeResult
    inc: dict[str, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)  # INC's dequantized weight, codes
    ours: dict[str, QuantizedWeight] = field(default_factory=dict)  # by INC module name ("lm.model.layers.0...")
    traced: list[nn.Module] = field(default_factory=list)  # what before_trace handed torch.export


def _convert(folder: Path, text: Path, out: Path, **settings) -> Converted:
    """optimize() with INC's layers and our codes of them recorded, and the module traced."""
    from neural_compressor.torch.algorithms.weight_only.modules import INCWeightOnlyLinear

    take, before_trace = weight_only_inc.take_codes, weight_only_inc.IncWeightOnly.before_trace
    seen = Converted(result=None)

    def recording_take(runner, floats, bits, symmetric):
        for name, m in runner.named_modules():
            if isinstance(m, INCWeightOnlyLinear):
                seen.inc[name] = (m.recover().float(), m.unpack()["int_weight"].to(torch.int32))
        codes, clamped = take(runner, floats, bits, symmetric)
        seen.ours.update(codes)
        return codes, clamped

    def recording_before_trace(self, subject):
        seen.traced.append(before_trace(self, subject))
        return seen.traced[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(weight_only_inc, "MAX_WINDOWS", MAX_WINDOWS_HERE)
        mp.setattr(weight_only_inc, "take_codes", recording_take)
        mp.setattr(weight_only_inc.IncWeightOnly, "before_trace", recording_before_trace)
        seen.result = optimize(folder, output=out, calib_text=text, decoder_positions=64, **settings)
    return seen


@pytest.fixture(scope="module")
def gptq_int4(inc_version, tiny_llama_folder, calib_text, tmp_path_factory) -> Converted:
    return _convert(tiny_llama_folder, calib_text, tmp_path_factory.mktemp("gptq4") / "t.ipxc", dtype="int4",
                    group_size=32, woq={"algorithm": "gptq"})


@pytest.fixture(scope="module")
def gptq_int8(inc_version, tiny_llama_folder, calib_text, tmp_path_factory) -> Converted:
    return _convert(tiny_llama_folder, calib_text, tmp_path_factory.mktemp("gptq8") / "t.ipxc", dtype="int8",
                    int8_scheme="weight-only", group_size="channel", woq={"algorithm": "gptq"})


@pytest.fixture(scope="module")
def awq_int4(inc_version, tiny_llama_folder, calib_text, tmp_path_factory) -> Converted:
    return _convert(tiny_llama_folder, calib_text, tmp_path_factory.mktemp("awq4") / "t.ipxc", dtype="int4",
                    group_size=32, woq={"algorithm": "awq", "symmetric": False})


def _dequantized(q: QuantizedWeight) -> torch.Tensor:
    return dequantize(q.codes, q.scales, q.zero_points, q.bits, q.group_size)


def _check_artifact(c: Converted, algorithm: str, clamped: int = 0) -> None:
    """Every quantized layer took INC's codes, the record says so, and the artifact met the teacher-forced budget."""
    m = c.result.manifest
    assert m.accuracy.passed and m.accuracy.decoder.passed
    changes = {p.name: p.changes for p in m.passes}["weight_only_quantize"]
    assert changes["quantized"] == changes["from_codes"] == 8  # q/k/v and gate/up merged: 4 GEMMs a block
    record = m.weight_only
    assert (record.algorithm, record.layers, record.int8_codes_clamped) == (algorithm, LAYERS, clamped)
    assert record.implementation.startswith("neural-compressor-pt ") and "calibration.txt" in record.calibration
    line = weight_only_codes_line(summarize(c.result.path)["manifest"]["weight_only"])
    assert line.startswith(f"{algorithm} (neural-compressor-pt ") and f"for {LAYERS} linears" in line


@needs_torch_2_13
def test_gptq_int4_codes_are_inc_s_exactly_and_the_artifact_passes(gptq_int4):
    c = gptq_int4
    assert len(c.inc) == len(c.ours) == LAYERS
    for name, (inc_weight, _) in c.inc.items():
        q = c.ours[name]
        assert (q.bits, q.group_size, q.zero_points, q.codes.dtype) == (4, 32, None, torch.uint8)
        assert torch.equal(_dequantized(q), inc_weight), name
    _check_artifact(c, "gptq")


@needs_torch_2_13
def test_gptq_int8_codes_are_inc_s_but_for_minus_128(gptq_int8):
    c = gptq_int8
    clamped = 0
    for name, (inc_weight, inc_codes) in c.inc.items():
        q = c.ours[name]
        assert (q.bits, q.group_size, q.codes.dtype) == (8, inc_codes.shape[1], torch.int8)  # one group: the channel
        assert int(inc_codes.min()) >= -128 and int(q.codes.min()) >= -127
        at = inc_codes == -128
        ours = _dequantized(q)
        assert torch.equal(ours[~at], inc_weight[~at]), name
        step = q.scales.expand_as(ours)[at]  # -127 * scale where INC had -128 * scale: one scale up
        assert torch.allclose(ours[at] - inc_weight[at], step, rtol=1e-5, atol=0), name
        clamped += int(at.sum())
    assert clamped > 0  # GPTQ's grid reaches -128 wherever a row's largest magnitude is negative
    _check_artifact(c, "gptq", clamped=clamped)


@needs_torch_2_13
def test_gptq_layer_outputs_on_the_calibration_text_are_closer_than_round_to_nearest(gptq_int4, tiny_llama_folder,
                                                                                      calib_text):
    from ipexconvert.examples.tiny_llama import build_tiny_llama_lm
    from ipexconvert.quant.convert import source_tokenizer

    lm = build_tiny_llama_lm()  # the weights the folder holds
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(weight_only_inc, "MAX_WINDOWS", MAX_WINDOWS_HERE)
        windows, _ = weight_only_inc.calibration_windows(
            calib_text, source_tokenizer(type("S", (), {"tokenizer_folder": tiny_llama_folder})), 256)
    inputs: dict[str, list[torch.Tensor]] = {}
    hooks = [m.register_forward_hook(lambda _m, args, _out, name=name: inputs.setdefault(name, []).append(args[0]))
             for name, m in lm.named_modules() if isinstance(m, nn.Linear)]
    with torch.no_grad():
        for window in windows:
            lm(input_ids=window, use_cache=False)
    for hook in hooks:
        hook.remove()
    weights = dict(lm.named_parameters())
    for name, q in gptq_int4.ours.items():
        short = name.removeprefix("lm.")
        w, x = weights[f"{short}.weight"].detach(), torch.cat([t.reshape(-1, t.shape[-1]) for t in inputs[short]])
        rtn = _dequantized(quantize_weight(w, 4, 32))
        gptq_error, rtn_error = (float((x @ (d - w).T).pow(2).mean().sqrt()) for d in (_dequantized(q), rtn))
        assert gptq_error < 0.9 * rtn_error, (name, gptq_error, rtn_error)  # measured: 0.16-0.66 of it


@needs_torch_2_13
def test_awq_asymmetric_codes_are_inc_s_and_its_scaled_norms_are_traced(awq_int4):
    from ipexconvert.examples.tiny_llama import build_tiny_llama_lm

    c = awq_int4
    assert len(c.inc) == LAYERS
    for name, (inc_weight, _) in c.inc.items():
        q = c.ours[name]
        assert (q.bits, q.group_size, q.zero_points.dtype) == (4, 32, torch.uint8) and int(q.zero_points.max()) <= 15
        assert torch.equal(_dequantized(q), inc_weight), name
    _check_artifact(c, "awq")
    (traced,) = c.traced
    original = build_tiny_llama_lm()
    norms = {n: p for n, p in traced.lm.named_parameters() if n.endswith("layernorm.weight")}
    changed = [n for n, p in norms.items() if not torch.equal(p, dict(original.named_parameters())[n])]
    assert changed  # AWQ divided the norms before q/k/v and gate/up by the scales it folded into those weights
    ids = torch.randint(3, 1000, (1, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():  # the float program AWQ rescaled computes what the original does
        got, want = traced.lm(input_ids=ids, use_cache=False).logits, original(input_ids=ids, use_cache=False).logits
    assert torch.allclose(got, want, rtol=1e-4, atol=1e-5)
    with safe_open(str(c.result.path), "pt") as artifact:  # and the artifact holds them
        for name in changed:
            assert torch.equal(artifact.get_tensor(f"lm.{name}"), norms[name].detach()), name


@needs_torch_2_13
def test_sources_gptq_does_not_run_on_are_refused(inc_version, calib_text, tmp_path):
    with pytest.raises(UserInputError, match="runs on Hugging Face causal LMs") as err:
        optimize("example:tiny-bert", dtype="int4", woq={"algorithm": "gptq"}, calib_text=calib_text,
                 output=tmp_path / "b.ipxc")
    assert "--woq-algorithm rtn" in err.value.fix
    with pytest.raises(UserInputError, match="needs the model's tokenizer"):  # the example has no tokenizer
        optimize("example:tiny-llama", dtype="int4", woq={"algorithm": "awq"}, calib_text=calib_text,
                 output=tmp_path / "l.ipxc")
    assert not list(tmp_path.glob("*.ipxc"))


def test_gptq_without_calibration_text_is_refused_before_anything_loads(tmp_path):
    settings = WeightOnlyOptions(algorithm="gptq")
    with pytest.raises(UserInputError, match="none was given") as err:
        weight_only_inc.prepare_run(settings, 4, None)
    assert "--calib-text" in err.value.fix
    with pytest.raises(UserInputError, match="is not a file"):
        weight_only_inc.prepare_run(settings, 4, tmp_path / "missing.txt")


def test_a_missing_neural_compressor_names_the_package_to_install(monkeypatch):
    pytest.importorskip("transformers")
    for name in ("neural_compressor", "neural_compressor.torch", "neural_compressor.torch.quantization"):
        monkeypatch.setitem(sys.modules, name, None)  # import of it fails as if not installed
    with pytest.raises(UserInputError, match="neural_compressor") as err:
        weight_only_inc.check_available()
    assert "pip install neural-compressor-pt" in err.value.fix


def test_calibration_windows_are_spread_evenly_and_short_texts_refused(tmp_path):
    class Words:  # a tokenizer: one id per word
        def __call__(self, text, verbose=True):
            return {"input_ids": list(range(len(text.split())))}

    path = tmp_path / "t.txt"
    path.write_text(" ".join(["w"] * 1500))
    windows, total = weight_only_inc.calibration_windows(path, Words(), max_positions=4096)
    assert total == 1500 and len(windows) == 1500 // weight_only_inc.WINDOW_TOKENS < weight_only_inc.MAX_WINDOWS
    starts = [int(w[0, 0]) for w in windows]
    assert starts[0] == 0 and starts[-1] + weight_only_inc.WINDOW_TOKENS == 1500
    assert all(b - a >= weight_only_inc.WINDOW_TOKENS for a, b in zip(starts, starts[1:]))
    windows, _ = weight_only_inc.calibration_windows(path, Words(), max_positions=64)  # capped by the positions
    assert {tuple(w.shape) for w in windows} == {(1, 64)} and len(windows) == weight_only_inc.MAX_WINDOWS
    path.write_text("too short")
    with pytest.raises(UserInputError, match="fewer than"):
        weight_only_inc.calibration_windows(path, Words(), max_positions=4096)
