"""Shared fixtures for the CLI tests: a CliRunner wrapper, a factory module on sys.path, and
artifacts converted once per session (tiny-cnn with --json, tiny-bert with human output)."""
from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from ipxc_cli_helpers import FACTORY_MODULE, FACTORY_SOURCE, Cli, expect_exit


@pytest.fixture(scope="session")
def cli() -> Cli:
    return Cli()


@pytest.fixture(scope="session")
def factory_dir(tmp_path_factory):
    """A folder holding FACTORY_MODULE, importable for the whole session (pickles refer to it by name)."""
    folder = tmp_path_factory.mktemp("factory")
    (folder / f"{FACTORY_MODULE}.py").write_text(FACTORY_SOURCE)
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(folder))
        importlib.invalidate_caches()
        yield folder
        sys.modules.pop(FACTORY_MODULE, None)


@pytest.fixture(scope="session")
def factory(factory_dir):
    return importlib.import_module(FACTORY_MODULE)


@pytest.fixture(scope="session")
def small_checkpoint(factory, tmp_path_factory) -> Path:
    """State dict of factory.build(hidden=12) as safetensors."""
    path = tmp_path_factory.mktemp("ckpt") / "small.safetensors"
    save_file(factory.build(hidden=12).state_dict(), str(path))
    return path


@pytest.fixture(scope="session")
def small_pt2(factory, tmp_path_factory) -> Path:
    """torch.export.save of factory.build(hidden=12) on a (2, 16) input."""
    path = tmp_path_factory.mktemp("pt2") / "small.pt2"
    module = factory.build(hidden=12)
    torch.export.save(torch.export.export(module, (torch.randn(2, 16),)), str(path))
    return path


@pytest.fixture(scope="session")
def artifacts_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("artifacts")


@pytest.fixture(scope="session")
def cnn(cli, artifacts_dir) -> dict:
    """example:tiny-cnn converted with the default fp32 pipeline; {'path', 'json', 'stdout'}."""
    path = artifacts_dir / "tiny-cnn.ipxc"
    result = cli("optimize", "example:tiny-cnn", "-o", path, "--json")
    expect_exit(result, 0)
    return {"path": path, "json": json.loads(result.stdout), "stdout": result.stdout}


@pytest.fixture(scope="session")
def bert(cli, artifacts_dir) -> dict:
    """example:tiny-bert (two outputs, int64 inputs, ATen fallbacks) converted with human output."""
    path = artifacts_dir / "tiny-bert.ipxc"
    result = cli("optimize", "example:tiny-bert", "-o", path)
    expect_exit(result, 0)
    return {"path": path, "stdout": result.stdout, "stderr": result.stderr}
