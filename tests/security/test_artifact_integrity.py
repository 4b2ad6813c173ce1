"""The artifact reader against hostile files: edits without re-hashing, edits re-hashed on purpose (the
hashes give integrity, not authenticity, so the loader must also check that manifest, graph and tensors
agree), paths that are not regular files, JSON nested to exhaust the recursion limit, and files changed
under a loaded model. Every refusal is an ArtifactError (exit 2 in the CLI), never another exception,
a native crash or a hang."""
from __future__ import annotations

import json
import os
import re
import shutil
import socket

import pytest
import torch

from ipexconvert import load_artifact
from ipexconvert.artifact import read_artifact, read_manifest
from ipexconvert.errors import ArtifactError

from security_helpers import load_in_child, node_of, read_parts, rewrite_artifact, run_python


def _load_error(path) -> ArtifactError:
    with pytest.raises(ArtifactError) as info:
        load_artifact(path)
    assert str(path) in info.value.problem
    assert info.value.fix
    return info.value


# ---- the hash binds the manifest and each tensor's dtype and shape ----------------------------------------------------


def test_manifest_edited_without_rehash_is_refused(tiny_cnn_artifact, tmp_path):
    def edit(manifest):
        manifest["accuracy"]["outputs"][0]["cosine"] = 1.0  # a nicer accuracy record
        manifest["dims"]["batch"]["max"] = 4096

    out = rewrite_artifact(tiny_cnn_artifact, tmp_path / "m.ipxc", edit_manifest=edit, rehash=False)
    error = _load_error(out)
    assert "content_sha256" in error.problem and "modified" in error.problem


def _flatten_kernel(tensors, name):
    t = tensors[name]
    # the same bytes as a 1x1 kernel over 9x the input channels: the byte hash in the manifest stays
    # right, and a kernel built from this shape reads 9x past the input's channels
    tensors[name] = t.reshape(t.shape[0], -1, 1, 1)


def _as_int32(tensors, name):
    tensors[name] = tensors[name].view(torch.int32)  # the same bytes read as another dtype


def _bigger_spec(graph, name):
    spec = graph["values"][name]
    spec["shape"] = [spec["shape"][0], spec["shape"][1], 5, 5]
    spec["dtype"] = "bfloat16"


def test_tensor_header_or_constant_spec_edited_is_refused(tiny_cnn_artifact, tmp_path):
    """A tensor's header edited with its bytes (and so its byte hash) intact: refused by the content hash,
    and when re-hashed, because the tensor is not what the graph's spec says. Likewise a re-hashed graph whose
    spec of the constant was edited instead (kernels are planned from the spec). Loaded in one child process:
    before the fix these reached oneDNN with the wrong shape or dtype."""
    name = "layer1.0.conv2.weight"
    _, _, tensors, _ = read_parts(tiny_cnn_artifact)
    cases = {  # file name -> (artifact, what the problem must say)
        "control": (rewrite_artifact(tiny_cnn_artifact, tmp_path / "control.ipxc"), None),
        "spec": (rewrite_artifact(tiny_cnn_artifact, tmp_path / "spec.ipxc", edit_graph=lambda g: _bigger_spec(g, name)),
                 f"constant {name} is float32[16x16x3x3] in the file, but the graph says bfloat16[16x16x5x5"),
    }
    for edit in (_flatten_kernel, _as_int32):
        for rehash in (False, True):
            out = rewrite_artifact(tiny_cnn_artifact, tmp_path / f"{edit.__name__}-{rehash}.ipxc",
                                   edit_tensors=lambda t: edit(t, name), rehash=rehash)
            edited = read_parts(out)[2][name]
            assert edited.shape != tensors[name].shape or edited.dtype != tensors[name].dtype
            assert torch.equal(edited.reshape(-1).view(torch.uint8), tensors[name].reshape(-1).view(torch.uint8))
            cases[out.stem] = (out, f"constant {name} is" if rehash else "content_sha256")
    results = load_in_child(*(path for path, _ in cases.values()))
    for (case, (_, problem)), result in zip(cases.items(), results):
        if problem is None:  # the helper's re-hashing is the loader's scheme: an unedited rewrite loads and runs
            assert result["result"] == "ran", (case, result)
        else:
            assert result["result"] == "artifact_error", (case, result)
            assert problem in result["problem"], (case, result)


@pytest.mark.parametrize("field, change", [
    ("inputs", lambda io: io["spec"].update(shape=["batch", 3, 512, 512])),
    ("inputs", lambda io: io["spec"].update(dtype="uint8")),
    ("inputs", lambda io: io.update(name="renamed")),
    ("outputs", lambda io: io["spec"].update(shape=["batch", 1000])),
])
def test_manifest_signature_disagreeing_with_the_graph_is_refused(tiny_cnn_artifact, tmp_path, field, change):
    """Inputs are checked against the manifest's signature while kernels come from the graph: they must agree."""
    out = rewrite_artifact(tiny_cnn_artifact, tmp_path / "s.ipxc", edit_manifest=lambda m: change(m[field][0]))
    error = _load_error(out)
    assert f"the manifest's {field}" in error.problem and "are not the graph's" in error.problem


def test_manifest_dims_disagreeing_with_the_graph_are_refused(tiny_cnn_artifact, tmp_path):
    out = rewrite_artifact(tiny_cnn_artifact, tmp_path / "d.ipxc",
                           edit_manifest=lambda m: m["dims"]["batch"].update(max=1 << 40))
    error = _load_error(out)
    assert "dynamic dims" in error.problem


# ---- graph-level inconsistencies (each re-hashed) are ArtifactErrors, not exceptions from kernels ------------------------


def _conv_with_residual(node):
    return any(p["operand"] is not None for p in node["attrs"]["post_ops"])


def _post_op_operand_out_of_range(graph):
    node_of(graph, "conv2d", _conv_with_residual)["attrs"]["post_ops"][0]["operand"] = 7


def _post_op_operand_negative(graph):
    node_of(graph, "conv2d", _conv_with_residual)["attrs"]["post_ops"][0]["operand"] = -1


def _post_op_operand_on_a_missing_input(graph):
    node_of(graph, "conv2d", lambda n: n["inputs"][2] is not None)["inputs"][2] = None
    node_of(graph, "conv2d", lambda n: n["inputs"][2] is None)["attrs"]["post_ops"] = [{"kind": "add", "operand": 2}]


def _unknown_post_op_kind(graph):
    node_of(graph, "conv2d")["attrs"]["post_ops"] = [{"kind": "explode", "operand": None}]


def _binary_post_op_without_operand(graph):
    node_of(graph, "conv2d")["attrs"]["post_ops"] = [{"kind": "add", "operand": None}]


def _reversed_node_order(graph):
    graph["nodes"].reverse()


def _node_reads_a_dangling_name(graph):
    graph["nodes"][3]["inputs"][0] = "nowhere"


def _value_produced_twice(graph):
    graph["nodes"][3]["outputs"] = list(graph["nodes"][2]["outputs"])


def _output_not_computed(graph):
    graph["outputs"] = ["nowhere"]
    graph["values"]["nowhere"] = graph["values"]["logits"]


def _conv_stride_0(graph):
    node_of(graph, "conv2d")["attrs"]["stride"] = [0, 1]


def _conv_dilation_0(graph):
    node_of(graph, "conv2d")["attrs"]["dilation"] = [1, 0]


def _conv_negative_padding(graph):
    node_of(graph, "conv2d")["attrs"]["padding"] = [-3, 0]


def _conv_groups_0(graph):
    node_of(graph, "conv2d")["attrs"]["groups"] = 0


def _conv_three_strides(graph):
    node_of(graph, "conv2d")["attrs"]["stride"] = [1, 1, 1]


def _pool_stride_0(graph):
    node_of(graph, "max_pool2d")["attrs"]["stride"] = [0, 0]


def _pool_kernel_0(graph):
    node_of(graph, "max_pool2d")["attrs"]["kernel_size"] = [0, 3]


def _unknown_dtype(graph):
    graph["values"]["relu_1"]["dtype"] = "float128"


def _shape_names_an_unknown_dim(graph):
    graph["values"]["relu_1"]["shape"][0] = "nobody"


def _reshape_names_an_unknown_dim(graph):
    node_of(graph, "reshape")["attrs"]["shape"][0] = "2 * nobody"


def _dim_bound_by_no_input(graph):
    graph["dims"]["extra"] = {"min": 1, "max": 4}


GRAPH_EDITS = [
    (_post_op_operand_out_of_range, "attrs refer to input 7"),
    (_post_op_operand_negative, "attrs refer to input -1"),
    (_post_op_operand_on_a_missing_input, "attrs refer to input 2"),
    (_unknown_post_op_kind, "post-op 'explode'"),
    (_binary_post_op_without_operand, "post-op 'add' is not a unary post-op"),
    (_reversed_node_order, "is computed only by a later node"),
    (_node_reads_a_dangling_name, "reads nowhere, which no input, constant or node provides"),
    (_value_produced_twice, "which is already an input, a constant or another node's output"),
    (_output_not_computed, "graph output nowhere is not computed"),
    (_conv_stride_0, "stride"),
    (_conv_dilation_0, "dilation"),
    (_conv_negative_padding, "padding"),
    (_conv_groups_0, "groups"),
    (_conv_three_strides, "stride"),
    (_pool_stride_0, "stride"),
    (_pool_kernel_0, "kernel_size"),
    (_unknown_dtype, "float128"),
    (_shape_names_an_unknown_dim, "names nobody, not a dynamic dim"),
    (_reshape_names_an_unknown_dim, "attrs name nobody, not a dynamic dim"),
    (_dim_bound_by_no_input, "dynamic dim extra is not the size of any input axis"),
]


@pytest.mark.parametrize("edit, problem", GRAPH_EDITS, ids=[e[0].__name__.strip("_") for e in GRAPH_EDITS])
def test_inconsistent_graph_is_an_artifact_error(tiny_cnn_artifact, tmp_path, edit, problem):
    """Re-hashed, so only the structural checks stand between the edit and the kernels."""
    out = rewrite_artifact(tiny_cnn_artifact, tmp_path / "g.ipxc", edit_graph=edit)
    with pytest.raises(ArtifactError, match=re.escape(problem)):
        read_artifact(out)  # the reader refuses it: no kernel is built from this graph
    error = _load_error(out)
    assert problem in error.problem


def test_empty_dim_range_is_an_artifact_error(tiny_cnn_artifact, tmp_path):
    """In the graph and the manifest alike (re-hashed), so the range itself is what is refused."""
    empty = {"min": 8, "max": 2}
    out = rewrite_artifact(tiny_cnn_artifact, tmp_path / "g.ipxc", edit_graph=lambda g: g["dims"].update(batch=empty),
                           edit_manifest=lambda m: m["dims"].update(batch=empty))
    error = _load_error(out)
    assert "dynamic dim batch has the range 8..2" in error.problem


def test_inconsistent_graph_is_exit_2_in_the_cli(tiny_cnn_artifact, tmp_path):
    out = rewrite_artifact(tiny_cnn_artifact, tmp_path / "g.ipxc", edit_graph=_reversed_node_order)
    done = run_python("import sys; from ipexconvert.cli import app; app(['run', sys.argv[1]])", str(out))
    assert done.returncode == 2, done.stderr[-3000:]
    assert "computed only by a later node" in " ".join((done.stdout + done.stderr).split())


# ---- JSON nested to exhaust the recursion limit -------------------------------------------------------------------------


def _deep(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def test_deeply_nested_manifest_is_an_artifact_error(tiny_cnn_artifact, tmp_path):
    out = rewrite_artifact(tiny_cnn_artifact, tmp_path / "m.ipxc", edit_manifest=lambda m: _deep(100_000), rehash=False)
    error = _load_error(out)
    assert "corrupt manifest" in error.problem and "nested" in error.problem
    with pytest.raises(ArtifactError, match="nested"):
        read_manifest(out)  # `inspect` too


@pytest.mark.parametrize("depth", [100, 100_000])
def test_deeply_nested_graph_is_an_artifact_error(tiny_bert_artifact, tmp_path, depth):
    def edit(graph):  # one aten node's kwargs hold a list nested `depth` deep
        text = json.dumps(graph)
        assert '"kwargs": {}' in text
        return text.replace('"kwargs": {}', f'"kwargs": {{"x": {"[" * depth}1{"]" * depth}}}', 1)

    out = rewrite_artifact(tiny_bert_artifact, tmp_path / "g.ipxc", edit_graph=edit)
    error = _load_error(out)
    assert "invalid graph" in error.problem and "nested" in error.problem


# ---- only regular files -------------------------------------------------------------------------------------------------


def test_paths_that_are_not_regular_files_are_refused_at_once(tmp_path, tiny_cnn_artifact):
    fifo = tmp_path / "fifo.ipxc"
    os.mkfifo(fifo)
    sock_path = tmp_path / "s.ipxc"
    sock = socket.socket(socket.AF_UNIX)
    sparse = tmp_path / "sparse.ipxc"
    with open(sparse, "wb") as f:
        f.write((1 << 40).to_bytes(8, "little"))  # a header "1 TiB long"
        f.truncate(64 << 30)  # 64 GiB, all holes
    try:
        sock.bind(str(sock_path))
        results = load_in_child(fifo, "/dev/zero", sock_path, tmp_path, sparse, timeout=60)
    finally:
        sock.close()
    for result in results:
        assert result["result"] == "artifact_error", result
        assert result["seconds"] < 1.0, result
    problems = [r["problem"] for r in results]
    assert "not a regular file (a FIFO)" in problems[0]
    assert "not a regular file (a character device)" in problems[1]
    assert "not a regular file (a socket)" in problems[2]
    assert "is a folder" in problems[3]
    assert "over the 100 MiB limit" in problems[4]


# ---- the loaded model does not depend on the file any more -------------------------------------------------------------

_CHANGE_FILES_AFTER_LOAD = r"""
import os, shutil, sys, torch
from ipexconvert import load_artifact
from ipexconvert.artifact import read_example_inputs
truncated, half, overwritten, other = sys.argv[1:]
inputs = read_example_inputs(truncated)
models = {path: load_artifact(path) for path in (truncated, half, overwritten)}
before = {path: model.run_dict(inputs) for path, model in models.items()}
os.truncate(truncated, 0)
os.truncate(half, os.path.getsize(half) // 2)
shutil.copyfile(other, overwritten)  # writes into the same inode
for path, model in models.items():
    after = model.run_dict(inputs)
    print("SAME" if all(torch.equal(before[path][k], after[k]) for k in after) else "CHANGED", flush=True)
"""


def test_changing_the_file_after_load_changes_nothing(tiny_bert_artifact, tmp_path):
    """Truncated to 0, truncated to half, overwritten by a file of the same layout with other weights: the
    loaded models give the same outputs. tiny-bert: its norms, embeddings and float32 linears read weight
    tensors directly at run time, so weights still mapped to the file would fault (SIGBUS, after a
    truncation) or change (after an overwrite); hence a child process."""
    paths = [tmp_path / f"{how}.ipxc" for how in ("truncated", "half", "overwritten")]
    for path in paths:
        shutil.copyfile(tiny_bert_artifact, path)
    data = bytearray(paths[0].read_bytes())
    header_len = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + header_len])
    # another file of the same layout: the lowest bit of every float weight byte flipped
    raw = torch.frombuffer(data, dtype=torch.uint8)
    for name, info in header.items():
        if name != "__metadata__" and info["dtype"] == "F32" and not name.startswith("example_inputs/"):
            begin, end = (8 + header_len + o for o in info["data_offsets"])
            raw[begin:end] ^= 1
    other = tmp_path / "other.ipxc"
    other.write_bytes(bytes(data))
    assert other.read_bytes() != paths[0].read_bytes()
    done = run_python(_CHANGE_FILES_AFTER_LOAD, *map(str, paths), str(other))
    assert done.returncode == 0, f"the model crashed (signal {-done.returncode})" if done.returncode < 0 else done.stderr
    assert done.stdout.split() == ["SAME", "SAME", "SAME"]
