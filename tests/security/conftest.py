"""Tiny valid artifacts that the security tests edit into hostile ones.

Each is converted once per session; a test copies it (or rewrites its metadata/tensors with
security_helpers) and never edits the original."""
from __future__ import annotations

from pathlib import Path

import pytest

import ipexconvert


@pytest.fixture(scope="session")
def security_artifacts(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("security-artifacts")


@pytest.fixture(scope="session")
def tiny_cnn_artifact(security_artifacts) -> Path:
    """example:tiny-cnn, fp32 (convolutions on the direct oneDNN layers where they are built)."""
    path = security_artifacts / "tiny-cnn.fp32.ipxc"
    ipexconvert.optimize("example:tiny-cnn", dtype="fp32", output=path)
    return path


@pytest.fixture(scope="session")
def tiny_bert_artifact(security_artifacts) -> Path:
    """example:tiny-bert, fp32 (dynamic batch/seq dims, reshape nodes, aten fallback nodes with $sym args). Made
    without simplify_padding_mask, which turns the padding mask's aten nodes (arange, index, full, bitwise_and) into
    views: a hostile artifact may hold them whatever our pipeline makes, and the tests here edit them."""
    path = security_artifacts / "tiny-bert.fp32.ipxc"
    ipexconvert.optimize("example:tiny-bert", dtype="fp32", output=path, skip_passes=["simplify_padding_mask"])
    return path
