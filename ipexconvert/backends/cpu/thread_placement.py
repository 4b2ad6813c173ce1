"""Keep the calling thread and its OpenMP workers on different CPUs while a model runs.

After the process has been idle (a server between requests), the first parallel region wakes the sleeping worker,
and Linux may wake it on the CPU the calling thread is running on. The caller then does its share and spins at the
region's barrier (GOMP_SPINCOUNT iterations) while the worker it waits for cannot run on that CPU; the next regions
do the same until the scheduler moves one of them. On 2 cores of the AMX Xeon (KVM), calls 0.1 s apart
(`benchmarks/after_idle.py`): example:tiny-cnn 10.4 ms a call, 1.5 with the threads kept apart (its first
convolution and max pool alone had taken 5.6 and 4.3 ms); example:tiny-bert 10.5 and 1.3; ResNet-50 and BERT-base
the same either way, back to back too. With two busy processes beside it, ResNet-50 fp32 b1 took 95-103 ms, 61-62
kept apart. OMP_WAIT_POLICY=PASSIVE also ended the stalls but made ResNet-50 int8 1.6x slower back to back
(benchmarks/results/session70-amx-notes.md).

So while a call runs (`placed()`), the calling thread is bound to the first CPU the process may use and its team's
workers to the others; the caller's own set is restored when the call returns (threads it starts later inherit
their creator's set, so none is left bound). Only when the team is as big as the process's CPU set (the default of
torch's thread count on a machine or container of its own): with fewer threads than CPUs the process is one of
several sharing the host, and pinning all of them to the same first CPUs would pile them up. One placed call at a
time: a call from a second thread meanwhile runs as it is. IPEXCONVERT_PIN_THREADS=0 turns this off.
"""
from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from typing import Iterator, Optional

import torch

from ... import environment
from . import native_lib

_one_at_a_time = threading.Lock()
_teams = threading.local()  # per calling thread: (team size, worker CPUs, worker thread ids) once pinned
# A call starting sooner than this after the last one ended finds the workers still spinning (GOMP_SPINCOUNT=30000
# lasts about a millisecond) where they were: it runs as it is, without the two system calls and the move.
_AWAKE_S = 0.001
_last_end = [0.0]


def rule() -> str:
    """What placement does in this process (for doctor)."""
    if not enabled():
        if environment.switched_off("IPEXCONVERT_PIN_THREADS"):
            return "off (IPEXCONVERT_PIN_THREADS=0)"
        return "off (no sched_setaffinity or native library)"
    cpus, threads = len(os.sched_getaffinity(0)), torch.get_num_threads()
    applies = "applies" if threads == cpus and cpus > 1 else "does not apply"
    return (f"while a model runs, the calling thread on the first CPU and its OpenMP workers on the others, when the "
            f"threads equal the process's CPUs ({threads} threads, {cpus} CPUs: {applies})")


def enabled() -> bool:
    return not environment.switched_off("IPEXCONVERT_PIN_THREADS") and _can_bind()


@functools.cache
def _can_bind() -> bool:
    """This OS binds threads and the native library can name the team's (once per process)."""
    return hasattr(os, "sched_setaffinity") and native_lib.available() and hasattr(native_lib.raw, "team_thread_ids")


def _workers(threads: int, cpus: frozenset[int]) -> Optional[list[int]]:
    """The calling thread's team workers, bound to `cpus`: once per team size and set (libgomp keeps a team's
    threads while its size stays the same)."""
    team = getattr(_teams, "team", None)
    if team is not None and team[0] == threads and team[1] == cpus:
        return team[2]
    workers = [int(t) for t in native_lib.raw.team_thread_ids(threads)[1:] if t > 0]
    try:
        for tid in workers:
            os.sched_setaffinity(tid, cpus)
    except OSError:  # a worker gone meanwhile, or a set the system refuses: run as it is
        _teams.team = None
        return None
    _teams.team = (threads, cpus, workers)
    return workers


def _bind_caller() -> Optional[frozenset[int]]:
    """Bind the caller to the first CPU of its set and its team's workers to the rest, when the team is as big as
    that set; the caller's set to give back, or None where nothing was bound."""
    own = frozenset(os.sched_getaffinity(0))
    threads = torch.get_num_threads()
    if threads < 2 or threads != len(own):
        _teams.team = None  # libgomp may end and remake the workers when the team size changes: ask again
        return None
    home = min(own)
    if _workers(threads, own - {home}) is None:
        return None
    try:
        os.sched_setaffinity(0, {home})
    except OSError:  # a set the system refuses (a restricted container): run as it is
        return None
    return own


@contextlib.contextmanager
def placed() -> Iterator[None]:
    """Run the body with the caller on the first CPU of the process's set and its OpenMP workers on the rest (see
    the module's docstring for when); as it is otherwise."""
    placing = (time.monotonic() - _last_end[0] >= _AWAKE_S and enabled()
               and _one_at_a_time.acquire(blocking=False))
    try:
        own = _bind_caller() if placing else None
        try:
            yield
        finally:
            if own is not None:
                with contextlib.suppress(OSError):  # (it was ours a moment ago)
                    os.sched_setaffinity(0, own)
    finally:
        if placing:
            _one_at_a_time.release()
        _last_end[0] = time.monotonic()
