"""Tiny modules several top-level tests convert (imported by name: pytest puts tests/ on sys.path)."""
from __future__ import annotations

import torch


class Small(torch.nn.Module):
    """linear + relu on [batch, 8]: converts in a second at every dtype."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))
