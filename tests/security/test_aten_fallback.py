"""Hostile `aten` fallback nodes: an artifact may name only allow-listed ATen ops, and their arguments are
checked (sizes, indices, an output budget) before the op runs.

Each case edits a valid tiny artifact (re-hashed, as an attacker would) and loads and runs it in a child
process, so a segfault, heap corruption or hang shows as one failed test instead of a dead pytest."""
from __future__ import annotations

import json

import pytest
import torch

from security_helpers import load_in_child, node_of, run_python, rewrite_artifact

# Ops of the review finding: memory-unsafe on hostile arguments, yet core ATen, pure and deterministic.
UNSAFE_TARGETS = [
    "aten.max_pool2d_with_indices_backward.default",
    "aten.avg_pool2d_backward.default",
    "aten._native_batch_norm_legit_no_training.default",
    "aten._native_batch_norm_legit.no_stats",
    "aten.col2im.default",
    "aten._embedding_bag.default",
    "aten._cdist_forward.default",
    "aten._fft_r2c.default",
    "aten.empty.memory_format",
    "aten.empty_strided.default",
    "aten.as_strided.default",
    "aten._local_scalar_dense.default",
]


def _first_node_calls(target: str):
    """An edit_graph: the graph's first node becomes an aten call of target on that node's first input."""

    def edit(graph: dict) -> None:
        node = graph["nodes"][0]
        node.update(op="aten", inputs=node["inputs"][:1], attrs={"target": target, "args": [{"$in": 0}], "kwargs": {}})

    return edit


def _node_calls(name: str, target: str, args: list, inputs: list[str] | None = None, kwargs: dict | None = None):
    """An edit_graph: the node called name becomes an aten call of target (reading inputs, if given)."""

    def edit(graph: dict) -> None:
        node = next(n for n in graph["nodes"] if n["name"] == name)
        node.update(op="aten", attrs={"target": target, "args": args, "kwargs": kwargs or {}})
        if inputs is not None:
            node["inputs"] = inputs

    return edit


def test_unsafe_ops_named_by_an_artifact_are_refused_at_load(tiny_cnn_artifact, tmp_path):
    paths = [rewrite_artifact(tiny_cnn_artifact, tmp_path / f"{i}.ipxc",
                              edit_graph=_first_node_calls(target))
             for i, target in enumerate(UNSAFE_TARGETS)]
    for target, line in zip(UNSAFE_TARGETS, load_in_child(*paths, timeout=300)):
        assert line["result"] == "artifact_error", (target, line)
        assert target in line["problem"] and "refused" in line["problem"], (target, line)


# A child that loads and runs one artifact and reports the outcome and its peak resident memory
# (VmHWM of its own address space: getrusage's ru_maxrss keeps the forking pytest's peak across exec).
_PEAK_SCRIPT = r"""
import json, sys, time
from ipexconvert import load_artifact
from ipexconvert.artifact import read_example_inputs
from ipexconvert.errors import IpexConvertError
start = time.monotonic()
try:
    load_artifact(sys.argv[1]).run_dict(read_example_inputs(sys.argv[1]))
    result, problem = "ran", ""
except IpexConvertError as e:
    result, problem = type(e).__name__, e.problem
print(json.dumps({"result": result, "problem": problem, "seconds": time.monotonic() - start,
                  "peak_mib": next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024}))
"""


def _run_for_peak(path) -> dict:
    done = run_python(_PEAK_SCRIPT, str(path), timeout=120)
    assert done.returncode == 0 and done.stdout.strip(), (done.returncode, done.stdout[-2000:], done.stderr[-4000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("size, when", [
    ([100000, 100000], "load"),                   # 1e10 elements, constant: refused when the node is compiled
    ([805306368], "load"),                        # 3 GiB of float32: what a 600 KB artifact forced before
    ([{"$sym": "batch*10000000000"}], "run"),     # symbolic: refused on the call, before allocating
])
def test_full_over_the_budget_is_refused_without_allocating(tiny_bert_artifact, tmp_path, size, when):
    path = rewrite_artifact(tiny_bert_artifact, tmp_path / "full.ipxc",
                            edit_graph=_node_calls("arange", "aten.full.default", [size, 1.0],
                                             kwargs={"dtype": {"$dtype": "float32"}}))
    report = _run_for_peak(path)
    assert report["result"] == "ArtifactError", report
    assert "aten.full.default" in report["problem"] and "limit" in report["problem"], report
    assert report["peak_mib"] < 2048, report  # the refused tensor alone would be 3 GiB or more
    assert report["seconds"] < 60, report
    if when == "load":
        assert "cannot be run" in report["problem"], report  # the loader's message: refused while compiling


def test_expand_to_2_62_then_sum_is_refused_fast(tiny_bert_artifact, tmp_path):
    """expand makes a view without memory; the sum over it would walk 2**62 elements (hours)."""

    def edit(graph: dict) -> None:
        _node_calls("expand_1", "aten.expand.default", [{"$in": 0}, [2**62, -1]])(graph)
        _node_calls("embedding_1", "aten.sum.dim_IntList", [{"$in": 0}, [0]], inputs=["expand_1"])(graph)

    path = rewrite_artifact(tiny_bert_artifact, tmp_path / "expand.ipxc", edit_graph=edit)
    (line,) = load_in_child(path, timeout=120)
    assert line["result"] == "artifact_error", line
    assert "aten.expand.default" in line["problem"] and "limit" in line["problem"], line
    assert line["seconds"] < 30, line


def test_out_of_range_gather_index_is_a_clear_error(tiny_bert_artifact, tmp_path):
    """The position ids buffer feeds `slice_1 -> gather`; with ids of 1e8 the gather index is far out of range."""

    def edit(tensors: dict) -> None:
        ids = tensors["bert.embeddings.position_ids"]
        tensors["bert.embeddings.position_ids"] = torch.full_like(ids, 10**8)

    path = rewrite_artifact(tiny_bert_artifact, tmp_path / "gather.ipxc", edit_tensors=edit)
    (line,) = load_in_child(path, timeout=120)
    assert line["result"] == "UserInputError", line  # the check cannot tell hostile constants from bad inputs
    assert "aten.gather.default" in line["problem"] and "outside 0..127" in line["problem"], line


def test_out_of_range_index_tensor_is_a_clear_error(tiny_bert_artifact, tmp_path):
    """aten.index.Tensor indexing the [batch, seq] mask's batch dim with token ids (up to 992, batch 1): the
    arange(batch) that feeds its first index becomes input_ids[:, 0:1], of the same spec int64[batch x 1] (a
    consistent graph: one whose index changed shape is refused at load, tests/security/test_node_consistency.py)."""

    def edit(graph: dict) -> None:
        node = node_of(graph, "aten", lambda n: n["attrs"]["target"] == "aten.index.Tensor")
        first = next(n for n in graph["nodes"] if node["inputs"][1] in n["outputs"])  # unsqueeze(.., 3)
        while first["inputs"][0] not in ("arange",):  # back along the unsqueezes to the one reading arange(batch)
            first = next(n for n in graph["nodes"] if first["inputs"][0] in n["outputs"])
        first["inputs"] = ["input_ids"]
        first["attrs"] = {"target": "aten.slice.Tensor", "args": [{"$in": 0}, 1, 0, 1], "kwargs": {}}

    path = rewrite_artifact(tiny_bert_artifact, tmp_path / "index.ipxc", edit_graph=edit)
    (line,) = load_in_child(path, timeout=120)
    assert line["result"] == "UserInputError", line
    assert "aten.index.Tensor" in line["problem"] and "outside -1..0" in line["problem"], line


def test_allowed_op_with_arguments_torch_cannot_bind_is_refused_at_load(tiny_bert_artifact, tmp_path):
    path = rewrite_artifact(tiny_bert_artifact, tmp_path / "bind.ipxc",
                            edit_graph=_node_calls("arange", "aten.arange.start_step", [0, 10], kwargs={"evil": 1}))
    (line,) = load_in_child(path, timeout=120)
    assert line["result"] == "artifact_error" and "no argument 'evil'" in line["problem"], line
