"""ATen target -> IR op: the torch.export frontend's mapping table.

ATEN_MAP maps an ATen target ("aten.gelu.default") to the IR op that absorbs its calls and the
mapper that turns one call's arguments into that op's (inputs, attrs). One module per IR op, named
like the op, registers its targets, so the IR itself knows nothing of ATen. export.py keeps these
targets out of the decomposition and converts them through this table; other ATen ops become
`aten` fallback nodes (ir/ops/aten.py).
"""
from importlib import import_module
from pathlib import Path

from ._registry import ATEN_MAP, Mapper, Unconvertible, maps_to

for _module in sorted(p.stem for p in Path(__file__).parent.glob("*.py")):
    if not _module.startswith("_"):
        import_module(f"{__name__}.{_module}")

__all__ = ["ATEN_MAP", "Mapper", "Unconvertible", "maps_to"]
