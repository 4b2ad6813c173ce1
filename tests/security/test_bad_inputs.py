"""Hostile or odd inputs to the conversion frontend and the CLI: each ends in a clear error (exit 2) or a
truthful result, never an internal error (exit 3), code run from a file, a stray temp file, or a NaN
silently turned into a number.

- a .pt2 archive runs code when torch.export.load reads it (pickled sample inputs, shape expressions
  handed to sympify): refused without --trust-pickle;
- token ids outside the vocabulary, tensors the kernels cannot read (float8, quantized, meta, sparse,
  complex, nested, mkldnn), unwritable -o paths, huge or empty example inputs, a constant with a
  symbolic shape in `inspect`: exit 2 with the problem and the fix;
- NaN: the native attention kernel keeps NaN scores NaN (as torch does); `run` reports NaN/Inf and
  `check` fails when the artifact's NaN/Inf are not where the reference has them;
- SIGINT/SIGTERM: temp files removed, and the message says whether the output was written.
"""
from __future__ import annotations

import errno
import glob
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn
from typer.testing import CliRunner

import ipexconvert
from ipexconvert.cli import app
from ipexconvert.errors import UnsafeCheckpointError, UserInputError

from security_helpers import REPO, rewrite_artifact

runner = CliRunner(env={"COLUMNS": "400", "IPEXCONVERT_DEBUG": None})


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def norm(text: str) -> str:
    return " ".join(text.split())


def expect(result, code: int, *fragments: str) -> str:
    """The exit code, and the fragments in stderr (whitespace-normalised); returns that text."""
    text = norm(result.stderr)
    assert result.exit_code == code, f"exit {result.exit_code}, wanted {code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in: {text}"
    return text


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# ---- .pt2 archives run code when loaded ----------------------------------------------------------------------------


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


@pytest.fixture(scope="module")
def small_pt2(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("pt2") / "small.pt2"
    batch = torch.export.Dim("batch", min=1, max=64)
    torch.export.save(torch.export.export(Small().eval(), (torch.randn(2, 16),), dynamic_shapes=({0: batch},)), str(path))
    return path


class _OpenOnLoad:
    """Unpickling this calls open(marker, "w"): the marker file proves code from the archive ran."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _rewrite_pt2(src: Path, dst: Path, member_suffix: str, edit) -> Path:
    """A copy of a .pt2 archive with one member (found by the end of its name) replaced by edit(bytes)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        names = [i.filename for i in zin.infolist()]
        assert any(n.endswith(member_suffix) for n in names), names
        for info in zin.infolist():
            data = zin.read(info.filename)
            zout.writestr(info, edit(data) if info.filename.endswith(member_suffix) else data)
    return dst


def _pickled_sample_inputs(marker: Path):
    def edit(_data: bytes) -> bytes:
        buffer = io.BytesIO()
        torch.save(_OpenOnLoad(marker), buffer)
        return buffer.getvalue()
    return "data/sample_inputs/model.pt", edit


def _sympified_shape(marker: Path):
    # torch.export.load hands shape expressions to sympy.sympify, which evaluates them as Python
    def edit(data: bytes) -> bytes:
        text = data.decode()
        symbol = re.search(r"Symbol\('\w+', positive=True, integer=True\)", text)
        assert symbol, "no symbolic batch dim in the exported graph"
        return text.replace(symbol[0], f"__import__('builtins').open({str(marker)!r}, 'w') and {symbol[0]}").encode()
    return "models/model.json", edit


@pytest.mark.parametrize("attack", [_pickled_sample_inputs, _sympified_shape], ids=["pickle", "sympify"])
def test_hostile_pt2_is_refused_without_trust_pickle_and_runs_nothing(small_pt2, tiny_cnn_artifact, tmp_path, attack):
    marker = tmp_path / "code-ran"
    member, edit = attack(marker)
    hostile = _rewrite_pt2(small_pt2, tmp_path / "hostile.pt2", member, edit)
    out = tmp_path / "out"
    out.mkdir()

    result = cli("optimize", hostile, "-o", out / "m.ipxc", "--no-timing")

    expect(result, 2, "torch.export archive", "runs code", "--trust-pickle")
    assert not marker.exists(), "optimize ran code from the .pt2 archive"
    assert leftovers(out) == []
    # check --reference reads sources the same way (the artifact loads and runs first; then the reference is refused)
    expect(cli("check", tiny_cnn_artifact, "--reference", hostile), 2, "--trust-pickle")
    assert not marker.exists()


def test_pt2_converts_with_trust_pickle(small_pt2, tmp_path):
    expect(cli("optimize", small_pt2, "-o", tmp_path / "refused.ipxc", "--no-timing"), 2, "--trust-pickle")
    assert not (tmp_path / "refused.ipxc").exists()

    result = cli("optimize", small_pt2, "--trust-pickle", "-o", tmp_path / "m.ipxc", "--no-timing")

    assert result.exit_code == 0, result.stderr
    x = torch.randn(5, 16)
    torch.manual_seed(0)
    with torch.no_grad():
        torch.testing.assert_close(ipexconvert.load_artifact(tmp_path / "m.ipxc")(x), Small().eval()(x))


def test_bench_against_a_pt2_needs_trust_pickle_too(small_pt2, tmp_path):
    assert cli("optimize", small_pt2, "--trust-pickle", "-o", tmp_path / "m.ipxc", "--no-timing").exit_code == 0
    base = ["bench", tmp_path / "m.ipxc", "--against", small_pt2, "--warmup", "0", "--rounds", "1"]
    expect(cli(*base), 2, "--trust-pickle")
    trusted = cli(*base, "--trust-pickle")
    assert trusted.exit_code == 0, trusted.stderr


def test_pt2_refusal_is_an_unsafe_checkpoint_error_in_the_api(small_pt2, tmp_path):
    with pytest.raises(UnsafeCheckpointError) as info:
        ipexconvert.optimize(small_pt2, output=tmp_path / "m.ipxc")
    assert "--trust-pickle" in info.value.fix and "--model-factory" in info.value.fix


def test_junk_pt2_is_still_unreadable_rather_than_untrusted(tmp_path):
    (tmp_path / "junk.pt2").write_bytes(b"not a zip")
    expect(cli("optimize", tmp_path / "junk.pt2", "-o", tmp_path / "m.ipxc"), 2, "not a readable torch.export archive")


# ---- token ids outside the vocabulary ------------------------------------------------------------------------------


def _bert_inputs(ids_value: int | None = None) -> dict[str, torch.Tensor]:
    ids = torch.randint(1, 100, (2, 8))
    if ids_value is not None:
        ids[1, 3] = ids_value
    return {"input_ids": ids, "attention_mask": torch.ones(2, 8, dtype=torch.int64)}


@pytest.mark.parametrize("bad", [10**6, -1, 1000])
def test_token_id_outside_the_vocabulary_is_a_user_input_error(tiny_bert_artifact, bad):
    model = ipexconvert.load_artifact(tiny_bert_artifact)
    with pytest.raises(UserInputError) as info:
        model.run_dict(_bert_inputs(bad))
    assert str(bad) in info.value.problem and "0..999" in info.value.problem  # tiny-bert's vocabulary is 1000
    assert "0..999" in info.value.fix
    model.run_dict(_bert_inputs(999))  # the last valid id still runs


def test_token_id_outside_the_vocabulary_exits_2_in_run(tiny_bert_artifact, tmp_path):
    save_file(_bert_inputs(10**6), str(tmp_path / "ids.safetensors"))
    expect(cli("run", tiny_bert_artifact, "--inputs", tmp_path / "ids.safetensors"), 2, "1000000", "valid ids are 0..999")


# ---- tensors the kernels cannot read -------------------------------------------------------------------------------


def _image():
    return torch.randn(1, 3, 64, 64)


ODD_TENSORS = {
    "float8": (lambda: _image().to(torch.float8_e4m3fn), "float8_e4m3fn"),
    "quint8": (lambda: torch.quantize_per_tensor(_image(), 0.1, 0, torch.quint8), "quantized"),
    "meta": (lambda: _image().to("meta"), "meta"),
    "sparse": (lambda: _image().to_sparse(), "sparse_coo"),
    "complex": (lambda: _image().to(torch.complex64), "complex64"),
    "nested": (lambda: torch.nested.nested_tensor([_image()[0], _image()[0]]), "nested"),
    "mkldnn": (lambda: _image().to_mkldnn(), "mkldnn"),
    "uint16": (lambda: _image().to(torch.uint16), "uint16"),
}


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("kind", list(ODD_TENSORS))
@pytest.mark.parametrize("call", ["call", "run_dict", "run_list"])
def test_tensors_the_kernels_cannot_read_are_refused(tiny_cnn_artifact, kind, call):
    make, fragment = ODD_TENSORS[kind]
    model = ipexconvert.load_artifact(tiny_cnn_artifact)
    t = make()
    with pytest.raises(UserInputError) as info:
        {"call": lambda: model(t), "run_dict": lambda: model.run_dict({"pixel_values": t}),
         "run_list": lambda: model.run_list([t])}[call]()
    assert "pixel_values" in info.value.problem and fragment in info.value.problem
    assert info.value.fix


def test_float8_inputs_file_exits_2_in_run(tiny_cnn_artifact, tmp_path):
    save_file({"pixel_values": _image().to(torch.float8_e4m3fn)}, str(tmp_path / "f8.safetensors"))
    expect(cli("run", tiny_cnn_artifact, "--inputs", tmp_path / "f8.safetensors"), 2, "float8_e4m3fn", "float32")


def test_wrong_input_count_and_unreadable_numpy_arrays(tiny_cnn_artifact):
    model = ipexconvert.load_artifact(tiny_cnn_artifact)
    with pytest.raises(UserInputError, match="takes 1 input"):
        model.run_list([])
    with pytest.raises(UserInputError, match="numpy array"):
        model(np.array([[object()]], dtype=object))


# ---- outputs that cannot be written --------------------------------------------------------------------------------


@pytest.fixture
def a_file(tmp_path) -> Path:
    path = tmp_path / "a-file"
    path.write_text("not a folder")
    return path


def test_optimize_output_under_a_file_exits_2_before_converting(a_file, tmp_path):
    text = expect(cli("optimize", "example:tiny-cnn", "-o", a_file / "m.ipxc", "--no-timing"), 2, "is a file, not a folder")
    assert "loading model" not in text
    assert leftovers(tmp_path) == ["a-file"]


@pytest.mark.parametrize("command", ["optimize", "run"])
def test_output_in_proc_exits_2(tiny_cnn_artifact, command):
    args = ["example:tiny-cnn", "--no-timing"] if command == "optimize" else [tiny_cnn_artifact]
    expect(cli(command, *args, "-o", "/proc/ipexconvert-test.out"), 2, "cannot write -o /proc/ipexconvert-test.out")


@pytest.mark.parametrize("command", ["optimize", "run"])
def test_output_onto_a_fifo_is_refused(tiny_cnn_artifact, tmp_path, command):
    # renaming a temp file over a FIFO or device replaces it: as root, `run -o /dev/null` replaced /dev/null
    # (a FIFO in tmp_path stands in for the device, so this test cannot break the machine it runs on)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    args = ["example:tiny-cnn", "--no-timing"] if command == "optimize" else [tiny_cnn_artifact]
    expect(cli(command, *args, "-o", fifo), 2, "not a regular file")
    assert fifo.is_fifo()
    assert leftovers(tmp_path) == ["fifo"]


def test_run_output_under_a_file_exits_2(tiny_cnn_artifact, a_file):
    expect(cli("run", tiny_cnn_artifact, "-o", a_file / "out.safetensors"), 2, "is a file, not a folder")


def _fail_with(err: int):
    def fail(*args, **kwargs):
        raise OSError(err, os.strerror(err))
    return fail


def test_disk_full_during_optimize_exits_2_and_leaves_nothing(tmp_path, monkeypatch):
    import ipexconvert.api

    monkeypatch.setattr(ipexconvert.api, "write_artifact", _fail_with(errno.ENOSPC))
    out = tmp_path / "out"
    out.mkdir()
    expect(cli("optimize", "example:tiny-cnn", "-o", out / "m.ipxc", "--no-timing"), 2, "No space left on device",
           "free space")
    assert leftovers(out) == []


def test_unwritable_folder_exits_2_before_converting(tmp_path, monkeypatch):
    import ipexconvert.output_path

    monkeypatch.setattr(ipexconvert.output_path.tempfile, "mkstemp", _fail_with(errno.EACCES))
    text = expect(cli("optimize", "example:tiny-cnn", "-o", tmp_path / "m.ipxc", "--no-timing"), 2,
                  "Permission denied", "choose a folder you can write to")
    assert "internal error" not in text


def test_disk_full_during_run_output_exits_2(tiny_cnn_artifact, tmp_path, monkeypatch):
    import safetensors.torch

    monkeypatch.setattr(safetensors.torch, "save_file", _fail_with(errno.ENOSPC))
    expect(cli("run", tiny_cnn_artifact, "-o", tmp_path / "out.safetensors"), 2, "No space left on device")
    assert leftovers(tmp_path) == []


def test_run_output_temp_file_does_not_clobber_a_file_of_the_old_temp_name(tiny_cnn_artifact, tmp_path):
    bystander = tmp_path / ".out.safetensors.tmp"  # run -o used this fixed name and deleted it afterwards
    bystander.write_text("mine")
    result = cli("run", tiny_cnn_artifact, "-o", tmp_path / "out.safetensors")
    assert result.exit_code == 0, result.stderr
    assert bystander.read_text() == "mine"
    assert leftovers(tmp_path) == [".out.safetensors.tmp", "out.safetensors"]


# ---- example inputs: too large to make, or empty -------------------------------------------------------------------


def test_huge_input_dim_exits_2_fast(tmp_path):
    start = time.monotonic()
    expect(cli("optimize", "example:tiny-cnn", "--input", "pixel_values:99999999999x3x64x64:float32",
               "-o", tmp_path / "m.ipxc", "--no-timing"), 2, "99999999999x3x64x64", "1.0 GiB")
    assert time.monotonic() - start < 60
    assert not (tmp_path / "m.ipxc").exists()


def test_zero_dim_in_input_arg_exits_2(tmp_path):
    expect(cli("optimize", "example:tiny-cnn", "--input", "pixel_values:0x3x64x64:float32", "-o", tmp_path / "m.ipxc"),
           2, "dim 0 is 0")


def test_empty_example_inputs_file_exits_2_and_writes_nothing(tmp_path):
    save_file({"pixel_values": torch.zeros(0, 3, 64, 64)}, str(tmp_path / "empty.safetensors"))
    expect(cli("optimize", "example:tiny-cnn", "--example-inputs", tmp_path / "empty.safetensors",
               "-o", tmp_path / "m.ipxc", "--no-timing"), 2, "example input pixel_values is empty")
    assert not (tmp_path / "m.ipxc").exists()


def test_empty_example_inputs_in_the_api_raise_before_writing(tmp_path):
    # before: the artifact was written with an accuracy record of cosine 1.0 measured on no data
    with pytest.raises(UserInputError, match="is empty"):
        ipexconvert.optimize(Small().eval(), {"x": torch.zeros(0, 16)}, output=tmp_path / "m.ipxc")
    assert leftovers(tmp_path) == []


# ---- inspect on an artifact with a symbolic constant shape ---------------------------------------------------------


def test_inspect_constant_with_a_dim_name_in_its_shape_exits_2(tiny_cnn_artifact, tmp_path):
    def edit(graph):
        name = graph["constants"][0]
        graph["values"][name]["shape"] = ["batch"] + graph["values"][name]["shape"][1:]

    bad = rewrite_artifact(tiny_cnn_artifact, tmp_path / "bad.ipxc", edit_graph=edit)
    expect(cli("inspect", bad), 2, "has a symbolic shape")
    expect(cli("inspect", bad, "--json"), 2, "has a symbolic shape")


# ---- NaN and Inf ---------------------------------------------------------------------------------------------------


class KeysAttention(nn.Module):
    """Attention whose keys come from their own input, so a NaN there reaches only the scores."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(64, 64), nn.Linear(64, 64), nn.Linear(64, 64)

    def forward(self, x, keys):
        b, s, _ = x.shape
        heads = lambda t: t.view(b, s, 2, 32).transpose(1, 2)  # noqa: E731 - head_dim 32: the native kernels' size
        out = F.scaled_dot_product_attention(heads(self.q(x)), heads(self.k(keys)), heads(self.v(x)))
        return out.transpose(1, 2).reshape(b, s, 64)


@pytest.fixture(scope="module")
def attention_artifact(tmp_path_factory):
    torch.manual_seed(0)
    module = KeysAttention().eval()
    path = tmp_path_factory.mktemp("attention") / "attention.ipxc"
    ipexconvert.optimize(module, {"x": torch.randn(2, 8, 64), "keys": torch.randn(2, 8, 64)}, output=path)
    return path, module


def test_nan_in_attention_keys_gives_nan_like_eager(attention_artifact):
    path, module = attention_artifact
    model = ipexconvert.load_artifact(path)
    kernels = {s.kernel_name.split("@")[0] for s in model.executor.steps}
    if "native:sdpa" not in kernels:
        pytest.skip(f"this CPU runs attention with {sorted(kernels)}, not the native kernel this test is about")
    x, keys = torch.randn(2, 8, 64), torch.randn(2, 8, 64)
    keys[1, 5, 7] = float("nan")  # one key of batch 1: every query of batch 1 sees a NaN score
    got = model(x, keys)
    with torch.no_grad():
        want = module(x, keys)
    assert torch.isnan(want[1]).all() and not torch.isnan(want[0]).any()
    assert torch.equal(torch.isnan(got), torch.isnan(want)), "the native attention kernel turned a NaN score into a weight"
    torch.testing.assert_close(got[0], want[0], rtol=1e-4, atol=1e-5)


def test_run_reports_nonfinite_outputs_and_check_finite_fails(attention_artifact, tmp_path):
    path, _ = attention_artifact
    keys = torch.randn(2, 8, 64)  # the module was converted with static shapes
    keys[0, 2, 3] = float("nan")
    save_file({"x": torch.randn(2, 8, 64), "keys": keys}, str(tmp_path / "nan.safetensors"))

    plain = cli("run", path, "--inputs", tmp_path / "nan.safetensors")
    assert plain.exit_code == 0, plain.stderr
    assert "holds 512 NaN, 0 Inf of 1024 values" in norm(plain.stdout)
    assert "input keys holds 1 NaN" in norm(plain.stderr)

    strict = cli("run", path, "--inputs", tmp_path / "nan.safetensors", "--check-finite")
    expect(strict, 1, "hold NaN or Inf")
    finite = cli("run", path, "--check-finite")  # the stored example inputs: all finite
    assert finite.exit_code == 0, finite.stderr


@pytest.fixture(scope="module")
def nan_image(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    x = torch.randn(1, 3, 64, 64)
    x[0, 1, 20, 30] = float("nan")
    path = tmp_path_factory.mktemp("nan") / "nan.safetensors"
    save_file({"pixel_values": x}, str(path))
    return path


def test_nan_in_an_image_gives_nan_logits_like_eager(tiny_cnn_artifact, nan_image):
    """oneDNN's max pooling and fused relu (which tiny-cnn runs on) map NaN to numbers; inputs holding
    NaN run a NaN-safe plan instead, so the logits are NaN where eager's are, and check passes."""
    from safetensors.torch import load_file

    model = ipexconvert.load_artifact(tiny_cnn_artifact)
    image = load_file(str(nan_image))
    got = model.run_dict(image)["logits"]
    assert torch.isnan(got).all()  # eager: every logit NaN
    clean = {"pixel_values": torch.nan_to_num(image["pixel_values"])}
    assert torch.isfinite(model.run_dict(clean)["logits"]).all()  # the fast plan still serves finite inputs
    assert model._nan_safe is not None and model._nan_safe is not model.executor
    assert not any(s.kernel_name.startswith(("onednn_direct:max_pool", "torch_onednn:")) for s in model._nan_safe.steps)
    result = cli("check", tiny_cnn_artifact, "--reference", "example:tiny-cnn", "--inputs", nan_image, "--json")
    report = json.loads(result.stdout)
    assert report["outputs"][0]["nonfinite"]["reference"] == 10
    assert result.exit_code == 0 and report["passed"] is True, result.stdout


def test_run_says_nan_inputs_run_the_nan_safe_plan(tiny_cnn_artifact, nan_image):
    result = cli("run", tiny_cnn_artifact, "--inputs", nan_image)
    assert result.exit_code == 0, result.stderr
    text = norm(result.stderr)
    assert "input pixel_values holds 1 NaN, 0 Inf" in text
    assert "NaN-safe plan" in text


def test_int8_artifact_refuses_nan_inputs(tmp_path, nan_image):
    path = tmp_path / "cnn.int8.ipxc"
    ipexconvert.optimize("example:tiny-cnn", dtype="int8", output=path, calib_synthetic=4)
    result = cli("run", path, "--inputs", nan_image)
    expect(result, 2, "holds NaN or Inf, which an int8 artifact cannot represent")


def test_an_image_is_checked_as_its_first_step_reads_it(tiny_cnn_artifact, nan_image, tmp_path, monkeypatch):
    """A CNN's float image is read whole by its first step (the channels-last conversion, or the quantization),
    which finds NaN and Inf on the way (Kernel.checked_fn): the model does not scan it again before the call, and an
    image holding NaN or Inf still runs the NaN-safe plan (fp32: NaN logits, as eager) or is refused (int8)."""
    from safetensors.torch import load_file

    from ipexconvert.errors import UserInputError
    from ipexconvert.runtime import model as model_module

    scans = []
    real = model_module._all_finite
    monkeypatch.setattr(model_module, "_all_finite", lambda t: scans.append(t.shape) or real(t))
    image = load_file(str(nan_image))
    clean = torch.nan_to_num(image["pixel_values"])
    inf = clean.clone()
    inf[0, 2, 7, 9] = float("inf")
    int8_path = tmp_path / "cnn.int8.ipxc"
    ipexconvert.optimize("example:tiny-cnn", dtype="int8", output=int8_path, calib_synthetic=4)
    for path in (tiny_cnn_artifact, int8_path):
        model = ipexconvert.load_artifact(path)
        assert model.executor.finite_checked_inputs == {"pixel_values"}
        assert torch.isfinite(model.run_dict({"pixel_values": clean})["logits"]).all()
        for bad in (image["pixel_values"], inf):
            if path == int8_path:
                with pytest.raises(UserInputError, match="input pixel_values holds NaN or Inf"):
                    model.run_dict({"pixel_values": bad})
            else:
                assert torch.isnan(model.run_dict({"pixel_values": bad})["logits"]).all()
        assert torch.isfinite(model.run_dict({"pixel_values": clean})["logits"]).all()  # the fast plan again
    assert scans == []


def test_a_file_changed_after_load_is_not_read_for_the_nan_safe_plan(tiny_cnn_artifact, nan_image, tmp_path):
    import shutil

    from safetensors.torch import load_file

    from ipexconvert.errors import ArtifactError

    path = tmp_path / "copy.ipxc"
    shutil.copy(tiny_cnn_artifact, path)
    model = ipexconvert.load_artifact(path)
    other = tmp_path / "other.ipxc"
    ipexconvert.optimize("example:tiny-cnn", dtype="bf16", output=other)
    shutil.copy(other, path)
    with pytest.raises(ArtifactError, match="changed since it was loaded"):
        model.run_dict(load_file(str(nan_image)))


def test_check_passes_when_nan_is_where_the_reference_has_it(attention_artifact, tmp_path):
    path, module = attention_artifact
    x, keys = torch.randn(2, 8, 64), torch.randn(2, 8, 64)
    keys[0, 0, 0] = float("nan")
    with torch.no_grad():
        want = module(x, keys)
    save_file({"x": x, "keys": keys}, str(tmp_path / "in.safetensors"))
    name = ipexconvert.load_artifact(path).signature.output_names[0]
    save_file({name: want}, str(tmp_path / "golden.safetensors"))
    # before: NaN - NaN = NaN made the error NaN, and the check failed although the artifact matched eager
    result = cli("check", path, "--reference", tmp_path / "golden.safetensors", "--inputs", tmp_path / "in.safetensors")
    assert result.exit_code == 0, result.stdout + result.stderr
    wrong = want.clone()
    wrong[0, 0, 0] = 1.0  # a number where the artifact has NaN
    save_file({name: wrong}, str(tmp_path / "golden.safetensors"))
    result = cli("check", path, "--reference", tmp_path / "golden.safetensors", "--inputs", tmp_path / "in.safetensors")
    assert result.exit_code == 1
    assert "NaN/Inf where the reference is finite" in norm(result.stdout)


# ---- signals: temp files removed, and a truthful message ----------------------------------------------------------


def _optimize_in_child(out: Path, *extra: str) -> subprocess.Popen:
    env = dict(os.environ, COLUMNS="400", PYTHONWARNINGS="ignore")
    env.pop("IPEXCONVERT_DEBUG", None)
    return subprocess.Popen([sys.executable, "-m", "ipexconvert.cli", "optimize", "example:tiny-cnn", "-o", str(out), *extra],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(child: subprocess.Popen, ready, what: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if child.poll() is not None:
            raise AssertionError(f"the conversion ended (exit {child.returncode}) before {what}:\n{child.stderr.read()}")
        if time.monotonic() > deadline:
            child.kill()
            raise AssertionError(f"no {what} after {timeout} s")
        time.sleep(0.002)


@pytest.mark.parametrize("signum, code, word", [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")])
def test_signal_during_the_accuracy_check_removes_temp_files(tmp_path, signum, code, word):
    out = tmp_path / "m.ipxc"
    child = _optimize_in_child(out)
    # the temp artifact being checked (now inside a scratch folder): the window the review found SIGTERM leaving files in
    _wait_for(child, lambda: glob.glob(str(tmp_path / ".m.ipxc.*check.ipxc")) or glob.glob(str(tmp_path / ".m.ipxc.*/check.ipxc")),
              "temp check artifact")
    child.send_signal(signum)
    _, stderr = child.communicate(timeout=120)
    assert child.returncode == code, stderr
    assert f"{word}; nothing was written" in norm(stderr)
    assert leftovers(tmp_path) == []


def test_interrupt_after_the_write_says_the_file_was_written(tmp_path, monkeypatch):
    """Ctrl-C in the timing phase, after the artifact is in place (in-process: the moment is exact)."""
    import ipexconvert.bench

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ipexconvert.bench, "time_pair", interrupted)
    out = tmp_path / "m.ipxc"
    text = expect(cli("optimize", "example:tiny-cnn", "-o", out), 130)
    assert f"interrupted; {out} had already been written and is complete" in text
    assert "nothing was written" not in text
    assert leftovers(tmp_path) == ["m.ipxc"]
    ipexconvert.load_artifact(out)  # complete and loadable


def test_interrupt_before_the_write_keeps_the_old_file_and_says_nothing_was_written(tiny_cnn_artifact, tmp_path,
                                                                                     monkeypatch):
    import ipexconvert.api

    out = tmp_path / "m.ipxc"
    shutil.copy(tiny_cnn_artifact, out)  # an artifact from an earlier run: replacing it would be a write
    before = out.read_bytes()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(ipexconvert.api, "measure", interrupted)  # during the accuracy check
    text = expect(cli("optimize", "example:tiny-cnn", "-o", out, "--no-timing"), 130, "interrupted; nothing was written")
    assert out.read_bytes() == before
    assert leftovers(tmp_path) == ["m.ipxc"]
