#!/bin/bash
# Session 64's third device call (nvidia-h100-x1): the bits-16 prompt rows with their post-ops on cuBLAS (TinyLlama
# prefill and decode with and without the float-projection rewrite), the GPU oracle's bf16-weights cases and
# tests/backends/cuda; then issue 21's AMX cell on the host CPU (GPU hidden, 2 cores pinned): bf16 BERT-base b1
# against torch.compile bf16.
set -u
python3 -m pip install -q --no-index --no-deps .whl/*.whl >"$OUT/install.log" 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { tail -40 "$OUT/install.log"; exit 1; }
{ nvidia-smi -L; lscpu | grep -E 'Model name|^CPU\(s\)'; } | tee "$OUT/machine.txt"; echo "installed at ${SECONDS}s"
(cd benchmarks && timeout 200 python3 gpu_decode.py --dtypes bf16+nofloatprojections,bf16 --rounds 3 --cache /tmp/gd --out "$OUT/gpu_decode.json") >"$OUT/gpu_decode.log" 2>&1
grep -v Warning "$OUT/gpu_decode.log" | tail -8; echo "decode done at ${SECONDS}s"
timeout 60 python3 -m pytest -q -p no:cacheprovider -n 8 -rfE tests/backends/test_kernel_oracle.py -k "cuda and (bf16-weights or woq)" >"$OUT/oracle.log" 2>&1
tail -3 "$OUT/oracle.log"; echo "oracle done at ${SECONDS}s"
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 -rfE tests/backends/cuda >"$OUT/cuda_tests.log" 2>&1
tail -4 "$OUT/cuda_tests.log"; echo "cuda tests done at ${SECONDS}s"
export CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=2
taskset -c 0,1 timeout $((585 - SECONDS)) python3 benchmarks/run.py --cases bert-base-b1 --systems compile-bf16 ipexconvert-bf16 \
  --rounds 20 --warmup 3 --name session64-gpuhost-amx-bert-b1-bf16 --out-dir "$OUT" >"$OUT/bert_run.log" 2>&1
grep -E "compile-bf16 \||ipexconvert-bf16 \||CPU:" "$OUT/session64-gpuhost-amx-bert-b1-bf16.md" 2>/dev/null || tail -5 "$OUT/bert_run.log"; echo "bert done at ${SECONDS}s"
