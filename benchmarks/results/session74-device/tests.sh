#!/bin/bash
# Session 74, GPU machine's host CPU (AMX Xeon, GPU hidden, 2 cores pinned, torch 2.11): the tests that touch bound
# and fixed plans and their capture (a run of bound calls is now recorded in stretches around a call the capture
# refuses), the kernel oracle, the direct oneDNN layers and the bad-input tests.
source benchmarks/device_setup.sh
taskset -c 0,1 timeout 480 python3 -m pytest -q -p no:cacheprovider tests/runtime/test_fixed_plan.py \
  tests/runtime/test_bound_plan.py tests/native/test_native_capture.py tests/backends/test_kernel_oracle.py \
  tests/backends/cpu/kernels/test_onednn_direct_layers.py tests/security/test_bad_inputs.py 2>&1 | tail -3 | tee "$OUT/tests.log"
echo "done at ${SECONDS}s"
