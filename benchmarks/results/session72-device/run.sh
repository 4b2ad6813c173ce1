#!/bin/bash
# Session 72, GPU machine's host CPU (GPU hidden, 2 cores pinned): layer_norm's bf16 rows rewritten (options as
# template arguments, whole vectors unmasked): the native kernel tests (every level the host has), then BERT-base
# bf16 b1 per node (add_layer_norm in the model).
source benchmarks/device_setup.sh
taskset -c 0,1 timeout 400 python3 -m pytest -q -p no:cacheprovider tests/native/test_native_kernels.py tests/native/test_native_quant.py tests/native/test_native_isa.py 2>&1 | tail -2
echo "tests done at ${SECONDS}s"
