#!/bin/bash
# Session 71's third device call (session 65's recipe again, today's tree): issue 24's AMX-host decode targets on the GPU machine's host CPU (GPU hidden, 2 cores
# pinned): a Qwen2-0.5B-shaped decoder (benchmarks/qwen2_module.py, random weights) int8-a8 and int4-a8, 512-token
# prompt, 32 new tokens, `ipexconvert bench`'s share of the read bandwidth it measures.
source benchmarks/device_setup.sh
{ lscpu | grep -E 'Model name|^CPU\(s\)'; python3 -c "import torch; print(torch.__version__)"; } | tee "$OUT/machine.txt"
timeout 240 python3 benchmarks/qwen2_module.py --shape qwen2-0.5b --dtypes int8-a8,int4-a8 --out /tmp/q >"$OUT/convert.log" 2>&1; grep converted "$OUT/convert.log"
for d in int8-a8 int4-a8 int8-a8 int4-a8; do
  echo "== $d"; OMP_NUM_THREADS=2 taskset -c 0,1 timeout 120 ipexconvert bench /tmp/q/qwen2-0.5b.$d.ipxc --threads 2 --prompt-tokens 512 --new-tokens 32 --rounds 3 2>&1 | grep -v Warn | tail -6
done | tee "$OUT/bench.log"; echo "done at ${SECONDS}s"
