"""Frontends: one package per model format, each turning its models into an IR Program
(torch/: torch.export and the checkpoint readers)."""
