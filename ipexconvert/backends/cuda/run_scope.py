"""Which run of a plan is in progress, for memos that GPU kernels keep within one run.

Every layer of an encoder reads the same attention mask, so the first layer's derived values (the mask in
the activations' dtype, its fully masked rows) serve the others (kernels/sdpa.py). Such a memo is valid
only within one run: the next call may pass the same tensor object with new contents (a graph's static
input buffer always is), and a graph capture must compute the values inside the graph. The runner
(graphs.py) starts a run before every pass over the plan; a memo records the run it was made in.
"""
from __future__ import annotations

import itertools

_counter = itertools.count(1)
_current = 0


def begin_run() -> None:
    global _current
    _current = next(_counter)


def current() -> int:
    return _current
