#!/bin/bash
# Session 71, fourth device call, GPU machine's host CPU (GPU hidden, 2 cores pinned): after the conv shape choices
# (folded rows at batch 1, stacked images for 1x1 and side by side for narrow 3x3 layers at batch >= 2): the conv
# tests, then ResNet-50 bf16 at batch 16 with and without them (benchmarks/ab.py --no-conv-shape-choice).
source benchmarks/device_setup.sh
taskset -c 0,1 timeout 300 python3 -m pytest -q -p no:cacheprovider tests/backends/cpu/kernels/test_onednn_direct_layers.py tests/security/test_native_arguments.py tests/backends/cpu/kernels/test_torch_onednn_qconv2d.py tests/backends/cpu/kernels/test_in_situ.py 2>&1 | tail -2
echo "tests done at ${SECONDS}s"
taskset -c 0,1 ipexconvert optimize example:resnet50 --dtype bf16 -o /tmp/r50.bf16.ipxc >/dev/null 2>&1
echo "converted at ${SECONDS}s"
taskset -c 0,1 timeout 120 python3 benchmarks/ab.py /tmp/r50.bf16.ipxc --no-conv-shape-choice --rounds 6 --dim batch=16 2>&1 | grep 'A/B [01]'
echo "done at ${SECONDS}s"
