#!/bin/bash
# Session 71, second device call, GPU machine's host CPU (GPU hidden, 2 cores pinned): after the bf16 GEMV change
# (a bf16 linear of up to 4 rows on bf16_gemv at the amx level): the linear and conv kernel tests, the kernel
# oracle's linear cases, then ResNet-50 b1 bf16 with and without the conv folds, twice.
source benchmarks/device_setup.sh
taskset -c 0,1 timeout 400 python3 -m pytest -q -p no:cacheprovider tests/backends/cpu/kernels tests/backends/test_kernel_oracle.py -k 'linear or conv or in_situ' 2>&1 | tail -2
echo "tests done at ${SECONDS}s"
taskset -c 0,1 ipexconvert optimize example:resnet50 --dtype bf16 -o /tmp/r50.bf16.ipxc >/dev/null 2>&1
for i in 1 2; do taskset -c 0,1 timeout 200 python3 benchmarks/ab.py /tmp/r50.bf16.ipxc --no-conv-shape-choice --rounds 30 2>&1 | grep 'A/B [01]'; done
echo "done at ${SECONDS}s"
