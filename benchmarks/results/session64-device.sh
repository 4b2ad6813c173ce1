#!/bin/bash
# Session 64's first device call (nvidia-h100-x1): issue 24's bits-16 prompt path on the GPU (prefill and decode
# with and without the float-projection rewrite), the GPU oracle's bf16-weights cases and tests/backends/cuda; then
# issue 21's AMX suite part B on the host CPU (GPU hidden). Run from the repo root, .whl carried; results in $OUT.
set -u
python3 -m pip install -q --no-index --no-deps .whl/*.whl >"$OUT/install.log" 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { tail -40 "$OUT/install.log"; exit 1; }
{ nvidia-smi -L; lscpu | grep -E 'Model name|^CPU\(s\)'; python3 -c 'import torch; print(torch.__version__)'; } | tee "$OUT/machine.txt"
echo "installed at ${SECONDS}s"
(cd benchmarks && timeout 200 python3 gpu_decode.py --dtypes bf16+nofloatprojections,bf16,int4-bf16 --rounds 3 --cache /tmp/gd --out "$OUT/gpu_decode.json") >"$OUT/gpu_decode.log" 2>&1
grep -v Warning "$OUT/gpu_decode.log" | tail -14; echo "decode done at ${SECONDS}s"
timeout 120 python3 -m pytest -q -p no:cacheprovider -n 8 -rfE tests/backends/test_kernel_oracle.py -k "cuda and (bf16-weights or woq)" >"$OUT/oracle.log" 2>&1
tail -3 "$OUT/oracle.log"; echo "oracle done at ${SECONDS}s"
timeout 150 python3 -m pytest -q -p no:cacheprovider -n 8 -rfE tests/backends/cuda >"$OUT/cuda_tests.log" 2>&1
tail -4 "$OUT/cuda_tests.log"; echo "cuda tests done at ${SECONDS}s"
export CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=2
timeout $((590 - SECONDS)) python3 -m pytest -q -n 15 -p no:cacheprovider -rf tests --ignore=tests/native --ignore=tests/backends \
  --ignore=tests/runtime --ignore=tests/quant --ignore=tests/export >"$OUT/suite_B.log" 2>&1
tail -12 "$OUT/suite_B.log"; echo "suite B done at ${SECONDS}s"
