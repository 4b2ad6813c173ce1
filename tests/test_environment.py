"""Every environment variable ipexconvert reads is listed in ipexconvert/environment.py (and so in
docs/configuration.md), and nothing unlisted can be read through it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from ipexconvert import environment

ROOT = Path(__file__).resolve().parents[1]


def test_every_variable_in_the_sources_is_listed():
    named = set()
    for folder in ("ipexconvert", "native/src", "native/python", "native/dnnl"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".cpp", ".h"):
                named.update(re.findall(r"\bIPEXCONVERT_[A-Z0-9_]+\b", path.read_text()))
    assert named, "the scan found nothing: its folders moved?"
    assert sorted(named - set(environment.VARIABLES)) == []


def test_reading_an_unlisted_variable_is_refused():
    with pytest.raises(KeyError, match="not listed"):
        environment.get("IPEXCONVERT_NOT_A_THING")


@pytest.mark.parametrize("value, off", [(None, False), ("1", False), ("", False), ("0", True), ("Off", True),
                                        ("no", True), ("false", True), ("yes", False)])
def test_switches(value, off):
    env = {} if value is None else {"IPEXCONVERT_ONEDNN": value}
    assert environment.switched_off("IPEXCONVERT_ONEDNN", env) is off
