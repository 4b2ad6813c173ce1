#!/bin/bash
# Session 71 device call, GPU machine's host CPU (GPU hidden, 2 cores pinned): 1x1 oneDNN layers folding an image's
# rows into 2 images where measured faster (backends/cpu/kernels/_onednn_direct_conv.py): their tests, then
# ResNet-50 b1 bf16 / int8 with and without it (benchmarks/ab.py --no-conv-shape-choice), twice each.
source benchmarks/device_setup.sh
taskset -c 0,1 timeout 300 python3 -m pytest -q -p no:cacheprovider tests/backends/cpu/kernels/test_onednn_direct_layers.py tests/backends/cpu/kernels/test_in_situ.py tests/security/test_native_arguments.py tests/backends/cpu/kernels/test_torch_onednn_qconv2d.py 2>&1 | tail -2
echo "tests done at ${SECONDS}s"
taskset -c 0,1 ipexconvert optimize example:resnet50 --dtype bf16 -o /tmp/r50.bf16.ipxc >/dev/null 2>&1
taskset -c 0,1 ipexconvert optimize example:resnet50 --dtype int8 -o /tmp/r50.int8.ipxc >"$OUT/int8.log" 2>&1 || tail -5 "$OUT/int8.log"
echo "converted at ${SECONDS}s"
for i in 1 2; do
  for a in /tmp/r50.bf16.ipxc /tmp/r50.int8.ipxc; do
    [ -f $a ] && taskset -c 0,1 timeout 200 python3 benchmarks/ab.py $a --no-conv-shape-choice --rounds 20 2>&1 | grep 'A/B [01]'
  done
done
[ -f /tmp/r50.bf16.ipxc ] && taskset -c 0,1 timeout 200 python3 benchmarks/ab.py /tmp/r50.bf16.ipxc --no-conv-shape-choice --rounds 20 --per-node 14 2>&1 | grep -A16 'A/B [01]'
echo "done at ${SECONDS}s"
