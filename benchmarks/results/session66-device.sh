#!/bin/bash
# Session 66's device call: on the GPU machine's host CPU (AMX Xeon, GPU hidden, 2 cores pinned), this session's
# bf16_amx_gemm: its tests and the registry's, the 48-layer micro-benchmark, BERT-base b1 bf16 same-process A/B.
set -u
python3 -m pip install -q --no-index --no-deps .whl/*.whl >"$OUT/install.log" 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { tail -40 "$OUT/install.log"; exit 1; }
export CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=2
{ lscpu | grep -E 'Model name|^CPU\(s\)|L2|L3'; python3 -c "import torch; print(torch.__version__)"; } | tee "$OUT/machine.txt"; echo "installed at ${SECONDS}s"
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/native/test_native_bf16_amx_gemm.py tests/backends/cpu/kernels/test_native_bf16_amx_linear.py tests/backends/cpu/kernels/test_onednn_end_to_end.py tests/backends/test_kernel_oracle.py -k "not cuda" >"$OUT/tests.log" 2>&1; tail -3 "$OUT/tests.log"; echo "tests done at ${SECONDS}s"
taskset -c 0,1 timeout 150 python3 benchmarks/amx_gemm.py --rounds 5 --threads 2 >"$OUT/amx_gemm.md" 2>&1; tail -10 "$OUT/amx_gemm.md"; echo "micro done at ${SECONDS}s"
timeout 90 ipexconvert optimize example:bert-base --dtype bf16 -o /tmp/bb.ipxc --no-timing >"$OUT/bert_convert.log" 2>&1; tail -1 "$OUT/bert_convert.log"
taskset -c 0,1 timeout 200 python3 benchmarks/ab.py /tmp/bb.ipxc --env IPEXCONVERT_AMX_GEMM --rounds 15 --threads 2 >"$OUT/bert_b1_ab.log" 2>&1; tail -3 "$OUT/bert_b1_ab.log"; echo "ab done at ${SECONDS}s"
