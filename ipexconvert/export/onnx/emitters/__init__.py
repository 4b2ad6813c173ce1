"""Every module here registers its emitters in EMITTERS on import."""
from importlib import import_module
from pathlib import Path

from ._registry import EMITTERS, emits

for _file in sorted(Path(__file__).parent.glob("[a-z]*.py")):
    import_module(f"{__name__}.{_file.stem}")

__all__ = ["EMITTERS", "emits"]
