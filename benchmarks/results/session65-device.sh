#!/bin/bash
# Session 65's device call (nvidia-h100-x1): this tree on the H100 (both GPU profiles of gpu_decode.py, which since
# session 64's review print their kernels through one function; the GPU oracle's cuda cases; tests/backends/cuda
# serially), then issue 21's AMX cell on the host CPU (GPU hidden, 2 cores pinned): bf16 BERT-base b1 against
# torch.compile bf16.
set -u
python3 -m pip install -q --no-index --no-deps .whl/*.whl >"$OUT/install.log" 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { tail -40 "$OUT/install.log"; exit 1; }
{ nvidia-smi -L; lscpu | grep -E 'Model name|^CPU\(s\)'; git log -1 --format=%h; } | tee "$OUT/machine.txt"; echo "installed at ${SECONDS}s"
(cd benchmarks && timeout 200 python3 gpu_decode.py --dtypes bf16 --rounds 1 --cache /tmp/gd --profile --profile-prefill) >"$OUT/gpu_profiles.log" 2>&1
grep -v Warning "$OUT/gpu_profiles.log" | tail -40; echo "profiles done at ${SECONDS}s"
timeout 120 python3 -m pytest -q -p no:cacheprovider -n 8 -rfE tests/backends/test_kernel_oracle.py -k "cuda" >"$OUT/oracle.log" 2>&1
tail -3 "$OUT/oracle.log"; echo "oracle done at ${SECONDS}s"
timeout 150 python3 -m pytest -q -p no:cacheprovider -rfE tests/backends/cuda >"$OUT/cuda_tests.log" 2>&1
tail -4 "$OUT/cuda_tests.log"; echo "cuda tests done at ${SECONDS}s"
export CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=2
taskset -c 0,1 timeout $((585 - SECONDS)) python3 benchmarks/run.py --cases bert-base-b1 --systems compile-bf16 ipexconvert-bf16 \
  --rounds 20 --warmup 3 --name session65-gpuhost-amx-bert-b1-bf16 --out-dir "$OUT" >"$OUT/bert_run.log" 2>&1
grep -E "compile-bf16 \||ipexconvert-bf16 \||CPU:" "$OUT/session65-gpuhost-amx-bert-b1-bf16.md" 2>/dev/null || tail -5 "$OUT/bert_run.log"; echo "bert done at ${SECONDS}s"
