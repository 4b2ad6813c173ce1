#!/bin/bash
# Session 75, GPU machine's host CPU (AMX Xeon, GPU hidden, torch 2.11, 2 cores pinned): why int4-a8 decode reads
# 0.64-0.82 of the bandwidth there against int8-a8's 0.86-0.96 (sessions 65, 74). Per artifact: the step's costs
# (decode_step_costs.py: the GEMVs alone against the probe) and the LM head GEMV against a torch sum of its bytes.
source benchmarks/device_setup.sh
timeout 200 python3 benchmarks/qwen2_module.py --shape qwen2-0.5b --dtypes int8-a8,int4-a8 --out /tmp/q >"$OUT/convert.log" 2>&1; grep converted "$OUT/convert.log"
echo "converted at ${SECONDS}s"
for d in int4-a8 int8-a8; do
  echo "== $d"
  OMP_NUM_THREADS=2 taskset -c 0,1 timeout 120 python3 benchmarks/decode_step_costs.py /tmp/q/qwen2-0.5b.$d.ipxc --rounds 5 2>&1 | grep -E "^/tmp|GEMVs alone|bound plan\) |native calls replayed"
  OMP_NUM_THREADS=2 taskset -c 0,1 timeout 60 python3 benchmarks/results/session75-device/lmhead_vs_sum.py /tmp/q/qwen2-0.5b.$d.ipxc 2>&1 | tail -3
done | tee "$OUT/decode.log"; echo "done at ${SECONDS}s"
