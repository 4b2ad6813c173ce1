#!/bin/bash
# Session 67's third device call: the in-situ choice measuring in blocks (WARM + TIMED calls of one way, then of the
# other) instead of alternating calls, on the GPU machine's host CPU (GPU hidden, 2 cores pinned). One model per
# process, as deployed: `bench` with the choice (its warm-up covers the 10 measuring calls) against
# IPEXCONVERT_AMX_GEMM=0 in alternating processes, then which layers chose the tiles.
set -u
python3 -m pip install -q --no-index --no-deps .whl/*.whl >"$OUT/install.log" 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { tail -40 "$OUT/install.log"; exit 1; }
export CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=2
timeout 90 ipexconvert optimize example:bert-base --dtype bf16 -o /tmp/bb.ipxc --no-timing >"$OUT/bert_convert.log" 2>&1; tail -1 "$OUT/bert_convert.log"
for i in 1 2 3; do
  for v in 1 0; do
    printf "AMX_GEMM=$v "; IPEXCONVERT_AMX_GEMM=$v taskset -c 0,1 timeout 120 ipexconvert bench /tmp/bb.ipxc --threads 2 --warmup 12 --rounds 40 2>&1 | grep 'artifact (bf16)' | tee -a "$OUT/bench.txt"
  done
done
taskset -c 0,1 timeout 100 python3 benchmarks/amx_choices.py /tmp/bb.ipxc 2>&1 | tail -1 | tee "$OUT/choices.txt"; echo "done at ${SECONDS}s"
