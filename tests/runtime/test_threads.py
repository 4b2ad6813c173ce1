"""load_artifact(threads=N) sets the intra-op thread count the kernels use."""
import pytest
import torch

import ipexconvert
from ipexconvert.errors import UserInputError


@pytest.fixture(scope="module")
def tiny_artifact(tmp_path_factory):
    path = tmp_path_factory.mktemp("threads") / "tiny.ipxc"
    ipexconvert.optimize("example:tiny-cnn", output=path)
    return path


def test_threads_argument_sets_torch_threads(tiny_artifact):
    before = torch.get_num_threads()
    try:
        model = ipexconvert.load_artifact(tiny_artifact, threads=1)
        assert torch.get_num_threads() == 1
        assert model(torch.randn(1, 3, 64, 64)).shape == (1, 10)
    finally:
        torch.set_num_threads(before)


def test_bad_thread_count_is_a_clear_error(tiny_artifact):
    with pytest.raises(UserInputError, match="thread count"):
        ipexconvert.load_artifact(tiny_artifact, threads=0)
