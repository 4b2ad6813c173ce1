"""Where a model's call puts the calling thread and its OpenMP workers (backends/cpu/thread_placement.py): apart
while the call runs, when the team is as big as the process's CPU set, the caller's own set back afterwards."""
from __future__ import annotations

import os
import threading
import time

import pytest
import torch

from ipexconvert.backends.cpu import native_lib, thread_placement

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or not native_lib.available(),
                                reason="needs sched_setaffinity and the native library")

CPUS = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else frozenset()
needs_two = pytest.mark.skipif(len(CPUS) < 2, reason="needs a process with at least 2 CPUs")


@pytest.fixture
def team_of_all_cpus(monkeypatch):
    """torch's threads = the process's CPUs, the caller's set whole, and the last call long ago."""
    before = torch.get_num_threads()
    torch.set_num_threads(len(CPUS))
    os.sched_setaffinity(0, CPUS)
    monkeypatch.delenv("IPEXCONVERT_PIN_THREADS", raising=False)
    monkeypatch.setattr(thread_placement, "_last_end", [0.0])
    yield
    torch.set_num_threads(before)
    os.sched_setaffinity(0, CPUS)


def test_team_thread_ids_are_the_callers_team():
    ids = native_lib.raw.team_thread_ids(2)
    assert len(ids) == 2 and ids[0] == threading.get_native_id() and ids[1] != ids[0]
    assert all(os.path.exists(f"/proc/self/task/{tid}") for tid in ids)
    assert native_lib.raw.team_thread_ids(2) == ids  # the same pool again: what placement relies on


@needs_two
def test_a_call_runs_with_the_caller_and_its_workers_apart(team_of_all_cpus):
    home = min(CPUS)
    with thread_placement.placed():
        assert os.sched_getaffinity(0) == {home}
        workers = native_lib.raw.team_thread_ids(len(CPUS))[1:]
        assert workers and all(os.sched_getaffinity(tid) == CPUS - {home} for tid in workers)
    assert os.sched_getaffinity(0) == CPUS


@needs_two
def test_the_callers_set_comes_back_when_the_call_fails(team_of_all_cpus):
    with pytest.raises(RuntimeError, match="boom"):
        with thread_placement.placed():
            assert os.sched_getaffinity(0) == {min(CPUS)}
            raise RuntimeError("boom")
    assert os.sched_getaffinity(0) == CPUS


@needs_two
def test_fewer_threads_than_cpus_run_as_they_are(team_of_all_cpus):
    torch.set_num_threads(len(CPUS) - 1 if len(CPUS) > 2 else 1)
    with thread_placement.placed():
        assert os.sched_getaffinity(0) == CPUS


@needs_two
def test_switched_off_by_the_variable(team_of_all_cpus, monkeypatch):
    monkeypatch.setenv("IPEXCONVERT_PIN_THREADS", "0")
    with thread_placement.placed():
        assert os.sched_getaffinity(0) == CPUS
    assert "IPEXCONVERT_PIN_THREADS=0" in thread_placement.rule()


@needs_two
def test_a_call_right_after_the_last_runs_as_it_is(team_of_all_cpus):
    with thread_placement.placed():
        pass
    thread_placement._last_end[0] = time.monotonic()  # the workers still spin where they are
    with thread_placement.placed():
        assert os.sched_getaffinity(0) == CPUS


@needs_two
def test_a_second_thread_meanwhile_runs_as_it_is(team_of_all_cpus):
    seen, go, done = {}, threading.Event(), threading.Event()

    def other():  # started before the call, so its set is the process's whole one
        go.wait(10)
        with thread_placement.placed():
            seen["cpus"] = os.sched_getaffinity(0)
        done.set()

    caller = threading.Thread(target=other)
    caller.start()
    with thread_placement.placed():
        go.set()
        assert done.wait(10)
        assert os.sched_getaffinity(0) == {min(CPUS)}
    caller.join()
    assert seen["cpus"] == CPUS


@pytest.fixture(scope="module")
def tiny_cnn(tmp_path_factory):
    import ipexconvert

    path = tmp_path_factory.mktemp("placement") / "tiny.ipxc"
    ipexconvert.optimize("example:tiny-cnn", output=path)
    return ipexconvert.load_artifact(path)


@needs_two
def test_a_model_call_runs_placed_and_leaves_the_callers_set_as_it_was(team_of_all_cpus, tiny_cnn, monkeypatch):
    inside = []
    real = thread_placement.placed

    def watched():
        inside.append(True)
        return real()

    monkeypatch.setattr(thread_placement, "placed", watched)
    assert tiny_cnn(torch.randn(1, 3, 64, 64)).shape == (1, 10)
    assert inside and os.sched_getaffinity(0) == CPUS


@needs_two
def test_workers_are_asked_again_after_the_team_size_changed(team_of_all_cpus):
    with thread_placement.placed():
        pass
    torch.set_num_threads(1)
    thread_placement._last_end[0] = 0.0
    with thread_placement.placed():
        assert os.sched_getaffinity(0) == CPUS
    assert getattr(thread_placement._teams, "team", None) is None
    torch.set_num_threads(len(CPUS))
    thread_placement._last_end[0] = 0.0
    with thread_placement.placed():
        workers = native_lib.raw.team_thread_ids(len(CPUS))[1:]
        assert all(os.sched_getaffinity(tid) == CPUS - {min(CPUS)} for tid in workers)


@needs_two
def test_a_refused_binding_runs_the_call_as_it_is(team_of_all_cpus, monkeypatch):
    real = os.sched_setaffinity

    def refuse_the_caller(pid, cpus):
        if pid == 0:
            raise PermissionError("not in this container")
        real(pid, cpus)

    ran = False
    with monkeypatch.context() as patched:
        patched.setattr(os, "sched_setaffinity", refuse_the_caller)
        with thread_placement.placed():
            ran = True
            assert os.sched_getaffinity(0) == CPUS
    assert ran
