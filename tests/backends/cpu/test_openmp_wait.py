"""The OpenMP spin count ipexconvert sets for shared hosts (ipexconvert/openmp_wait.py): set before
libgomp loads, never over the user's own choice, and reported honestly when set too late."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ipexconvert.backends.cpu import openmp_wait


def test_sets_the_short_spin_before_libgomp_loads():
    env: dict[str, str] = {}
    line = openmp_wait.apply(env, libgomp_loaded=False)
    assert env == {"GOMP_SPINCOUNT": openmp_wait.SPIN_COUNT}
    assert "set by ipexconvert" in line


@pytest.mark.parametrize("variable, value", [("GOMP_SPINCOUNT", "300000"), ("OMP_WAIT_POLICY", "ACTIVE")])
def test_the_users_choice_wins(variable, value):
    env = {variable: value}
    line = openmp_wait.apply(env, libgomp_loaded=False)
    assert env == {variable: value}
    assert line == f"{variable}={value} (set by the user)"


def test_too_late_is_said_not_pretended():
    env: dict[str, str] = {}
    line = openmp_wait.apply(env, libgomp_loaded=True)
    assert env == {}
    assert "torch was imported before ipexconvert" in line


def _fresh(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True, timeout=120).stdout.strip()


def test_in_a_fresh_process_the_import_order_decides():
    first = _fresh("import ipexconvert, os, torch; print(os.environ.get('GOMP_SPINCOUNT'))")
    assert first == openmp_wait.SPIN_COUNT
    late = _fresh("import torch, os, ipexconvert; print(os.environ.get('GOMP_SPINCOUNT'))")
    assert late == "None"
