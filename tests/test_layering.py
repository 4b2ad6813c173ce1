"""The package's layering, checked on the source: the device-neutral core (IR, passes, runtime, quantization,
frontends) imports no backend, the IR imports no frontend, and the examples import neither."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ipexconvert"


def _imports(path: Path) -> set[str]:
    """Absolute module names a file imports (relative imports resolved against its package)."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)
    return found


RULES = [  # (folder, forbidden module prefix, why)
    ("ir", "ipexconvert.backends.", "the IR is device-neutral"),
    ("passes", "ipexconvert.backends.", "passes see the target (PassOptions.target), not a backend"),
    ("runtime", "ipexconvert.backends.cpu", "the executor asks the Backend protocol (backends/base.py)"),
    ("quant", "ipexconvert.backends.", "quantization is device-neutral"),
    ("frontend", "ipexconvert.backends.", "frontends make graphs, they run nothing"),
    ("ir", "ipexconvert.frontend", "the IR knows no frontend (the ATen map lives in frontend/torch/)"),
    ("examples", "ipexconvert.frontend", "examples are models and their inputs, not conversion code"),
]


@pytest.mark.parametrize("folder, forbidden, why", RULES, ids=[f"{f}-{p}" for f, p, _ in RULES])
def test_layering(folder, forbidden, why):
    offenders = sorted(f"{path.relative_to(PACKAGE.parent)} imports {module}"
                       for path in (PACKAGE / folder).rglob("*.py") for module in _imports(path)
                       if module.startswith(forbidden))
    assert not offenders, f"{why}: " + "; ".join(offenders)
