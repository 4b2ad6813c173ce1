#!/bin/bash
# Session 72, second device call, GPU machine's host CPU (GPU hidden, 2 cores pinned): after the image's first step
# checks it for NaN/Inf (Kernel.checked_fn): the to_channels_last and NaN-input tests, then ResNet-50 int8 / bf16 b1
# checked in the pass against scanned before the call (checked_vs_scanned.py).
source benchmarks/device_setup.sh
taskset -c 0,1 timeout 300 python3 -m pytest -q -p no:cacheprovider tests/native/test_native_to_channels_last.py tests/security/test_bad_inputs.py tests/runtime/test_model.py 2>&1 | tail -2
echo "tests done at ${SECONDS}s"
for d in int8 bf16; do
  extra=""; [ $d = int8 ] && extra="--calib-synthetic 2"
  taskset -c 0,1 ipexconvert optimize example:resnet50 --dtype $d $extra -o /tmp/r50.$d.ipxc >/dev/null 2>&1
  taskset -c 0,1 timeout 150 python3 benchmarks/results/session72-device/checked_vs_scanned.py /tmp/r50.$d.ipxc 2>&1 | tail -1
done
echo "done at ${SECONDS}s"
