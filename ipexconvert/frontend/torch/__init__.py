"""The torch.export frontend: source readers (sources/), example inputs (inputs.py), declared dynamic
dims as torch.export takes them (dynamic.py), the ATen -> IR op table (aten_map/), and the converter
(export.py, writing `aten` fallback arguments with fallback_args.py)."""
