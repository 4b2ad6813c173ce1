"""The instruction mix of the GPU weight-only GEMV kernel (_triton_jit.woq_rows) for one tile, compiled for a Hopper
GPU (sm_90) on any machine with Triton (no GPU needed: Triton's own ptxas and nvdisasm do it), counted over the
loop over k: instructions per multiply-add of a thread. Session 28 used it to cut the loop from ~7 to ~4.3
instructions a multiply-add (the integer units, at half the float rate, bound this kernel).

    pip install triton   # if torch came without it
    python benchmarks/gpu_woq_sass.py --block-n 64 --warps 2
"""
from __future__ import annotations

import argparse
import collections
import inspect
import re
import subprocess
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from ipexconvert.backends.cuda.kernels import _triton_jit

POINTERS = {"x_ptr": "*bf16", "words_ptr": "*i32", "scales_ptr": "*fp32", "zeros_ptr": "*u8", "bias_ptr": "*fp32",
            "a_ptr": "*bf16", "b_ptr": "*bf16", "out_ptr": "*bf16", "work_ptr": "*fp32", "ticket_ptr": "*i32",
            "norm_ptr": "*fp32", "eps": "fp32", "cos_ptr": "*fp32", "sin_ptr": "*fp32", "position_ptr": "*i64",
            "key_ptr": "*bf16", "value_ptr": "*bf16"}  # the other arguments: i32


def sass_of(block_n: int, warps: int, bits: int, run: int, rope_half: int = 0) -> str:
    constants = dict(BITS=bits, ZERO=8 if bits == 4 else 0, HAS_ZEROS=False, HAS_BIAS=False,
                     SPLIT_ROWS=16, HAS_A=False, HAS_B=False, P0=0, P1=0, P2=0, P3=0, RUN=run, BLOCK_N=block_n,
                     SPLIT=True, PROLOGUE=0, HAS_NORM_WEIGHT=False, GDC=False, ROPE_HALF=rope_half,
                     KV_GROUP=1, KV_SPLITS=1, KV_R=1, KV_DV=1, ROW_CHUNK=1024, PREFETCH=False)
    names = list(inspect.signature(_triton_jit.woq_rows.fn).parameters)
    signature = {name: "constexpr" if name in constants else POINTERS.get(name, "i32") for name in names}
    # as a launch marks them: pointers and the integers that are multiples of 16 (K's words, a split's words)
    aligned = {name for name in names if name in POINTERS and name != "eps"} | {"K", "k_words", "split_words"}
    attrs = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(names) if name in aligned}
    source = ASTSource(fn=_triton_jit.woq_rows, signature=signature, constexprs=constants, attrs=attrs)
    kernel = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    nvdisasm = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        return subprocess.run([str(nvdisasm), "-c", f.name], capture_output=True, text=True, check=True).stdout


def loop_opcodes(sass: str) -> collections.Counter:
    """Opcodes of the longest backward-branching block (the loop over k)."""
    lines = sass.splitlines()
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := re.match(r"^(\.L_x_\d+):", line))}
    best = (0, 0)
    for i, line in enumerate(lines):
        m = re.search(r"BRA `\((\.L_x_\d+)\)", line)
        if m and m.group(1) in labels and labels[m.group(1)] < i:
            best = max(best, (i - labels[m.group(1)], labels[m.group(1)]), key=lambda b: b[0])
    size, start = best
    opcodes = collections.Counter()
    for line in lines[start:start + size + 1]:
        m = re.match(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if m:
            opcodes[m.group(1)] += 1
    return opcodes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--block-n", type=int, default=32)
    ap.add_argument("--warps", type=int, default=4)
    ap.add_argument("--bits", type=int, default=4, choices=(4, 8))
    ap.add_argument("--run", type=int, default=128, help="inputs of a run (128 for groups of 128)")
    args = ap.parse_args()
    opcodes = loop_opcodes(sass_of(args.block_n, args.warps, args.bits, args.run))
    macs = args.block_n * args.run // (args.warps * 32)  # per thread and pass of the loop (one run)
    total = sum(opcodes.values())
    print(f"block_n {args.block_n} warps {args.warps}: the loop has {total} instructions for "
          f"{macs} multiply-adds a thread: {total / macs:.2f} each")
    for op, count in opcodes.most_common(12):
        print(f"   {count:5d} {op}")


if __name__ == "__main__":
    main()
