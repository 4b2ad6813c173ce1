#!/bin/bash
# Session 68's device call, on the GPU machine's host CPU (GPU hidden, 2 cores pinned): bf16_amx_gemm with k chunks
# and the next panel prefetched, AMX_MAX_ROWS 1024, int8_amx_gemm (this session); the per-layer block choice
# (session 67). 1. the kernels' tests; 2. amx_gemm.py / int8_amx_gemm.py (48 BERT-base linears, ours vs oneDNN);
# 3. BERT-base bf16 A/B (tiles as chosen per layer vs IPEXCONVERT_AMX_GEMM=0) at b1 and b8 in one process, int8 at
# b1; 4. one model per process, as deployed (session67-device-2.sh): bench with the choice vs without, alternating
# processes; 5. which layers chose the tiles.
set -u
python3 -m pip install -q --no-index --no-deps .whl/*.whl >"$OUT/install.log" 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { tail -40 "$OUT/install.log"; exit 1; }
export CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=2
taskset -c 0,1 timeout 100 python3 -m pytest -q tests/native/test_native_bf16_amx_gemm.py tests/native/test_native_int8_amx_gemm.py tests/backends/cpu/kernels/test_native_amx_qlinear.py tests/native/test_native_isa.py 2>&1 | tail -1
(cd benchmarks && taskset -c 0,1 timeout 100 python3 amx_gemm.py --rounds 5 --rows 16 128 256 1024 2>&1 | tail -6)
(cd benchmarks && taskset -c 0,1 timeout 100 python3 int8_amx_gemm.py --rounds 5 --rows 16 128 256 1024 2>&1 | tail -6)
timeout 90 ipexconvert optimize example:bert-base --dtype bf16 -o /tmp/bb.ipxc --no-timing >"$OUT/bert_convert.log" 2>&1; tail -1 "$OUT/bert_convert.log"
taskset -c 0,1 timeout 100 python3 benchmarks/ab.py /tmp/bb.ipxc --env IPEXCONVERT_AMX_GEMM --rounds 12 2>&1 | tail -1
taskset -c 0,1 timeout 100 python3 benchmarks/ab.py /tmp/bb.ipxc --env IPEXCONVERT_AMX_GEMM --dim batch=8 --rounds 5 2>&1 | tail -1
timeout 120 ipexconvert optimize example:bert-base --dtype int8 --calib-synthetic 4 -o /tmp/bi.ipxc --no-timing >"$OUT/bert_int8_convert.log" 2>&1; tail -1 "$OUT/bert_int8_convert.log"
taskset -c 0,1 timeout 100 python3 benchmarks/ab.py /tmp/bi.ipxc --env IPEXCONVERT_AMX_GEMM --rounds 12 2>&1 | tail -1
for i in 1; do
  for v in 1 0; do
    printf "AMX_GEMM=$v "; IPEXCONVERT_AMX_GEMM=$v taskset -c 0,1 timeout 60 ipexconvert bench /tmp/bb.ipxc --threads 2 --warmup 12 --rounds 30 2>&1 | grep 'artifact (bf16)'
  done
done
taskset -c 0,1 timeout 60 python3 benchmarks/amx_choices.py /tmp/bb.ipxc 2>&1 | tail -1; echo "done at ${SECONDS}s"
