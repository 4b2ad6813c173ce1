"""`bench` of a decoder artifact: prefill of a prompt and per-token decode through generate(), with the
weight bytes each decode step reads and their share of this machine's read bandwidth (measured here), and the
same share counting the KV cache a step's attention reads too."""
from __future__ import annotations

import math
import statistics
import time

import torch

from .inspection import decoder_summary
from .ir import dtypes


def decode_weight_bytes(graph) -> int:
    """Bytes of the constants one decode step reads: every weight except a table only embedding lookups read
    (one row a token); a table the LM head also reads (tied weights) counts."""
    users = graph.users()
    lookup_only = {n.inputs[0] for n in graph.nodes if n.op == "embedding"}
    lookup_only = {t for t in lookup_only if all(u.op == "embedding" for u in users.get(t, []))}
    total = 0
    for name in graph.constants:
        if name in lookup_only:
            continue
        spec = graph.values[name]
        total += math.prod(int(d) for d in spec.shape) * dtypes.to_torch(spec.dtype).itemsize
    return total


def read_bandwidth_gbs(megabytes: int = 512, repeats: int = 5, device: str = "cpu") -> float:
    """GB/s of one read pass (a float32 sum) over a buffer far larger than the caches, with torch's threads, in the
    memory of `device` (a GPU's: 4 GiB, timed on the GPU): the best of `repeats` passes, as STREAM reports its
    rates (a shared host's other work only ever slows a pass down, and the median of 5 drifted by 15 % between
    calls a minute apart on one host)."""
    if device == "cuda":
        megabytes = max(megabytes, 4096)
    x = torch.ones(megabytes << 18, device=device)
    x.sum()
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        x.sum().item()  # (.item(): the sum has finished, on any device)
        times.append(time.perf_counter() - start)
    return x.numel() * 4 / min(times) / 1e9


def bench_generation(model, prompt_tokens: int, new_tokens: int, rounds: int) -> dict:
    """Median prefill and decode timings of `rounds` generations (random prompt ids, greedy, eos ignored)."""
    vocab = model.signature.outputs[[o.name for o in model.signature.outputs].index(model.manifest.decoder.logits)].spec.shape[-1]
    ids = torch.randint(0, int(vocab), (1, prompt_tokens), generator=torch.Generator().manual_seed(0))
    model.generate(ids[:, :min(8, prompt_tokens)], max_new_tokens=2, stop_at_eos=False)  # warm: plans, buffers
    prefill, decode, bandwidths = [], [], []
    for _ in range(rounds):  # the bandwidth between the generations, so both see the host as it is
        result = model.generate(ids, max_new_tokens=new_tokens, stop_at_eos=False)
        prefill.append(result.prefill_seconds)
        if result.step_seconds:
            decode.append(statistics.median(result.step_seconds))
        bandwidths.append(read_bandwidth_gbs(device=model.device))
    weight_bytes = decode_weight_bytes(model.graph)
    # The median token's attention reads the cache of about prompt + new / 2 positions.
    cache_per_position = decoder_summary(model.manifest, model.graph)["cache_bytes_per_token"]
    cache_bytes = cache_per_position * (prompt_tokens + new_tokens // 2)
    bandwidth = max(bandwidths)
    decode_s = statistics.median(decode) if decode else None
    return {"prompt_tokens": prompt_tokens, "new_tokens": new_tokens, "rounds": rounds,
            "prefill_ms": 1e3 * statistics.median(prefill),
            "prefill_tokens_per_s": prompt_tokens / statistics.median(prefill),
            "decode_ms_per_token": None if decode_s is None else 1e3 * decode_s,
            "weight_mb_per_token": weight_bytes / 1e6, "read_bandwidth_gbs": bandwidth,
            "bandwidth_share": None if decode_s is None else weight_bytes / decode_s / 1e9 / bandwidth,
            "cache_mb_per_token": cache_bytes / 1e6,
            "read_share": None if decode_s is None else (weight_bytes + cache_bytes) / decode_s / 1e9 / bandwidth}
