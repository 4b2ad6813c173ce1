#!/usr/bin/env bash
# How fast are ResNet-50's 53 convolutions (batch 1 and 16, int8 and bf16) when oneDNN primitives are
# created once and executed directly, without torch's per-call wrappers? The measurement that led to
# the direct oneDNN layers (ipexconvert._dnnl; docs/quantization.md, docs/native.md).
# Needs the registry (downloads oneDNN 3.2 built for GNU OpenMP, the runtime torch uses) and g++.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${WORK:-/tmp/onednn_direct}
mkdir -p "$work"
pip download -q --no-deps onednn-cpu-gomp==2023.2.0 onednn-devel-cpu-gomp==2023.2.0 -d "$work"
for w in "$work"/onednn*.whl; do unzip -q -o "$w" -d "$work/x"; done
inc="$work/x/onednn_devel_cpu_gomp-2023.2.0.data/data/include"
lib="$work/x/onednn_cpu_gomp-2023.2.0.data/data/lib"
g++ -O2 -std=c++17 -fopenmp "$here/resnet50_convs.cpp" -I"$inc" -L"$lib" -ldnnl -Wl,-rpath,"$lib" -o "$work/resnet50_convs"
cd "$here"
for batch in 1 16; do
  for dtype in u8 bf16; do OMP_NUM_THREADS=${THREADS:-2} "$work/resnet50_convs" "$dtype" "$batch"; done
done
# fp32 with NHWC against blocked (nChw16c) activations, per convolution (benchmarks/results/session45-cpu-experiments.md)
g++ -O2 -std=c++17 -fopenmp "$here/resnet50_convs_f32_layouts.cpp" -I"$inc" -L"$lib" -ldnnl -Wl,-rpath,"$lib" -o "$work/f32_layouts"
OMP_NUM_THREADS=${THREADS:-2} "$work/f32_layouts" 1 resnet50_convs.txt 30
