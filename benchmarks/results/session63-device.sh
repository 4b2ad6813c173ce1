#!/bin/bash
# Session 63's first device call (nvidia-h100-x1): install, issue 24's bf16 TinyLlama decode on the H100 beside int4,
# the GPU tests with the greedy chain on by default, then issue 21's AMX re-runs on the host CPU (GPU hidden).
# Run from the repo root of the working-tree copy, .whl carried; results land in $OUT.
set -u
python3 -m pip install -q --no-index --no-deps .whl/*.whl >"$OUT/install.log" 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { tail -40 "$OUT/install.log"; exit 1; }
{ nvidia-smi -L; lscpu | grep -E 'Model name|^CPU\(s\)'; python3 -c 'import torch; print(torch.__version__)'; } | tee "$OUT/machine.txt"
echo "installed at ${SECONDS}s"
(cd benchmarks && python3 gpu_decode.py --dtypes bf16,int4-bf16 --rounds 5 --cache /tmp/gd --out "$OUT/gpu_decode.json") >"$OUT/gpu_decode.log" 2>&1
tail -12 "$OUT/gpu_decode.log"; echo "decode done at ${SECONDS}s"
python3 -m pytest -q -p no:cacheprovider -n 4 -rf tests/backends/cuda >"$OUT/cuda_tests.log" 2>&1
tail -5 "$OUT/cuda_tests.log"; echo "cuda tests done at ${SECONDS}s"
export CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=2
python3 -m pytest -q -p no:cacheprovider -n 8 -rf tests/backends/cpu/kernels/test_torch_onednn_post_ops.py \
  tests/backends/cpu/kernels/test_torch_onednn_qlinear.py tests/backends/cpu/kernels/test_torch_onednn_qconv2d.py \
  tests/backends/cpu/kernels/test_onednn_direct_linear.py >"$OUT/amx_fixed_tests.log" 2>&1
tail -5 "$OUT/amx_fixed_tests.log"; echo "amx tests done at ${SECONDS}s"
if [ "$SECONDS" -lt 430 ]; then
  timeout $((560 - SECONDS)) python3 -m pytest -q -n 15 -p no:cacheprovider -rf tests/native tests/backends tests/runtime tests/quant tests/export >"$OUT/suite_A.log" 2>&1
  tail -15 "$OUT/suite_A.log"; echo "suite A done at ${SECONDS}s"
fi
