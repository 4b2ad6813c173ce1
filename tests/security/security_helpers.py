"""Helpers the security tests share: rewrite a valid artifact into a hostile one, and run code that may
crash or hang in a child process (a SIGBUS or a blocked open must fail one test, not kill pytest).

rewrite_artifact re-hashes with ipexconvert.artifact.rehash, so its output carries valid hashes under the
current scheme: what an attacker who edits the file on purpose would produce (hashes give integrity, not
authenticity). Pass rehash=False for an edit made without re-hashing.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Optional, Union

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ipexconvert.artifact import GRAPH_KEY, MANIFEST_KEY, rehash as rehash_manifest

REPO = Path(__file__).resolve().parents[2]

Edit = Optional[Callable[[Any], Any]]


def read_parts(path: Union[str, Path]) -> tuple[dict, dict, dict[str, torch.Tensor], dict[str, str]]:
    """(manifest, graph, tensors, other metadata) of an artifact, read with safetensors itself."""
    with safe_open(str(path), framework="pt") as f:
        metadata = dict(f.metadata() or {})
        tensors = {k: f.get_tensor(k).clone() for k in f.keys()}  # clone: nothing stays mapped to the file
    manifest = json.loads(metadata.pop(MANIFEST_KEY))
    graph = json.loads(metadata.pop(GRAPH_KEY))
    return manifest, graph, tensors, metadata


def _apply(edit: Edit, value: Any) -> Any:
    """An edit mutates its argument in place (returning None) or returns the replacement."""
    if edit is None:
        return value
    result = edit(value)
    return value if result is None else result


def rewrite_artifact(src: Union[str, Path], dst: Union[str, Path], edit_manifest: Edit = None, edit_graph: Edit = None,
                     edit_tensors: Edit = None, rehash: bool = True) -> Path:
    """Copy the artifact src to dst as a valid safetensors file, after the edits.

    edit_manifest / edit_graph get the JSON object (dict); they may return a str, stored verbatim (e.g. JSON
    no loader should accept). edit_tensors gets the dict of every tensor (weights and example_inputs/...).
    rehash=True recomputes graph_sha256, tensor_sha256 and content_sha256 for the edited contents (not
    possible for a manifest given as a str)."""
    manifest, graph, tensors, other = read_parts(src)
    with safe_open(str(src), framework="pt") as f:  # unedited parts keep their exact text (and hash)
        manifest_text, graph_text = f.metadata()[MANIFEST_KEY], f.metadata()[GRAPH_KEY]
    tensors = _apply(edit_tensors, tensors)
    if edit_graph is not None:
        graph = _apply(edit_graph, graph)
        graph_text = graph if isinstance(graph, str) else json.dumps(graph)
    if edit_manifest is not None or rehash:
        manifest = _apply(edit_manifest, manifest)
        if rehash and not isinstance(manifest, str):
            manifest = rehash_manifest(manifest, graph_text, tensors)
        manifest_text = manifest if isinstance(manifest, str) else json.dumps(manifest)
    tensors = {k: v.contiguous() for k, v in tensors.items()}
    save_file(tensors, str(dst), metadata={**other, MANIFEST_KEY: manifest_text, GRAPH_KEY: graph_text})
    return Path(dst)


def node_of(graph: dict, op: str, where: Callable[[dict], bool] = lambda n: True) -> dict:
    """The first node of this op (that passes `where`)."""
    return next(n for n in graph["nodes"] if n["op"] == op and where(n))


def run_python(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run code in a fresh interpreter (repo root as cwd); the caller checks returncode and output.
    A negative returncode is the signal that killed it (-7: SIGBUS, -11: SIGSEGV)."""
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run([sys.executable, "-c", code, *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=timeout)


# A child that loads each artifact path it is given and prints one JSON line per path:
# {"path", "result": "loaded" | "artifact_error" | exception class name, "seconds", "problem"}.
LOAD_SCRIPT = r"""
import json, sys, time
from ipexconvert import load_artifact
from ipexconvert.errors import ArtifactError
for path in sys.argv[1:]:
    start = time.monotonic()
    try:
        model = load_artifact(path)
        result, problem = "loaded", ""
        from ipexconvert.artifact import read_example_inputs
        model.run_dict(read_example_inputs(path))
        result = "ran"
    except ArtifactError as e:
        result, problem = "artifact_error", e.problem
    except Exception as e:  # anything else is a bug the test reports
        result, problem = type(e).__name__, str(e)
    print(json.dumps({"path": path, "result": result, "seconds": time.monotonic() - start, "problem": problem}),
          flush=True)
"""


def load_in_child(*paths: Union[str, Path], timeout: float = 120) -> list[dict]:
    """Load (and, if that works, run on its stored example inputs) each artifact in a child process.
    Fails the test, with what the child said, when it crashes or hangs."""
    try:
        done = run_python(LOAD_SCRIPT, *map(str, paths), timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"loading {[str(p) for p in paths]} did not finish in {timeout} s (it blocks)\n"
                             f"{e.stdout or ''}{e.stderr or ''}") from None
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and len(lines) == len(paths), (
        f"child exited with {done.returncode} after {len(lines)} of {len(paths)} artifacts\n"
        f"stdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-4000:]}")
    return lines
