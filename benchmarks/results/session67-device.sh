#!/bin/bash
# Session 67's second device call: on the GPU machine's host CPU (GPU hidden, 2 cores pinned), why BERT-base b1 bf16
# with the per-layer choice of bf16_amx_gemm ran 1.027-1.028 x oneDNN's time (session66-device-2.sh's run this
# session): the CPU, then each node timed where the model runs it (ab.py --per-node), chosen vs oneDNN and tiles
# everywhere vs oneDNN.
set -u
lscpu | grep -E 'Model name|L2|L3|^CPU\(s\)' > "$OUT/cpu.txt"; cat "$OUT/cpu.txt"
python3 -m pip install -q --no-index --no-deps .whl/*.whl >"$OUT/install.log" 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { tail -40 "$OUT/install.log"; exit 1; }
export CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=2
timeout 90 ipexconvert optimize example:bert-base --dtype bf16 -o /tmp/bb.ipxc --no-timing >"$OUT/bert_convert.log" 2>&1; tail -1 "$OUT/bert_convert.log"
taskset -c 0,1 timeout 240 python3 benchmarks/ab.py /tmp/bb.ipxc --env IPEXCONVERT_AMX_GEMM --rounds 20 --threads 2 --per-node 16 >"$OUT/chosen_vs_onednn.log" 2>&1; grep -A20 'A/B' "$OUT/chosen_vs_onednn.log"
taskset -c 0,1 timeout 240 python3 benchmarks/ab.py /tmp/bb.ipxc --env IPEXCONVERT_AMX_GEMM=always --rounds 20 --threads 2 --per-node 16 >"$OUT/always_vs_onednn.log" 2>&1; grep -A20 'A/B' "$OUT/always_vs_onednn.log"
echo "done at ${SECONDS}s"
