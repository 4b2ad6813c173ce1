"""A decoder read off a graph's signature: the manifest's `decoder` record of any imported model whose inputs and
outputs follow the KV-cache contract (docs/decoders.md), whatever the source (an nn.Module, a .pt2 archive, a
checkpoint with its factory, a Hugging Face folder through examples/decoder_cache.py):

    input_ids                            int64 [batch, seq]                   the prompt, then one token a call
    past_key_<i>, past_value_<i>         [batch, kv_heads, past, head_dim]    `past`: one dynamic dim from 0
 -> logits                               [batch, 1, vocab] or [batch, seq, vocab]   generate() reads the last position
    present_key_<i>, present_value_<i>   [batch, kv_heads, past + seq, head_dim]

for layers i = 0 .. L-1; the dims may have any names. There is no list of model families: any graph of this
signature is driven by generate() and judged by the teacher-forced check. A signature that names a cache tensor
(past_*/present_* as above) but breaks the contract is a UserInputError saying what breaks: generate() would fail
on it later, or feed the cache back wrongly.
"""
from __future__ import annotations

import re
from typing import Optional

from ..errors import UserInputError
from ..examples.decoder_cache import key_name
from ..ir import Graph, dims
from ..ir.spec import TensorSpec
from ..manifest import DecoderRecord

INPUT_IDS = "input_ids"
LOGITS = "logits"
KINDS = ("key", "value")
_CACHE_NAME = re.compile(r"^(past|present)_(key|value)_(0|[1-9][0-9]{0,3})$")
_FLOAT = ("float32", "bfloat16", "float16")
CONTRACT = ("follow the decoder signature of docs/decoders.md (\"Your own decoder module\"): forward(input_ids, "
            "past_key_0, past_value_0, ...) returning a dict {'logits': ..., 'present_key_0': ..., "
            "'present_value_0': ..., ...}")
CACHE_DIM_FIX = ("declare axis 2 of every past tensor dynamic under one name with min 0, e.g. dynamic_dims "
                 "{'past_key_0': {0: batch, 2: DynamicDim('past', 0, 2047)}, ...} in Python or "
                 "--input past_key_0:batch,4,past[0..2047],64:float32")


def decoder_from_signature(graph: Graph, where: str) -> Optional[DecoderRecord]:
    """The decoder record of `graph` if its signature names a KV cache (None when it names none); UserInputError
    when it names one but breaks the contract. `where`: the model, for messages. Token ids and the tokenizer are
    left empty: the source (a Hugging Face config) or the user's settings fill them in."""
    inputs = {n: graph.values[n] for n in graph.inputs}
    outputs = {n: graph.values[n] for n in graph.outputs}
    named = [n for n in (*inputs, *outputs) if _CACHE_NAME.match(n)]
    if not named:
        return None
    return _Reader(graph, inputs, outputs, where, named).record()


class _Reader:
    def __init__(self, graph: Graph, inputs: dict[str, TensorSpec], outputs: dict[str, TensorSpec], where: str,
                 named: list[str]):
        self.graph, self.inputs, self.outputs = graph, inputs, outputs
        shown = ", ".join(named[:4]) + (", ..." if len(named) > 4 else "")
        self.prefix = f"{where} looks like a decoder (its signature names KV-cache tensors: {shown}), but"

    def refuse(self, why: str, fix: str = CONTRACT) -> UserInputError:
        return UserInputError(f"{self.prefix} {why}", fix)

    def record(self) -> DecoderRecord:
        layers = self._layers()
        batch, seq = self._input_ids()
        self._logits(batch, seq)
        cache_dim = None
        pairs: list[tuple[str, str]] = []
        for layer in range(layers):
            for kind in KINDS:
                past, present = key_name(f"past_{kind}", layer), key_name(f"present_{kind}", layer)
                cache_dim = self._cache_pair(past, present, batch, seq, cache_dim)
                pairs.append((past, present))
        return DecoderRecord(input_ids=INPUT_IDS, logits=LOGITS, cache=pairs, cache_dim=cache_dim)

    # ---- names ------------------------------------------------------------------------------------------------------

    def _layers(self) -> int:
        """The number of layers, once every name is where the contract puts it."""
        wrong_side = [f"{n} is an output" for n in self.outputs if _CACHE_NAME.match(n) and n.startswith("past_")]
        wrong_side += [f"{n} is an input" for n in self.inputs if _CACHE_NAME.match(n) and n.startswith("present_")]
        if wrong_side:
            raise self.refuse("; ".join(wrong_side[:4]), "past_* tensors are inputs (the cache so far), present_* "
                              "tensors outputs (the cache with the new positions)")
        if LOGITS not in self.outputs and not any(_CACHE_NAME.match(n) for n in self.outputs):
            raise self.refuse(f"its outputs are {_listed(self.outputs)}, not logits and present_key_<i> / "
                              "present_value_<i>", "return a dict from forward() (a tuple's outputs are named "
                              "output_0, output_1, ...): {'logits': ..., 'present_key_0': ..., 'present_value_0': ...}")
        found = {n for n in (*self.inputs, *self.outputs) if _CACHE_NAME.match(n)}
        count = 1 + max(int(_CACHE_NAME.match(n)[3]) for n in found)
        wanted = [key_name(f"{d}_{k}", i) for i in range(count) for d in ("past", "present") for k in KINDS]
        missing = [n for n in wanted if n not in found]
        if missing:
            raise self.refuse(f"it lacks {_listed(missing)}: every layer i from 0 to {count - 1} needs past_key_i and "
                              "past_value_i inputs and present_key_i and present_value_i outputs")
        extra_in = [n for n in self.inputs if n != INPUT_IDS and n not in found]
        if extra_in:
            raise self.refuse(f"it has inputs other than {INPUT_IDS} and the cache ({_listed(extra_in)}); generate() "
                              "feeds only those", "compute positions and the causal mask inside forward() from the "
                              "cache length (past_key_0.shape[2]) and the number of new tokens")
        extra_out = [n for n in self.outputs if n != LOGITS and n not in found]
        if extra_out:
            raise self.refuse(f"it has outputs other than {LOGITS} and the cache ({_listed(extra_out)}); every decode "
                              "step would compute them for nothing", "return only logits and the present cache")
        return count

    # ---- specs ------------------------------------------------------------------------------------------------------

    def _dynamic(self, dim) -> bool:
        return isinstance(dim, str) and dim in self.graph.dims

    def _input_ids(self) -> tuple:
        ids = self.inputs.get(INPUT_IDS)
        if ids is None:
            raise self.refuse(f"it has no {INPUT_IDS} input (inputs: {_listed(self.inputs)})")
        if ids.dtype != "int64" or ids.rank != 2:
            raise self.refuse(f"{INPUT_IDS} is {_shown(ids)}, not int64 [batch, seq]")
        batch, seq = ids.shape
        if not self._dynamic(seq):
            raise self.refuse(f"the sequence dim of {INPUT_IDS} is fixed at {seq}: generate() feeds the whole prompt in "
                              "one call, then one token a call",
                              f"declare axis 1 of {INPUT_IDS} dynamic, e.g. dynamic_dims {{'{INPUT_IDS}': {{0: batch, 1: "
                              "DynamicDim('seq', 1, 2048)}}}} or --input input_ids:batch,seq[1..2048]:int64")
        return batch, seq

    def _logits(self, batch, seq) -> None:
        logits = self.outputs.get(LOGITS)
        if logits is None:
            raise self.refuse(f"it has no {LOGITS} output (outputs: {_listed(self.outputs)})")
        ok = (logits.rank == 3 and logits.dtype in _FLOAT and _same(logits.shape[0], batch)
              and (logits.shape[1] == 1 or _same(logits.shape[1], seq)) and isinstance(logits.shape[2], int))
        if not ok:
            raise self.refuse(f"{LOGITS} is {_shown(logits)}, not float [batch, 1, vocab] or [batch, seq, vocab] "
                              f"(batch and seq as in {INPUT_IDS}, a fixed vocabulary)")

    def _cache_pair(self, past: str, present: str, batch, seq, cache_dim: Optional[str]) -> str:
        p, q = self.inputs[past], self.outputs[present]
        if p.rank != 4 or p.dtype not in _FLOAT or not _same(p.shape[0], batch):
            raise self.refuse(f"{past} is {_shown(p)}, not float [batch, kv_heads, past, head_dim] (batch as in "
                              f"{INPUT_IDS})")
        if not all(isinstance(d, int) for d in (p.shape[1], p.shape[3])):
            raise self.refuse(f"{past} is {_shown(p)}: its heads and head size must be fixed numbers")
        dim = p.shape[2]
        if not self._dynamic(dim):
            raise self.refuse(f"the cached length of {past} (axis 2, {dim}) is not a dynamic dim", CACHE_DIM_FIX)
        if cache_dim is not None and dim != cache_dim:
            raise self.refuse(f"{past}'s cached length is {dim}, where earlier cache tensors have {cache_dim}: one dim "
                              "must be every cache tensor's length", CACHE_DIM_FIX)
        if _same(dim, seq) or _same(dim, batch):
            raise self.refuse(f"the cached length {dim} of {past} is also a dim of {INPUT_IDS}: the prompt's length "
                              "and the cache's vary independently", CACHE_DIM_FIX)
        if self.graph.dims[dim].min != 0:
            raise self.refuse(f"the cached length {dim} starts at {self.graph.dims[dim].min}: the first call (the "
                              "prompt) runs with an empty cache", CACHE_DIM_FIX)
        grown = f"{dim} + {seq}"
        if (q.rank != 4 or q.dtype != p.dtype or not _same(q.shape[0], batch) or q.shape[1] != p.shape[1]
                or q.shape[3] != p.shape[3] or not _same(q.shape[2], grown)):
            raise self.refuse(f"{present} is {_shown(q)}, not {past} with the new positions appended along axis 2 "
                              f"({p.dtype} [{p.shape[0]}, {p.shape[1]}, {grown}, {p.shape[3]}])",
                              f"return torch.cat([{past}, new], dim=2) as {present}")
        return dim


def _same(a, b) -> bool:
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    try:
        return dims.same(a, b)
    except (dims.DimExprError, dims.DimEvalError):
        return a == b


def _shown(spec: TensorSpec) -> str:
    return f"{spec.dtype} [{', '.join(map(str, spec.shape))}]"


def _listed(names) -> str:
    names = list(names)
    return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "") if names else "none"
