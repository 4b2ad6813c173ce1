"""ONNX's node tests through import -> artifact -> run (frontend/onnx/conformance.py): no case whose
ops the importer lists may give a wrong answer, and docs/onnx.md shows this run's counts."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")
from ipexconvert.frontend.onnx import conformance  # noqa: E402

DOC = Path(__file__).resolve().parents[3] / "docs" / "onnx.md"


@pytest.fixture(scope="module")
def report():
    return conformance.run_all()


def test_no_node_test_gives_a_wrong_answer(report):
    assert len(report.results) > 800
    assert [f"{r.name}: {r.detail}" for r in report.failures()] == []


def test_every_listed_op_passes_some_node_test(report):
    """An op in the table whose every case is refused is not really supported: drop it or finish it."""
    never = [op for op, row in report.by_op().items() if row["pass"] == 0]
    assert never == []


def test_the_docs_show_this_run(report):
    text = DOC.read_text()
    assert conformance.MARKER in text
    documented = re.search(r"node tests of onnx (\S+):", text)
    assert documented, "docs/onnx.md does not say which onnx made it"
    if documented.group(1) != onnx.__version__:
        # Each onnx release ships its own node tests: the page can only match a run of the version that made it.
        pytest.skip(f"docs/onnx.md shows onnx {documented.group(1)}'s node tests; this host has onnx {onnx.__version__}")
    assert text.split(conformance.MARKER, 1)[1].strip() == conformance.markdown(report).strip(), \
        "regenerate: python -m ipexconvert.frontend.onnx.conformance --write docs/onnx.md"


def test_worker_processes_give_the_same_outcomes_in_the_same_order():
    """run_all splits the cases over spawned processes; one process must report exactly what they report."""
    names = ["test_relu", "test_reshape_", "test_abs"]
    alone = conformance.run_all(names, workers=1)
    split = conformance.run_all(names, workers=2)
    assert len(alone.results) > 5
    outcomes = [(r.name, r.outcome, r.detail) for r in alone.results]
    assert [(r.name, r.outcome, r.detail) for r in split.results] == outcomes
