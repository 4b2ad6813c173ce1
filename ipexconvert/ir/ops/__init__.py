"""The opset: importing this package registers every op (one per module)."""
from importlib import import_module
from pathlib import Path

for _module in sorted(p.stem for p in Path(__file__).parent.glob("*.py")):
    if not _module.startswith("_"):
        import_module(f"{__name__}.{_module}")
