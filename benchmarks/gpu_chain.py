"""What a kernel boundary costs a decode step on the GPU: a chain of int4 weight-only GEMVs, each reading the one
before it, run as one kernel launch each (the backend's woq_rows through its factory, programmatic dependent launch
on, as a decode step runs them) against the same chain inside ONE persistent kernel (`woq_stages` below), whose
programs take work items from an atomic counter in chain order and, before a GEMV's input is read, wait on a
counter of the previous GEMV's finished column blocks. Taking items in order keeps it free of deadlock: an item
waits only on items already taken by running programs. An item is woq_rows' (a column block and split of k, the
split's partial sums added by the block's last program) or, where a row of codes fits (`--whole-up-to` words), 16
whole rows read at once: no partial sums.

Chains: `--sizes` square GEMVs y_{i+1} = W_i y_i; `--layers N` N TinyLlama-shaped layers of the GEMVs that follow
each other in a decode step (o 2048 x 2048, gate/up 11264 x 2048, down 2048 x 5632, the next q/k/v 2560 x 2048; a
GEMV reads the first K outputs of the one before: the shapes and dependencies of a step, not its prologues).

If the persistent chain's time a GEMV is far below the launched chain's, fewer and longer kernels (a decode layer or
step in one kernel) are the way to int4 <= 0.9 ms a token (issue 24; docs/gpu.md). Experiment code, not the
backend's: woq_rows' arithmetic (int4, groups of 128, symmetric, one bf16 row), outputs checked against the
launched chain's.

    python benchmarks/gpu_chain.py --sizes 2048,5632 --chain 64
    python benchmarks/gpu_chain.py --sizes none --layers 22
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

GROUP = 128
WHOLE_ROWS = 16  # rows of a whole-row item
LAYER = [(2048, 2048), (11264, 2048), (2048, 5632), (2560, 2048)]  # (N, K): o, gate/up, down, the next q/k/v
# per-stage table columns (int64)
N_, K_, WORDS_AT, SCALES_AT, X_IN, X_OUT, BLOCKS, SPLITS, SPLIT_WORDS, WHOLE, TICKETS_AT, FIRST_ITEM = range(12)


@triton.jit
def woq_stages(x_ptr, words_ptr, scales_ptr, work_ptr, ticket_ptr, counter_ptr, done_ptr, table_ptr, stage_of_ptr,
               total, group_size, code_mask, COLUMNS: tl.constexpr,
               BLOCK_N: tl.constexpr, RUN: tl.constexpr, SPLIT_ROWS: tl.constexpr, WHOLE_N: tl.constexpr,
               WHOLE_WORDS: tl.constexpr):
    """Stage s (row s of table_ptr [stages, COLUMNS] int64) reads K values of x_ptr at X_IN and writes N at X_OUT;
    its codes [N, K / 8] int32 and scales [N, K / group_size] start at WORDS_AT / SCALES_AT. Items of stage s are
    FIRST_ITEM.. (stage_of_ptr: an item's stage)."""
    item = tl.atomic_add(counter_ptr, 1)
    while item < total:
        s = tl.load(stage_of_ptr + item)
        row = table_ptr + s * COLUMNS
        N = tl.load(row + 0).to(tl.int32)
        K = tl.load(row + 1).to(tl.int32)
        k_words = K // 8  # int4: 8 codes a word
        groups = K // group_size
        stage_words = words_ptr + tl.load(row + 2)
        stage_scales = scales_ptr + tl.load(row + 3)
        x_row = x_ptr + tl.load(row + 4)
        x_out = x_ptr + tl.load(row + 5)
        blocks = tl.load(row + 6).to(tl.int32)
        local = (item - tl.load(row + 11)).to(tl.int32)
        if tl.load(row + 9) != 0:
            whole_item(x_row, x_out, stage_words, stage_scales, done_ptr, s, local, N, K, k_words, groups,
                       group_size, code_mask, WHOLE_N, WHOLE_WORDS)
        else:
            split_item(x_row, x_out, stage_words, stage_scales, work_ptr, ticket_ptr + tl.load(row + 10), done_ptr, s,
                       local, N, K, k_words, groups, group_size, blocks, tl.load(row + 7).to(tl.int32),
                       tl.load(row + 8).to(tl.int32), code_mask, BLOCK_N, RUN, SPLIT_ROWS)
        item = tl.atomic_add(counter_ptr, 1)


@triton.jit
def whole_item(x_row, x_out, stage_words, stage_scales, done_ptr, s, local, N, K, k_words, groups, group_size,
               code_mask, WHOLE_N: tl.constexpr, WHOLE_WORDS: tl.constexpr):
    """WHOLE_N whole rows: codes and per-word scales loaded at once before the wait, no partial sums."""
    PER_WORD: tl.constexpr = 8
    n = local * WHOLE_N + tl.arange(0, WHOLE_N)
    n_ok = n < N
    n64 = n.to(tl.int64)
    w = tl.arange(0, WHOLE_WORDS)
    w_ok = w < k_words
    live = n_ok[:, None] & w_ok[None, :]
    words = tl.load(stage_words + n64[:, None] * k_words + w[None, :], mask=live, other=0).to(tl.uint32, bitcast=True)
    scale = tl.load(stage_scales + n64[:, None] * groups + (w * PER_WORD // group_size)[None, :], mask=live,
                    other=0.0)
    stage_wait(done_ptr, s)
    # words past k_words read x[0] against zero codes and zero scales: they add nothing
    run, x_sum = woq_run_sums(words, x_row, x_row, tl.where(w_ok, w * PER_WORD, 0), K, 1.0, code_mask, 4, 0, False)
    y = tl.sum((run - 24.0 * x_sum[None, :]) * scale, axis=1)  # 16 + the symmetric zero point 8
    stage_done(y, x_out, n, n_ok, done_ptr, s)


@triton.jit
def split_item(x_row, x_out, stage_words, stage_scales, work_ptr, tickets, done_ptr, s, local, N, K, k_words,
               groups, group_size, blocks, splits, split_words, code_mask, BLOCK_N: tl.constexpr, RUN: tl.constexpr,
               SPLIT_ROWS: tl.constexpr):
    """woq_rows' item: a column block and split of k, one run ahead in registers; the block's last program to
    finish adds the partial sums."""
    PER_WORD: tl.constexpr = 8
    WORDS: tl.constexpr = RUN // PER_WORD
    block = local % blocks
    part = local // blocks
    n, n_ok, n64, w, word_begin, word_end = woq_program_slice(block, part, N, k_words, split_words, BLOCK_N, WORDS)
    words, scale, offset = woq_run_weights(stage_words, stage_scales, stage_scales, n64, n_ok, w, word_begin,
                                           word_end, k_words, groups, group_size, 4, 8, False, PER_WORD)
    stage_wait(done_ptr, s)
    acc = tl.zeros([BLOCK_N, WORDS], tl.float32)
    for word in range(word_begin, word_end, WORDS):
        next_words, next_scale, next_offset = woq_run_weights(
            stage_words, stage_scales, stage_scales, n64, n_ok, w, word + WORDS, word_end, k_words, groups,
            group_size, 4, 8, False, PER_WORD)
        run, x_sum = woq_run_sums(words, x_row, x_row, word * PER_WORD + w * PER_WORD, K, 1.0, code_mask, 4, 0,
                                  False)
        acc += (run - offset[:, None] * x_sum[None, :]) * scale[:, None]
        words, scale, offset = next_words, next_scale, next_offset
    tl.store(work_ptr + part * N + n, tl.sum(acc, axis=1), mask=n_ok)
    tl.debug_barrier()  # every thread's partial is written before the ticket is taken
    ticket = tl.atomic_add(tickets + block, 1, sem="acq_rel")
    if ticket == splits - 1:
        y = tl.zeros([BLOCK_N], tl.float32)
        for j0 in range(0, splits, SPLIT_ROWS):
            j = j0 + tl.arange(0, SPLIT_ROWS)
            parts = tl.load(work_ptr + (j * N)[:, None] + n[None, :], mask=(j < splits)[:, None] & n_ok[None, :],
                            other=0.0, cache_modifier=".cg")
            y += tl.sum(parts, axis=0)
        stage_done(y, x_out, n, n_ok, done_ptr, s)


@triton.jit
def stage_wait(done_ptr, s):
    """Until every column block of stage s - 1 is written (stage 0 reads the chain's input). done_ptr: the stages'
    finished blocks, then (from 1024 on) how many blocks each stage has."""
    if s > 0:
        need = tl.load(done_ptr + 1024 + s - 1)
        ready = tl.atomic_add(done_ptr + s - 1, 0, sem="acquire")
        while ready < need:
            ready = tl.atomic_add(done_ptr + s - 1, 0, sem="acquire")


@triton.jit
def stage_done(y, x_out, n, n_ok, done_ptr, s):
    """A column block's outputs written, then counted (release: seen written by whoever sees the count)."""
    tl.store(x_out + n, y.to(x_out.dtype.element_ty), mask=n_ok)
    tl.debug_barrier()
    tl.atomic_add(done_ptr + s, 1, sem="release")


def stage_table(shapes: list[tuple[int, int]], whole_up_to: int, tile,
                whole_max_n: int = 1 << 30) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The per-stage table (columns N_ ... FIRST_ITEM), each item's stage, and the x buffer's length. A stage runs
    whole-row items where its rows have at most whole_up_to code words and it has at most whole_max_n outputs."""
    rows, stage_of, words_at, scales_at, x_at, tickets_at, first = [], [], 0, 0, 0, 0, 0
    for s, (n, k) in enumerate(shapes):
        whole = k // 8 <= whole_up_to and n <= whole_max_n
        if whole:
            blocks, splits, k_split = triton.cdiv(n, WHOLE_ROWS), 1, k
        else:
            k_split = woq_linear.k_split_for(n, k, tile.chunk, tile.block_n, tile.programs)
            blocks, splits = triton.cdiv(n, tile.block_n), -(-k // k_split)
        x_in, x_out = x_at, x_at + max(k, shapes[s - 1][0] if s else k)
        rows.append([n, k, words_at, scales_at, x_in, x_out, blocks, splits, k_split // 8, int(whole), tickets_at,
                     first])
        stage_of += [s] * (blocks * splits)
        words_at, scales_at, x_at = words_at + n * k // 8, scales_at + n * k // GROUP, x_out
        tickets_at, first = tickets_at + blocks, first + blocks * splits
    return torch.tensor(rows, dtype=torch.int64), torch.tensor(stage_of, dtype=torch.int32), x_at + shapes[-1][0]


def run_chain(label: str, shapes: list[tuple[int, int]], args, gpu: torch.device) -> None:
    """Times one chain launched and persistent; prints us a GEMV."""
    sms = torch.cuda.get_device_properties(gpu).multi_processor_count
    op = get_op("woq_linear")
    attrs = op.parse_attrs({"bits": 4, "group_size": GROUP, "activations": "float"})
    tile = woq_linear.TILES["float"]
    g = torch.Generator().manual_seed(0)
    # codes 1-15 (c - 8 of mean 0) and scales of gain ~1: the values neither vanish nor grow along the chain
    codes, scales = [], []
    for n, k in shapes:
        nibbles = torch.randint(1, 16, (2, n, k // 2), dtype=torch.uint8, generator=g)
        codes.append((nibbles[0] | (nibbles[1] << 4)).to(gpu))
        scales.append(((0.9 + 0.2 * torch.rand(n, k // GROUP, generator=g)) / (4.32 * k ** 0.5)).to(gpu))
    x0 = torch.randn(1, 1, shapes[0][1], generator=g).to(gpu, torch.bfloat16)
    kernels = []
    for (n, k), c, sc in zip(shapes, codes, scales):
        specs = (TensorSpec(shape=(1, 1, k), dtype="bfloat16"), TensorSpec.of(c), TensorSpec.of(sc), None, None)
        kernels.append(woq_linear.triton_woq_linear(NodeContext(
            op="woq_linear", attrs=attrs, constants=(None, c, sc, None, None), input_specs=specs,
            output_specs=tuple(op.infer(specs, attrs)), device="cuda", isa="sm")))

    def launched() -> torch.Tensor:
        y = x0
        for kernel, (n, k) in zip(kernels, shapes):
            y = kernel.fn([y[..., :k], None, None, None, None], {})
        return y

    words = torch.cat([c.view(torch.int32).reshape(-1) for c in codes])
    flat_scales = torch.cat([sc.reshape(-1) for sc in scales])
    expected = launched().float().reshape(-1)
    base = gpu_graph_ms([launched]) / len(shapes)
    mb = sum(c.numel() + sc.numel() * 4 for c, sc in zip(codes, scales)) / 1e6 / len(shapes)
    print(f"{label} ({mb:.1f} MB a GEMV): launched, PDL {'on' if woq_linear._triton.pdl_enabled(gpu) else 'off'}: "
          f"{base * 1000:.2f} us a GEMV", flush=True)
    for whole_up_to in (int(v) for v in args.whole_up_to.split(",")):
        table, stage_of, x_len = stage_table(shapes, whole_up_to, tile, args.whole_max_n)
        table, stage_of = table.to(gpu), stage_of.to(gpu)
        splits_max = int(table[:, SPLITS].max())
        xs = torch.zeros(x_len, dtype=torch.bfloat16, device=gpu)
        work = torch.empty(int((table[:, SPLITS] * table[:, N_]).max()), dtype=torch.float32, device=gpu)
        tickets = torch.zeros(int(table[:, BLOCKS].sum()), dtype=torch.int32, device=gpu)
        counts = torch.zeros(1 + 2048, dtype=torch.int32, device=gpu)  # the counter, done[1024], blocks[1024]
        assert len(shapes) <= 1024, "at most 1024 GEMVs a chain"
        counts[1 + 1024:1 + 1024 + len(shapes)] = table[:, BLOCKS].to(torch.int32)
        counter, done = counts[:1], counts[1:]
        total = len(stage_of)

        def persistent(resident: int) -> torch.Tensor:
            counter.zero_()
            done[:1024].zero_()
            tickets.zero_()
            xs[:shapes[0][1]].copy_(x0.reshape(-1))
            woq_stages[(min(sms * resident, total),)](
                xs, words, flat_scales, work, tickets, counter, done, table, stage_of, total, GROUP, 15 << 19,
                COLUMNS=table.shape[1], BLOCK_N=tile.block_n, RUN=woq_linear.run_length(GROUP),
                SPLIT_ROWS=min(32, triton.next_power_of_2(splits_max)), WHOLE_N=WHOLE_ROWS,
                WHOLE_WORDS=triton.next_power_of_2(max(1, whole_up_to)), num_warps=tile.warps)
            return xs[-shapes[-1][0]:]

        for resident in (int(v) for v in args.resident.split(",")):
            got = persistent(resident).float()
            torch.cuda.synchronize()
            # (not bit for bit: the compiled reductions add in another order, and each GEMV rounds to bf16)
            cosine = torch.nn.functional.cosine_similarity(got, expected, dim=0).item()
            ms = gpu_graph_ms([lambda r=resident: persistent(r)]) / len(shapes)
            kind = (f"whole rows up to {whole_up_to} words and {args.whole_max_n} outputs" if whole_up_to
                    else "woq_rows' items")
            print(f"{label}: persistent, {kind}, {resident} programs an SM: {ms * 1000:.2f} us a GEMV "
                  f"({ms / base:.3f} x launched); output {'agrees' if cosine > 0.999 else 'DIFFERS'} (cosine "
                  f"{cosine:.6f}, max |diff| {(got - expected).abs().max().item():.3g} of max "
                  f"{expected.abs().max().item():.3g})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="2048,5632", help="N = K of square chains ('none': no square chain)")
    ap.add_argument("--chain", type=int, default=64, help="GEMVs a square chain")
    ap.add_argument("--layers", type=int, default=0, help="then a chain of this many TinyLlama-shaped layers")
    ap.add_argument("--resident", default="2,4", help="persistent programs an SM to try")
    ap.add_argument("--whole-up-to", default="0,256", help="code words a row up to which items are whole rows "
                    "(0: woq_rows' items only), to try")
    ap.add_argument("--whole-max-n", type=int, default=1 << 30, help="whole-row items only for GEMVs with at most "
                    "this many outputs")
    args = ap.parse_args()
    gpu = torch.device("cuda", 0)
    print(f"{torch.cuda.get_device_name(gpu)}, torch {torch.__version__}, Triton {triton.__version__}; int4 "
          f"g{GROUP} GEMVs, CUDA-graph replays", flush=True)
    for size in ([] if args.sizes == "none" else [int(v) for v in args.sizes.split(",")]):
        run_chain(f"{args.chain} x {size} x {size}", [(size, size)] * args.chain, args, gpu)
    if args.layers:
        run_chain(f"{args.layers} TinyLlama layers' o, gate/up, down, q/k/v", LAYER * args.layers, args, gpu)


if __name__ == "__main__":
    main()
