#!/bin/bash
# Session 64's second device call (nvidia-h100-x1): where the bits-16 prompt's time goes on the H100 (one prompt's GPU
# kernels with and without the float-projection rewrite), then on the AMX host (GPU hidden, 2 cores pinned):
# bf16_gemm's tests at the AVX-512 levels, and issue 21's bf16 BERT-base b1 profile and oneDNN-path A/B.
set -u
python3 -m pip install -q --no-index --no-deps .whl/*.whl >"$OUT/install.log" 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { tail -40 "$OUT/install.log"; exit 1; }
nvidia-smi -L; echo "installed at ${SECONDS}s"
(cd benchmarks && timeout 200 python3 gpu_decode.py --dtypes bf16+nofloatprojections,bf16 --rounds 1 --cache /tmp/gd --profile-prefill) >"$OUT/gpu_prefill_profile.log" 2>&1
grep -v Warning "$OUT/gpu_prefill_profile.log" | tail -75; echo "profile done at ${SECONDS}s"
export CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=2
timeout 120 python3 -m pytest -q -p no:cacheprovider -n 8 tests/native/test_native_bf16_gemv.py tests/native/test_native_woq_gemm.py >"$OUT/amx_gemm_tests.log" 2>&1
tail -3 "$OUT/amx_gemm_tests.log"; echo "tests done at ${SECONDS}s"
timeout 60 ipexconvert optimize example:bert-base --dtype bf16 -o /tmp/bb.ipxc --no-timing >"$OUT/bert_convert.log" 2>&1; tail -2 "$OUT/bert_convert.log"
taskset -c 0,1 timeout 100 ipexconvert bench /tmp/bb.ipxc --threads 2 --rounds 20 --profile >"$OUT/bert_profile.log" 2>&1
tail -30 "$OUT/bert_profile.log"; echo "bench done at ${SECONDS}s"
taskset -c 0,1 timeout $((580 - SECONDS)) python3 benchmarks/ab.py /tmp/bb.ipxc --without onednn_direct_linear --rounds 20 --threads 2 >"$OUT/bert_ab_direct.log" 2>&1
tail -8 "$OUT/bert_ab_direct.log"; echo "ab done at ${SECONDS}s"
