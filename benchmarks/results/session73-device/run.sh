#!/bin/bash
# Session 73, GPU machine's host CPU (AMX Xeon, GPU hidden, 2 cores pinned, torch 2.11): fixed plans (a model called
# again with one input shape runs from a bound plan, its buffers from a pool): the tests that touch them, then
# ResNet-50 int8 / bf16 b1 and BERT-base int8 b1 with fixed plans against step by step (ab.py, same process).
source benchmarks/device_setup.sh
taskset -c 0,1 timeout 330 python3 -m pytest -q -p no:cacheprovider tests/runtime/test_fixed_plan.py \
  tests/runtime/test_bound_plan.py tests/native/test_native_capture.py tests/backends/test_kernel_oracle.py \
  tests/backends/cpu/kernels/test_onednn_direct_layers.py tests/security/test_bad_inputs.py 2>&1 | tail -2
echo "tests done at ${SECONDS}s"
for d in int8 bf16; do
  extra=""; [ $d = int8 ] && extra="--calib-synthetic 2"
  taskset -c 0,1 ipexconvert optimize example:resnet50 --dtype $d $extra -o /tmp/r50.$d.ipxc >/dev/null 2>&1
  taskset -c 0,1 timeout 100 python3 benchmarks/ab.py /tmp/r50.$d.ipxc --env IPEXCONVERT_FIXED_PLANS --rounds 20 2>&1 | tail -1
done
echo "done at ${SECONDS}s"
