"""The conversion target (ipexconvert/target.py): parsed from `--target`, recorded in the manifest, portable
by default; manifests written before it existed read as the portable CPU target."""
from __future__ import annotations

import pytest
import torch

from ipexconvert import load_artifact, optimize
from ipexconvert.errors import ArtifactError, UserInputError
from ipexconvert.manifest import Manifest
from ipexconvert.passes import PassOptions
from small_models import Small
from ipexconvert.target import PORTABLE, Target


@pytest.mark.parametrize("text, device, level", [(None, "cpu", PORTABLE), ("cpu", "cpu", PORTABLE),
                                                 ("CPU:AVX2", "cpu", "avx2"), ("cpu:amx", "cpu", "amx")])
def test_parse(text, device, level):
    target = Target.parse(text)
    assert (target.device, target.level) == (device, level)
    assert Target.parse(str(target)) == target


@pytest.mark.parametrize("text, problem", [("gpu", "device 'gpu' is not supported"),
                                           ("cpu:avx9", "'avx9' is not a CPU ISA level"),
                                           ("cpu:", None)])
def test_bad_targets_are_user_input_errors(text, problem):
    if problem is None:  # "cpu:" is the portable default, not an error
        assert Target.parse(text) == Target()
        return
    with pytest.raises(UserInputError) as err:
        Target.parse(text)
    assert problem in err.value.problem


def test_pass_options_default_to_the_portable_cpu():
    assert PassOptions().target == Target(device="cpu", level=PORTABLE)


def _manifest_dict(**extra) -> dict:
    return {"producer": "ipexconvert 0.1.0", "torch_version": "2.13.0", "created_at": "2026-01-01T00:00:00+00:00",
            "source": {"kind": "module", "location": "x"}, "dtype": "fp32", "inputs": [], "outputs": [], **extra}


def test_manifests_from_before_the_target_read_as_portable_cpu():
    old = Manifest.model_validate(_manifest_dict(device="cpu", prepack_isa=None))
    assert old.target == Target()
    assert "device" not in old.model_dump() and "prepack_isa" not in old.model_dump()


def test_an_old_manifest_naming_packed_weights_is_refused():
    with pytest.raises(ValueError, match="prepack_isa"):
        Manifest.model_validate(_manifest_dict(device="cpu", prepack_isa="avx512_core_amx"))


def test_the_manifest_records_the_target_and_the_loader_checks_it(tmp_path, monkeypatch):
    x = {"x": torch.randn(2, 8)}
    portable = optimize(Small().eval(), x, output=tmp_path / "portable.ipxc")
    assert portable.manifest.target == Target()
    generic = optimize(Small().eval(), x, target="cpu:generic", output=tmp_path / "generic.ipxc")
    assert generic.manifest.target == Target(level="generic")
    assert load_artifact(generic.path).device == "cpu"  # every CPU has the generic level

    # An artifact made for a level this CPU lacks is refused at load, with the way out.
    monkeypatch.setenv("IPEXCONVERT_MAX_ISA", "generic")
    with pytest.raises(ArtifactError) as err:
        load_artifact(_made_for_amx(generic.path, tmp_path))
    assert "made for CPUs with amx or above; this one runs generic" in err.value.problem
    assert "--target cpu" in err.value.fix
    load_artifact(portable.path)  # the portable one loads anywhere


def test_converting_for_a_level_this_cpu_lacks_is_refused_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setenv("IPEXCONVERT_MAX_ISA", "generic")
    with pytest.raises(UserInputError) as err:
        optimize(Small().eval(), {"x": torch.randn(2, 8)}, target="cpu:avx2", output=tmp_path / "x.ipxc")
    assert "cannot convert for --target cpu:avx2 on this machine" in err.value.problem
    assert not (tmp_path / "x.ipxc").exists()


def test_load_artifact_with_an_unknown_device_is_a_user_input_error(tmp_path):
    result = optimize(Small().eval(), {"x": torch.randn(2, 8)}, output=tmp_path / "m.ipxc")
    with pytest.raises(UserInputError, match="device 'tpu' is not supported"):
        load_artifact(result.path, device="tpu")


def _made_for_amx(path, tmp_path):
    """The same artifact re-written with target cpu:amx (its hashes recomputed, as a converter would)."""
    from ipexconvert.artifact import read_artifact, read_example_inputs, write_artifact

    manifest, program = read_artifact(path)
    out = tmp_path / "amx.ipxc"
    write_artifact(out, program, manifest.model_copy(update={"target": Target(level="amx")}), read_example_inputs(path))
    return out


def test_avoided_kernels_do_not_run_and_unknown_names_are_refused(tmp_path):
    from ipexconvert.runtime.kernels import KERNELS

    path = optimize("example:tiny-cnn", dtype="fp32", output=tmp_path / "cnn.ipxc").path
    families = {name.split(":")[0] for name in (s.kernel_name for s in load_artifact(path).executor.steps)}
    used = sorted(f for f in ("onednn_direct", "torch_onednn", "torch_mkl", "native") if f in families)
    assert used, "nothing but references ran: nothing to avoid"
    model = load_artifact(path, avoid_kernels=used)
    assert not {s.kernel_name.split(":")[0] for s in model.executor.steps} & set(used)
    first = KERNELS["cpu", "conv2d"][0].__name__  # a single factory by its full name
    assert all(not s.kernel_name.startswith(first.replace("_conv2d", ":conv2d"))
               for s in load_artifact(path, avoid_kernels=[first]).executor.steps)
    with pytest.raises(UserInputError, match="no cpu kernel is named onednn_diret"):
        load_artifact(path, avoid_kernels=["onednn_diret"])
    with pytest.raises(UserInputError, match="no cpu kernel is named nope"):
        optimize(Small().eval(), {"x": torch.randn(2, 8)}, avoid_kernels=["nope"], output=tmp_path / "x.ipxc")
