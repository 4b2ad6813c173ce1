#!/bin/bash
# Session 63's third device call: TinyLlama bf16 decode with the bf16 layers as 16-bit woq_linear (runs of 64 now
# the default), beside cuBLAS's (+nofloatprojections), run / warp variants, int4; then the GPU oracle's woq cases
# (bits 16 prompt rows on cuBLAS among them) and the rewrite's and decode tests as time allows.
set -u
python3 -m pip install -q --no-index --no-deps .whl/*.whl >"$OUT/install.log" 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { tail -40 "$OUT/install.log"; exit 1; }
nvidia-smi -L; echo "installed at ${SECONDS}s"
(cd benchmarks && timeout 300 python3 gpu_decode.py --dtypes bf16+nofloatprojections,bf16,bf16+floatrun=128,bf16+floatrun=128+bf16tile=128/8/512,bf16+bf16tile=128/8/512,int4-bf16 \
  --rounds 5 --cache /tmp/gd --out "$OUT/gpu_decode.json") >"$OUT/gpu_decode.log" 2>&1
grep -v Warning "$OUT/gpu_decode.log" | tail -16; echo "decode done at ${SECONDS}s"
timeout $((440 - SECONDS)) python3 -m pytest -q -p no:cacheprovider -n 8 -rfE tests/backends/test_kernel_oracle.py -k "cuda and woq" >"$OUT/oracle_woq.log" 2>&1
tail -3 "$OUT/oracle_woq.log"; echo "oracle done at ${SECONDS}s"
timeout $((455 - SECONDS)) python3 -m pytest -q -p no:cacheprovider -n 8 -rfE tests/backends/cuda/test_float_projections.py tests/backends/cuda/test_cuda_decode.py >"$OUT/cuda_tests.log" 2>&1
tail -3 "$OUT/cuda_tests.log"; echo "tests done at ${SECONDS}s"
