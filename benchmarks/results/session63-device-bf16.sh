#!/bin/bash
# Session 63's second device call (nvidia-h100-x1): a decoder's bf16 linear layers run as 16-bit woq_linear
# (backends/cuda/float_projections.py): TinyLlama bf16 decode with and without the rewrite, tile variants, int4 beside;
# then the GPU oracle's woq cases and the GPU decode tests. Run from the repo root, .whl carried; results in $OUT.
set -u
python3 -m pip install -q --no-index --no-deps .whl/*.whl >"$OUT/install.log" 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { tail -40 "$OUT/install.log"; exit 1; }
nvidia-smi -L; echo "installed at ${SECONDS}s"
(cd benchmarks && timeout 330 python3 gpu_decode.py --dtypes bf16+nofloatprojections,bf16,bf16+bf16tile=128/4/1024,bf16+floatrun=64,bf16+bf16tile=64/4/512,int4-bf16 \
  --rounds 5 --cache /tmp/gd --out "$OUT/gpu_decode.json") >"$OUT/gpu_decode.log" 2>&1
grep -v Warning "$OUT/gpu_decode.log" | tail -22; echo "decode done at ${SECONDS}s"
timeout $((585 - SECONDS)) python3 -m pytest -q -p no:cacheprovider -n 8 -rfE tests/backends/test_kernel_oracle.py -k "cuda and woq" \
 >"$OUT/oracle_woq.log" 2>&1
tail -4 "$OUT/oracle_woq.log"; echo "oracle done at ${SECONDS}s"
timeout $((590 - SECONDS)) python3 -m pytest -q -p no:cacheprovider -n 4 -rfE tests/backends/cuda/test_cuda_decode.py tests/backends/cuda/test_float_projections.py >"$OUT/cuda_decode_tests.log" 2>&1
tail -4 "$OUT/cuda_decode_tests.log"; echo "decode tests done at ${SECONDS}s"
