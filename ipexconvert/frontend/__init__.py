"""Frontends: checkpoint readers (sources/) and torch.export -> IR (export.py)."""
