"""What a kernel boundary costs a decode step on the GPU: a chain of int4 weight-only GEMVs y_{i+1} = W_i y_i run as
one kernel launch each (the backend's woq_rows through its factory, programmatic dependent launch on, as a decode
step runs them) against the same chain inside ONE persistent kernel (`woq_chain` below), whose programs take work
items (a column block and split of k of one GEMV) from an atomic counter in chain order and, before a GEMV's x is
read, wait on a counter of the previous GEMV's finished column blocks. Taking items in order keeps it free of
deadlock: an item waits only on items already taken by running programs.

If the persistent chain's time a GEMV is far below the launched chain's, fewer and longer kernels (a decode layer or
step in one kernel) are the way to int4 <= 0.9 ms a token (issue 24); if not, the boundary is not what costs.
Experiment code, not the backend's: the same arithmetic as woq_rows (int4, groups of 128, symmetric, one bf16 row),
its output checked against the launched chain's.

    python benchmarks/gpu_chain.py --sizes 2048,5632 --chain 64
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

from ipexconvert.backends.cuda.kernels import woq_linear
from ipexconvert.backends.cuda.kernels._triton_jit import woq_program_slice, woq_run_sums, woq_run_weights
from ipexconvert.ir.opdef import get_op
from ipexconvert.ir.spec import TensorSpec
from ipexconvert.runtime.kernels import NodeContext

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import gpu_graph_ms  # noqa: E402


@triton.jit
def woq_chain(x_ptr, words_ptr, scales_ptr, work_ptr, ticket_ptr, counter_ptr, done_ptr,
              N, K, k_words, groups, group_size, split_words, splits, blocks, stages, code_mask,
              BLOCK_N: tl.constexpr, RUN: tl.constexpr, SPLIT_ROWS: tl.constexpr):
    """GEMV i of the chain reads x row i and writes row i + 1 of x_ptr [stages + 1, K] (N == K); its codes and
    scales are the i-th [N, k_words] / [N, groups] of words_ptr / scales_ptr."""
    PER_WORD: tl.constexpr = 8
    WORDS: tl.constexpr = RUN // PER_WORD
    per_stage = blocks * splits
    total = per_stage * stages
    item = tl.atomic_add(counter_ptr, 1)
    while item < total:
        stage = item // per_stage
        rest = item % per_stage
        block = rest % blocks
        part = rest // blocks
        n, n_ok, n64, w, word_begin, word_end = woq_program_slice(block, part, N, k_words, split_words, BLOCK_N,
                                                                  WORDS)
        stage_words = words_ptr + stage.to(tl.int64) * N * k_words
        stage_scales = scales_ptr + stage.to(tl.int64) * N * groups
        words, scale, offset = woq_run_weights(stage_words, stage_scales, stage_scales, n64, n_ok, w, word_begin,
                                               word_end, k_words, groups, group_size, 4, 8, False, PER_WORD)
        if stage > 0:  # the previous GEMV's column blocks all written
            ready = tl.atomic_add(done_ptr + stage - 1, 0, sem="acquire")
            while ready < blocks:
                ready = tl.atomic_add(done_ptr + stage - 1, 0, sem="acquire")
        x_row = x_ptr + stage.to(tl.int64) * K
        acc = tl.zeros([BLOCK_N, WORDS], tl.float32)
        for word in range(word_begin, word_end, WORDS):
            next_words, next_scale, next_offset = woq_run_weights(
                stage_words, stage_scales, stage_scales, n64, n_ok, w, word + WORDS, word_end, k_words, groups,
                group_size, 4, 8, False, PER_WORD)
            run, x_sum = woq_run_sums(words, x_row, x_row, word * PER_WORD + w * PER_WORD, K, 1.0, code_mask, 4, 0,
                                      False)
            acc += (run - offset[:, None] * x_sum[None, :]) * scale[:, None]
            words, scale, offset = next_words, next_scale, next_offset
        y = tl.sum(acc, axis=1)
        tl.store(work_ptr + part * N + n, y, mask=n_ok)
        tl.debug_barrier()  # every thread's partial is written before the ticket is taken
        ticket = tl.atomic_add(ticket_ptr + stage * blocks + block, 1, sem="acq_rel")
        if ticket == splits - 1:
            y = tl.zeros([BLOCK_N], tl.float32)
            for j0 in range(0, splits, SPLIT_ROWS):
                j = j0 + tl.arange(0, SPLIT_ROWS)
                parts = tl.load(work_ptr + (j * N)[:, None] + n[None, :], mask=(j < splits)[:, None] & n_ok[None, :],
                                other=0.0, cache_modifier=".cg")
                y += tl.sum(parts, axis=0)
            tl.store(x_ptr + (stage.to(tl.int64) + 1) * K + n, y.to(x_ptr.dtype.element_ty), mask=n_ok)
            tl.debug_barrier()  # the block's outputs are written before it counts as done
            tl.atomic_add(done_ptr + stage, 1, sem="release")
        item = tl.atomic_add(counter_ptr, 1)


@triton.jit
def woq_chain_whole(x_ptr, words_ptr, scales_ptr, counter_ptr, done_ptr, N, K, k_words, groups, group_size, blocks,
                    stages, code_mask, BLOCK_N: tl.constexpr, WORDS: tl.constexpr):
    """woq_chain without a split of k: an item is BLOCK_N whole rows (WORDS >= k_words words each), its codes and
    per-word scales loaded at once before it waits, its outputs stored by itself: no partial sums, no ticket."""
    PER_WORD: tl.constexpr = 8
    total = blocks * stages
    item = tl.atomic_add(counter_ptr, 1)
    while item < total:
        stage = item // blocks
        block = item % blocks
        n = block * BLOCK_N + tl.arange(0, BLOCK_N)
        n_ok = n < N
        n64 = n.to(tl.int64)
        w = tl.arange(0, WORDS)
        w_ok = w < k_words
        live = n_ok[:, None] & w_ok[None, :]
        stage_words = words_ptr + stage.to(tl.int64) * N * k_words
        stage_scales = scales_ptr + stage.to(tl.int64) * N * groups
        words = tl.load(stage_words + n64[:, None] * k_words + w[None, :], mask=live, other=0).to(tl.uint32,
                                                                                                 bitcast=True)
        scale = tl.load(stage_scales + n64[:, None] * groups + (w * PER_WORD // group_size)[None, :], mask=live,
                        other=0.0)
        if stage > 0:
            ready = tl.atomic_add(done_ptr + stage - 1, 0, sem="acquire")
            while ready < blocks:
                ready = tl.atomic_add(done_ptr + stage - 1, 0, sem="acquire")
        x_row = x_ptr + stage.to(tl.int64) * K
        # words past k_words read x[0] against zero codes and zero scales: they add nothing
        run, x_sum = woq_run_sums(words, x_row, x_row, tl.where(w_ok, w * PER_WORD, 0), K, 1.0, code_mask, 4, 0, False)
        y = tl.sum((run - 24.0 * x_sum[None, :]) * scale, axis=1)  # 16 + the symmetric zero point 8
        tl.store(x_ptr + (stage.to(tl.int64) + 1) * K + n, y.to(x_ptr.dtype.element_ty), mask=n_ok)
        tl.debug_barrier()  # the block's outputs are written before it counts as done
        tl.atomic_add(done_ptr + stage, 1, sem="release")
        item = tl.atomic_add(counter_ptr, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="2048,5632", help="N = K of the square GEMVs")
    ap.add_argument("--chain", type=int, default=64, help="GEMVs a chain")
    ap.add_argument("--resident", default="2,4", help="persistent programs an SM to try")
    ap.add_argument("--whole-rows", default="8,16", help="woq_chain_whole's rows an item to try")
    args = ap.parse_args()
    gpu = torch.device("cuda", 0)
    sms = torch.cuda.get_device_properties(gpu).multi_processor_count
    op = get_op("woq_linear")
    group = 128
    attrs = op.parse_attrs({"bits": 4, "group_size": group, "activations": "float"})
    tile = woq_linear.TILES["float"]
    print(f"{torch.cuda.get_device_name(gpu)}, torch {torch.__version__}, Triton {triton.__version__}; "
          f"{args.chain} int4 g{group} GEMVs a chain, CUDA-graph replays", flush=True)
    for size in (int(v) for v in args.sizes.split(",")):
        n = k = size
        g = torch.Generator().manual_seed(0)
        # codes 1-15 (c - 8 of mean 0) and scales of gain ~1: the values neither vanish nor grow along the chain
        nibbles = torch.randint(1, 16, (2, args.chain, n, k // 2), dtype=torch.uint8, generator=g)
        codes = (nibbles[0] | (nibbles[1] << 4)).to(gpu)
        scales = ((0.9 + 0.2 * torch.rand(args.chain, n, k // group, generator=g)) / (4.32 * k ** 0.5)).to(gpu)
        x0 = torch.randn(1, 1, k, generator=g).to(gpu, torch.bfloat16)
        specs = (TensorSpec.of(x0), TensorSpec.of(codes[0]), TensorSpec.of(scales[0]), None, None)
        kernels = [woq_linear.triton_woq_linear(NodeContext(
            op="woq_linear", attrs=attrs, constants=(None, codes[i], scales[i], None, None), input_specs=specs,
            output_specs=tuple(op.infer(specs, attrs)), device="cuda", isa="sm")) for i in range(args.chain)]

        def launched() -> torch.Tensor:
            y = x0
            for kernel in kernels:
                y = kernel.fn([y, None, None, None, None], {})
            return y

        run_k = woq_linear.run_length(group)
        k_split = woq_linear.k_split_for(n, k, tile.chunk, tile.block_n, tile.programs)
        splits, blocks = -(-k // k_split), triton.cdiv(n, tile.block_n)
        xs = torch.zeros(args.chain + 1, k, dtype=torch.bfloat16, device=gpu)
        work = torch.empty(splits * n, dtype=torch.float32, device=gpu)
        counters = torch.zeros(1 + args.chain + args.chain * blocks, dtype=torch.int32, device=gpu)
        counter, done, tickets = counters[:1], counters[1:1 + args.chain], counters[1 + args.chain:]
        words = codes.view(torch.int32)
        code_mask = 15 << 19

        def persistent(resident: int) -> torch.Tensor:
            counters.zero_()
            xs[0].copy_(x0.reshape(-1))
            programs = min(sms * resident, args.chain * blocks * splits)
            woq_chain[(programs,)](xs, words, scales, work, tickets, counter, done, n, k, k // 8, k // group, group,
                                   k_split // 8, splits, blocks, args.chain, code_mask, BLOCK_N=tile.block_n,
                                   RUN=run_k, SPLIT_ROWS=min(32, triton.next_power_of_2(splits)),
                                   num_warps=tile.warps)
            return xs[-1]

        expected = launched().float().reshape(-1)
        size_mb = (codes[0].numel() + scales[0].numel() * 4) / 1e6
        base = gpu_graph_ms([launched]) / args.chain
        print(f"n {n} ({size_mb:.1f} MB a GEMV, {blocks} x {splits} programs): launched, PDL "
              f"{'on' if woq_linear._triton.pdl_enabled(gpu) else 'off'}: {base * 1000:.2f} us a GEMV", flush=True)

        def whole(resident: int, rows: int) -> torch.Tensor:
            counters.zero_()
            xs[0].copy_(x0.reshape(-1))
            items = triton.cdiv(n, rows)
            woq_chain_whole[(min(sms * resident, args.chain * items),)](
                xs, words, scales, counter, done, n, k, k // 8, k // group, group, items, args.chain, code_mask,
                BLOCK_N=rows, WORDS=triton.next_power_of_2(k // 8), num_warps=tile.warps)
            return xs[-1]

        runs = [(f"persistent, {r} programs an SM", lambda r=r: persistent(r))
                for r in (int(v) for v in args.resident.split(","))]
        runs += [(f"persistent whole rows ({rows} an item, no split of k), {r} programs an SM",
                  lambda r=r, rows=rows: whole(r, rows))
                 for r in (int(v) for v in args.resident.split(","))
                 for rows in (int(v) for v in args.whole_rows.split(","))]
        for label, fn in runs:
            got = fn().float()
            torch.cuda.synchronize()
            agree = torch.allclose(got, expected, rtol=2e-2, atol=2e-2 * expected.abs().max().item())
            ms = gpu_graph_ms([fn]) / args.chain
            print(f"n {n}: {label}: {ms * 1000:.2f} us a GEMV "
                  f"({ms / base:.3f} x launched); output {'agrees' if agree else 'DIFFERS'} "
                  f"(max |diff| {(got - expected).abs().max().item():.3g} of max {expected.abs().max().item():.3g})",
                  flush=True)


if __name__ == "__main__":
    main()
