"""End to end through a real `python -m ipexconvert.cli` process: exit codes and streams as a user sees them."""
from __future__ import annotations

import os
import subprocess
import sys

import torch
from safetensors.torch import load_file, save_file

from ipxc_cli_helpers import FACTORY_MODULE, REPO, norm


def _ipx(*args, cwd, factory_dir):
    env = dict(os.environ)
    env.pop("IPEXCONVERT_DEBUG", None)
    env.update(COLUMNS="400", PYTHONPATH=os.pathsep.join([str(REPO), str(factory_dir)]))
    return subprocess.run([sys.executable, "-m", "ipexconvert.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_convert_run_check_and_errors_in_a_subprocess(tmp_path, factory_dir, small_checkpoint):
    def ipx(*args):
        return _ipx(*args, cwd=tmp_path, factory_dir=factory_dir)

    # optimize: the factory module is found through PYTHONPATH; default output name in the working folder
    done = ipx("optimize", small_checkpoint, "--model-factory", f"{FACTORY_MODULE}:build", "--model-kwargs",
               '{"hidden": 12}', "--input", "x:batch,16:float32", "--no-timing")
    assert done.returncode == 0, done.stderr
    artifact = tmp_path / "small.fp32.ipxc"
    assert artifact.is_file()
    assert f"wrote {artifact.name}" in norm(done.stdout)
    assert "error" not in done.stderr

    # run -o: a golden file
    golden = tmp_path / "golden.safetensors"
    done = ipx("run", artifact, "-o", golden)
    assert done.returncode == 0, done.stderr
    assert "output: (2, 4) float32" in norm(done.stdout)
    assert set(load_file(str(golden))) == {"output"}

    # check against a perturbed golden: exit 1, REGRESSION on stdout
    tensors = load_file(str(golden))
    save_file({"output": tensors["output"] * 2 + 1}, str(tmp_path / "bad.safetensors"))
    done = ipx("check", artifact, "--reference", tmp_path / "bad.safetensors")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "REGRESSION output" in norm(done.stdout)
    assert "Traceback" not in done.stderr

    # a file that is not an artifact: exit 2, a two-line message on stderr, nothing on stdout, no traceback
    junk = tmp_path / "junk.ipxc"
    junk.write_bytes(os.urandom(64))
    done = ipx("inspect", junk)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and "junk.ipxc" in lines[0]
    assert any(line.startswith("  fix: ") for line in lines[1:])
    assert "Traceback" not in done.stderr

    # a usage error caught by typer itself (unknown option) is also exit 2
    done = ipx("run", artifact, "--no-such-option")
    assert done.returncode == 2
    assert "No such option" in done.stderr
    assert "Traceback" not in done.stderr
    assert torch.equal(load_file(str(golden))["output"], tensors["output"])  # failed commands left it alone
