#!/bin/bash
# Session 66's second device call: on the GPU machine's host CPU (AMX Xeon, GPU hidden, 2 cores pinned), bf16_amx_gemm
# chosen per layer by its calls in the model (_in_situ.py): BERT-base b1 bf16 same-process A/B and each layer's choice.
set -u
python3 -m pip install -q --no-index --no-deps .whl/*.whl >"$OUT/install.log" 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { tail -40 "$OUT/install.log"; exit 1; }
export CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=2
echo "installed at ${SECONDS}s"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/backends/cpu/kernels/test_in_situ.py tests/backends/cpu/kernels/test_native_bf16_amx_linear.py >"$OUT/tests.log" 2>&1; tail -1 "$OUT/tests.log"
timeout 90 ipexconvert optimize example:bert-base --dtype bf16 -o /tmp/bb.ipxc --no-timing >"$OUT/bert_convert.log" 2>&1; tail -1 "$OUT/bert_convert.log"
for i in 1 2; do taskset -c 0,1 timeout 200 python3 benchmarks/ab.py /tmp/bb.ipxc --env IPEXCONVERT_AMX_GEMM --rounds 15 --threads 2 >"$OUT/bert_b1_ab_$i.log" 2>&1; tail -1 "$OUT/bert_b1_ab_$i.log"; done
taskset -c 0,1 timeout 100 python3 benchmarks/amx_choices.py /tmp/bb.ipxc 2>&1 | tail -1 | tee "$OUT/choices.txt"; echo "done at ${SECONDS}s"
