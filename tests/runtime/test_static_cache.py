"""Static-cache decoding (runtime/static_cache.py), checked on the CPU with the reference kernels of kv_write and
rope_kv_write: the rewritten graph generates the artifact's own tokens (fp32: the same ids; bf16: the same logits
within bf16's budget, teacher-forced), its buffers are reused, and graphs that use the cache length in ways the
rewrite cannot follow are left to the growing cache with the reason. The GPU's captured replay of the same steps:
tests/backends/cuda/test_cuda_decode.py."""
from __future__ import annotations

import pytest
import torch

import ipexconvert
import tiny_decoder
from ipexconvert.artifact import read_artifact
from ipexconvert.backends import get_backend
from ipexconvert.errors import ArtifactError
from ipexconvert.ir.graph import Node, check_graph
from ipexconvert.runtime.decoder import GrowingCache
from ipexconvert.runtime.static_cache import CAPACITY_STEP, NotStatic, StaticCache, static_program
from tiny_decoder import TinyDecoder, eager_greedy

LLAMA_EXPORTS = pytest.mark.skipif(tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < (2, 13),
                                   reason="torch.export of transformers' Llama needs torch >= 2.13 (see docs/architecture.md)")


@pytest.fixture(scope="module")
def tiny_artifact(tmp_path_factory):
    return ipexconvert.optimize(TinyDecoder(), tiny_decoder.example_inputs(), dynamic_dims=tiny_decoder.dynamic_dims(),
                                output=tmp_path_factory.mktemp("static") / "tiny.ipxc").path


@pytest.fixture
def static_on_cpu(monkeypatch):
    """A loader whose CPU models generate over static caches, as a GPU's do."""
    def load(path):
        with monkeypatch.context() as patch:
            patch.setattr(get_backend("cpu"), "static_decode", True)
            return ipexconvert.load_artifact(path, device="cpu")

    return load


def _prompt(batch: int, length: int, seed: int) -> torch.Tensor:
    return torch.randint(0, tiny_decoder.VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("batch, length", [(1, 9), (2, 4)])
def test_static_cache_generates_the_growing_caches_tokens(tiny_artifact, static_on_cpu, batch, length):
    growing = ipexconvert.load_artifact(tiny_artifact)
    static = static_on_cpu(tiny_artifact)
    assert growing.static_cache is None and static.static_cache is not None, static.static_cache_refusal
    prompt = _prompt(batch, length, seed=length)
    want = growing.generate(prompt, max_new_tokens=30, stop_at_eos=False).new_ids
    assert static.generate(prompt, max_new_tokens=30, stop_at_eos=False).new_ids == want
    assert want == eager_greedy(TinyDecoder(), prompt, 30)


def test_sampling_over_the_static_cache_draws_the_growing_caches_tokens(tiny_artifact, static_on_cpu):
    growing, static = ipexconvert.load_artifact(tiny_artifact), static_on_cpu(tiny_artifact)
    prompt = _prompt(2, 6, seed=8)
    settings = dict(max_new_tokens=20, temperature=0.8, top_k=50, top_p=0.9, seed=11, stop_at_eos=False)
    assert static.generate(prompt, **settings).new_ids == growing.generate(prompt, **settings).new_ids


def test_greedy_feeds_its_own_ids_only_where_every_logit_names_a_table_row(tiny_artifact, static_on_cpu):
    model = static_on_cpu(tiny_artifact)
    assert model.static_cache.pipelines  # logits over the vocabulary, a table of as many rows
    record, program = _program(tiny_artifact)
    static, position = static_program(program, record)
    logits = static.graph.values[record.logits]  # an LM head one wider than the table (as the greedy loop sees it)
    static.graph.values[record.logits] = logits.with_(shape=[*logits.shape[:-1], tiny_decoder.VOCAB + 1])
    assert not StaticCache(static, position, record, runner=None).pipelines


def test_a_second_generation_while_one_streams_grows_caches_of_its_own(tiny_artifact, static_on_cpu):
    model = static_on_cpu(tiny_artifact)
    first_prompt, second_prompt = _prompt(1, 7, seed=21), _prompt(1, 4, seed=22)
    stream = model.stream(first_prompt, max_new_tokens=10, stop_at_eos=False)
    first = [int(next(stream)[0])]  # the stream holds the static buffers now
    assert model.static_cache.in_use.locked()
    second = model.generate(second_prompt, max_new_tokens=10, stop_at_eos=False).new_ids  # the growing caches
    first += [int(t[0]) for t in stream]
    assert not model.static_cache.in_use.locked()
    growing = ipexconvert.load_artifact(tiny_artifact)
    assert first == growing.generate(first_prompt, max_new_tokens=10, stop_at_eos=False).new_ids[0]
    assert second == growing.generate(second_prompt, max_new_tokens=10, stop_at_eos=False).new_ids


def test_buffers_are_kept_for_the_next_generation_and_remade_for_a_new_capacity(tiny_artifact, static_on_cpu):
    model = static_on_cpu(tiny_artifact)
    steps = model.static_cache
    first = model.generate(_prompt(1, 5, seed=1), max_new_tokens=8, stop_at_eos=False).new_ids
    buffers = dict(steps.buffers)
    capacity = buffers["past_key_0"].shape[2]
    assert capacity == min(CAPACITY_STEP, tiny_decoder.MAX_POSITIONS) and steps.written == 5 + 7
    # the same prompt again: the same tokens from the same buffers (positions past the written ones are masked)
    assert model.generate(_prompt(1, 5, seed=1), max_new_tokens=8, stop_at_eos=False).new_ids == first
    # a batch of two needs new buffers
    model.generate(_prompt(2, 3, seed=2), max_new_tokens=4, stop_at_eos=False)
    assert steps.buffers["past_key_0"].shape[0] == 2 and steps.written == 3 + 3
    with pytest.raises(ValueError, match="do not fit"):
        steps.start(_prompt(1, capacity + 1, seed=3), total=capacity + 1, device=torch.device("cpu"))


@LLAMA_EXPORTS
def test_bf16_llama_logits_match_the_growing_cache_teacher_forced(static_on_cpu, tmp_path):
    path = ipexconvert.optimize("example:tiny-llama", dtype="bf16", output=tmp_path / "llama.bf16.ipxc").path
    growing, static = ipexconvert.load_artifact(path), static_on_cpu(path)
    assert static.static_cache is not None, static.static_cache_refusal
    prompt = _prompt(1, 11, seed=4)
    tokens = growing.generate(prompt, max_new_tokens=24, stop_at_eos=False).new_ids[0]
    steps_a, steps_b = GrowingCache(growing.decoder), static.static_cache
    cpu = torch.device("cpu")
    a, b = steps_a.start(prompt, 11 + 24, cpu), steps_b.start(prompt, 11 + 24, cpu)
    for token in [None, *tokens[:-1]]:
        if token is not None:
            ids = torch.tensor([[token]])
            a, b = steps_a.advance(ids), steps_b.advance(ids)
        la, lb = a[:, -1].float(), b[:, -1].float()
        assert torch.nn.functional.cosine_similarity(la, lb).item() > 0.999
        assert (la - lb).abs().max().item() <= 0.05 * la.abs().max().item()


def _program(path):
    manifest, program = read_artifact(path)
    return manifest.decoder, program


def test_the_rewrite_reads_positions_from_the_position_input(tiny_artifact):
    record, program = _program(tiny_artifact)
    static, position = static_program(program, record)
    nodes = static.graph.nodes
    assert position in static.graph.inputs and static.graph.values[position].dtype == "int64"
    assert sum(n.op == "kv_write" for n in nodes) == 2 * tiny_decoder.LAYERS
    assert not any(n.op == "kv_append" for n in nodes)
    shifted = [n for n in nodes if position in n.inputs and n.op == "aten"]
    assert shifted and all(n.attrs["target"] == "aten.add.Tensor" for n in shifted)
    assert static.weights is program.weights  # no copy of the weights
    assert program.graph.inputs[-1] != position  # the artifact's program is left as it was


def test_a_graph_using_the_cache_length_as_a_number_elsewhere_is_refused_with_the_reason(tiny_artifact):
    record, program = _program(tiny_artifact)
    g = program.graph
    arange = next(i for i, n in enumerate(g.nodes) if n.op == "aten" and n.attrs["target"] == "aten.arange.start_step")
    node = g.nodes[arange]
    g.nodes[arange] = node.model_copy(update={"attrs": {**node.attrs, "args": [0, {"$sym": "past"}]}})
    with pytest.raises(NotStatic, match="depends on past other than through past \\+ seq|uses past as a number"):
        static_program(program, record)


def test_a_graph_reading_the_cache_other_than_by_appending_is_refused(tiny_artifact):
    record, program = _program(tiny_artifact)
    g = program.graph
    reader = Node(name="peek", op="aten", inputs=["past_key_0"], outputs=["peeked"],
                  attrs={"target": "aten.neg.default", "args": [{"$in": 0}], "kwargs": {}})
    g.values["peeked"] = g.values["past_key_0"]
    g.nodes.insert(0, reader)
    with pytest.raises(NotStatic, match="reads the cache past_key_0 other than by appending"):
        static_program(program, record)


def test_an_artifact_holding_an_internal_op_is_refused(tiny_artifact):
    _, program = _program(tiny_artifact)
    g = program.graph
    append = next(i for i, n in enumerate(g.nodes) if n.op == "kv_append")
    g.nodes[append] = g.nodes[append].model_copy(update={"op": "kv_write"})
    with pytest.raises(ArtifactError, match="kv_write.* is made by the runtime at load and never stored in an artifact"):
        check_graph(g)


def test_a_static_plan_that_cannot_be_built_leaves_the_growing_cache(tiny_artifact):
    from ipexconvert.runtime.static_cache import build_static_cache

    record, program = _program(tiny_artifact)

    def refuse(static):
        raise ArtifactError("node kv_write_0 (kv_write) cannot be run: no kernel", "upgrade")

    steps, why = build_static_cache(program, record, get_backend("cpu"), refuse)
    assert steps is None and why == "its plan cannot be built: node kv_write_0 (kv_write) cannot be run: no kernel"


def test_shared_placement_places_each_constant_once():
    """Two plans from one program (the artifact's and the static-cache one) share every placed constant."""
    from ipexconvert.runtime.model import SharedPlacement

    class CountingBackend:
        device = "fake"

        def __init__(self):
            self.placed = 0

        def place_constant(self, tensor, spec):
            self.placed += 1
            return tensor.clone()

    backend = CountingBackend()
    shared = SharedPlacement(backend)
    weights = [torch.ones(3), torch.zeros(2)]
    first = [shared.place_constant(w, None) for w in weights]
    second = [shared.place_constant(w, None) for w in weights]
    assert backend.placed == 2 and all(a is b for a, b in zip(first, second))
    assert shared.device == "fake"  # everything else is the backend's


def test_inspect_says_whether_a_gpu_generates_over_static_caches(tiny_artifact, tmp_path):
    from typer.testing import CliRunner

    from ipexconvert.cli import app
    from ipexconvert.inspection import inspect_artifact

    assert inspect_artifact(tiny_artifact).summary["decoder"]["static_cache_refusal"] is None
    shown = CliRunner().invoke(app, ["inspect", str(tiny_artifact)])
    assert shown.exit_code == 0 and "on a GPU: static caches, one captured decode step" in shown.output


@pytest.mark.parametrize("change", [{"logits": "nope"}, {"input_ids": "past_key_0"},
                                    {"cache": [["input_ids", "logits"]]}, {"cache_dim": "batch"}])
def test_a_decoder_record_that_does_not_fit_the_graph_is_a_refusal_not_a_crash(tiny_artifact, change):
    """The rewrite runs at load, before generation checks the record against the graph: a hostile record must
    come out as a reason (the growing caches then refuse it with the loader's own error when generation starts)."""
    record, program = _program(tiny_artifact)
    with pytest.raises(NotStatic):
        static_program(program, record.model_copy(update=change))


def test_new_buffers_make_the_runner_forget_the_graphs_of_the_old_ones(tiny_artifact, static_on_cpu, monkeypatch):
    """A GPU runner keeps a captured graph per set of buffers, each holding them; remade buffers (another batch or
    capacity) drop those graphs (GraphRunner.forget_buffers), so the old caches' memory goes."""
    model = static_on_cpu(tiny_artifact)
    steps = model.static_cache
    forgotten: list[set[int]] = []
    monkeypatch.setattr(steps.runner, "forget_buffers", lambda addresses: forgotten.append(set(addresses)) or 0)
    model.generate(_prompt(1, 5, seed=1), max_new_tokens=3, stop_at_eos=False)
    assert forgotten == []  # the first buffers: nothing captured before them
    model.generate(_prompt(1, 4, seed=2), max_new_tokens=3, stop_at_eos=False)
    assert forgotten == []  # the same batch and capacity keep the buffers (and their graphs)
    old = {t.data_ptr() for t in steps.buffers.values()}  # (the CPU's reference writes return new tensors)
    model.generate(_prompt(2, 4, seed=3), max_new_tokens=3, stop_at_eos=False)
    assert forgotten == [old]


def test_the_gpu_runner_forgets_only_the_graphs_on_the_given_buffers():
    from collections import OrderedDict
    import threading

    from ipexconvert.backends.cuda.graphs import GraphRunner

    runner = object.__new__(GraphRunner)  # (no GPU needed for the bookkeeping)
    runner._lock = threading.Lock()
    shape = torch.Size([1, 2])
    runner._graphs = OrderedDict({((shape, torch.int64, None), (shape, torch.float32, 100)): "on 100",
                                  ((shape, torch.int64, None), (shape, torch.float32, 200)): "on 200",
                                  ((shape, torch.int64, None),): "no buffers"})
    runner._chains = OrderedDict({((shape, torch.int64, None), (shape, torch.float32, 100)): "chain on 100",
                                  ((shape, torch.int64, None), (shape, torch.float32, 200)): "chain on 200"})
    assert runner.forget_buffers({100, 300}) == 2  # a greedy chain captured on the buffers goes with them
    assert list(runner._graphs.values()) == ["on 200", "no buffers"]
    assert list(runner._chains.values()) == ["chain on 200"]
