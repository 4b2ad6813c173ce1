"""Dim expressions in artifacts are data: parsed by our own grammar (ipexconvert/ir/dim_expr.py), never
by sympify, eval or lambdify.

Before, a shape entry such as Integer(0*__import__('os').system('...')+64) ran a shell command when the
artifact was loaded (a graph value spec: kernel selection compares shapes) or called (a manifest input
shape, a reshape target, an aten `$sym` argument), and 9**9**9**9 or factorial(10**8) hung. Each hostile
artifact here is a re-hashed copy of a valid one (what an attacker who edits the file on purpose makes);
loading it must raise ArtifactError naming the expression, quickly, without running anything."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ipexconvert import load_artifact
from ipexconvert.errors import ArtifactError

from security_helpers import REPO, load_in_child, node_of, rewrite_artifact

# Runs a shell command if anything evaluates it as Python (sympify did); {marker} is a file it would create.
CODE = "Integer(0*__import__('os').system('touch {marker}')+64)"

HOSTILE = {
    "exponent-tower": "9**9**9**9",
    "factorial": "factorial(10**8)",
    "10000-chars": "batch+" * 1666 + "batch",
    "deep-nesting": "(" * 500 + "batch" + ")" * 500,
    "large-power": "batch**100",
    "unknown-function": "Integer(64)",
    "attribute": "batch.real",
    "lambda": "(lambda: 64)()",
    "subscript": "batch[0]",
    "string": "'64'",
    "float": "64.0",
}


# ---- where an expression can sit in an artifact -------------------------------------------------------------------

def _in_manifest_input(manifest, expr):
    manifest["inputs"][0]["spec"]["shape"][0] = expr


def _in_graph_value(graph, expr):
    """The residual of a conv with a fused add: kernel selection compares its shape with the output's."""
    conv = node_of(graph, "conv2d", lambda n: any(p["operand"] is not None for p in n["attrs"]["post_ops"]))
    operand = next(p["operand"] for p in conv["attrs"]["post_ops"] if p["operand"] is not None)
    graph["values"][conv["inputs"][operand]]["shape"][0] = expr


def _in_reshape_attr(graph, expr):
    node = node_of(graph, "reshape", lambda n: any(isinstance(d, str) for d in n["attrs"]["shape"]))
    shape = node["attrs"]["shape"]
    shape[next(i for i, d in enumerate(shape) if isinstance(d, str))] = expr


def _sym_args(value):
    if isinstance(value, dict):
        if set(value) == {"$sym"}:
            yield value
        for v in value.values():
            yield from _sym_args(v)
    elif isinstance(value, list):
        for v in value:
            yield from _sym_args(v)


def _in_aten_sym(graph, expr):
    """A `$sym` that is "batch" (so the plain expression "batch" leaves the graph as it was)."""
    node = node_of(graph, "aten", lambda n: any(s["$sym"] == "batch" for s in _sym_args(n["attrs"])))
    next(s for s in _sym_args(node["attrs"]) if s["$sym"] == "batch")["$sym"] = expr


# location -> (which tiny artifact, which JSON part, the edit)
LOCATIONS = {
    "manifest-input-shape": ("bert", "manifest", _in_manifest_input),
    "graph-value-spec": ("cnn", "graph", _in_graph_value),
    "reshape-shape-attr": ("bert", "graph", _in_reshape_attr),
    "aten-sym-arg": ("bert", "graph", _in_aten_sym),
}
DOS_LOCATIONS = ("manifest-input-shape", "reshape-shape-attr")


def _hostile(src: Path, dst: Path, location: str, expr: str) -> Path:
    """A re-hashed copy of src with expr at location."""
    _, part, edit = LOCATIONS[location]
    return rewrite_artifact(src, dst, **{f"edit_{part}": lambda obj: edit(obj, expr)})


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, tiny_bert_artifact, tiny_cnn_artifact):
    """Every hostile artifact, loaded (and, were it to load, run) in one child process: name -> result."""
    folder = tmp_path_factory.mktemp("dim-expressions")
    sources = {"bert": tiny_bert_artifact, "cnn": tiny_cnn_artifact}
    paths: dict[str, Path] = {}
    for location, (model, _, _) in LOCATIONS.items():
        marker = folder / f"ran-{location}"
        paths[f"code:{location}"] = _hostile(sources[model], folder / f"code-{location}.ipxc", location,
                                             CODE.format(marker=marker))
    for location in DOS_LOCATIONS:
        for name, expr in HOSTILE.items():
            model = LOCATIONS[location][0]
            paths[f"{name}:{location}"] = _hostile(sources[model], folder / f"{name}-{location}.ipxc", location, expr)
    # The valid artifacts first: they warm the child up (imports), so the timings below are the refusals'.
    results = load_in_child(tiny_bert_artifact, tiny_cnn_artifact, *paths.values(), timeout=600)
    assert [r["result"] for r in results[:2]] == ["ran", "ran"], results[:2]
    return {"folder": folder, "paths": paths, "results": dict(zip(paths, results[2:]))}


def test_the_edits_hit_what_they_aim_at(tiny_bert_artifact, tiny_cnn_artifact, tmp_path):
    """Each location exists in the tiny artifacts and holds a dim expression there (so a refusal below is
    about the expression, not a missing node): written with a plain valid expression, each still runs."""
    sources = {"bert": tiny_bert_artifact, "cnn": tiny_cnn_artifact}
    paths = [_hostile(sources[model], tmp_path / f"{location}.ipxc", location, "batch")
             for location, (model, _, _) in LOCATIONS.items() if model == "bert"]
    paths.append(_hostile(tiny_cnn_artifact, tmp_path / "cnn.ipxc", "graph-value-spec", "batch"))
    assert [r["result"] for r in load_in_child(*paths)] == ["ran"] * len(paths)


@pytest.mark.parametrize("location", list(LOCATIONS))
def test_code_in_a_dim_expression_never_runs(hostile, location):
    result = hostile["results"][f"code:{location}"]
    assert not (hostile["folder"] / f"ran-{location}").exists(), "the artifact's expression ran as Python"
    assert result["result"] == "artifact_error", result
    assert "dim expression" in result["problem"] and "__import__" in result["problem"], result


@pytest.mark.parametrize("location", DOS_LOCATIONS)
@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_dim_expressions_are_refused_quickly(hostile, location, name):
    result = hostile["results"][f"{name}:{location}"]
    assert result["result"] == "artifact_error", result
    assert "dim expression" in result["problem"] and "refused" in result["problem"], result
    assert result["seconds"] < 5, result  # a parse, not 9**9**9**9 (which never finishes)


def test_load_artifact_raises_artifact_error_in_process(hostile):
    """The same refusal through the public API in this process, with the file named and a fix."""
    path = hostile["paths"]["code:graph-value-spec"]
    with pytest.raises(ArtifactError) as info:
        load_artifact(path)
    assert str(path) in info.value.problem and info.value.fix
    assert not (hostile["folder"] / "ran-graph-value-spec").exists()


def test_cli_run_refuses_with_exit_2(tmp_path, tiny_bert_artifact):
    marker = tmp_path / "ran-cli"
    path = _hostile(tiny_bert_artifact, tmp_path / "cli.ipxc", "manifest-input-shape", CODE.format(marker=marker))
    done = subprocess.run([sys.executable, "-m", "ipexconvert.cli", "run", str(path), "-o", str(tmp_path / "out.st")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert not marker.exists(), "the artifact's expression ran as Python"
    assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert "dim expression" in done.stdout + done.stderr


def test_a_manifest_with_a_hostile_dim_is_refused_before_anything_reads_it(tmp_path, tiny_bert_artifact):
    """Validation sits in the manifest model: read_manifest (inspect) refuses it too."""
    from ipexconvert.artifact import read_manifest

    path = _hostile(tiny_bert_artifact, tmp_path / "m.ipxc", "manifest-input-shape", "9**9**9**9")
    with pytest.raises(ArtifactError, match="dim expression"):
        read_manifest(path)
