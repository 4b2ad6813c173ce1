#!/bin/bash
# Needs device_tmp/attention_old/ filled first with the attention sources before this session's change:
#   mkdir -p device_tmp/attention_old; for f in attention.cpp attention_amx.h attention_dpbf16.h; do
#     git show 4826104~1:native/kernels/attention/$f > device_tmp/attention_old/$f; done; cp benchmarks/results/session69-device/att_ratio.py device_tmp/
# Session 69 device call, GPU machine's host CPU (GPU hidden, 2 cores pinned): the attention change (score epilogue
# after the next key group's tiles): tests, and the kernel old vs new (amx / f32 ratio per process, alternating).
set -u
python3 -m pip install -q --no-index --no-deps .whl/*.whl >"$OUT/install.log" 2>&1
export CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=2
mkdir -p /tmp/new_src && cp native/kernels/attention/attention.cpp native/kernels/attention/attention_amx.h native/kernels/attention/attention_dpbf16.h /tmp/new_src/
cp device_tmp/attention_old/* native/kernels/attention/
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { tail -40 "$OUT/install.log"; exit 1; }
SO=$(python3 -c "import ipexconvert._native as m; print(m.__file__)")
cp "$SO" /tmp/old.so
cp /tmp/new_src/* native/kernels/attention/
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { tail -40 "$OUT/install.log"; exit 1; }
SO=$(python3 -c "import ipexconvert._native as m; print(m.__file__)")
cp "$SO" /tmp/new.so
echo "built at ${SECONDS}s"
for i in 1 2 3; do for v in old new; do cp /tmp/$v.so "$SO"; echo "$v $(taskset -c 0,1 timeout 60 python3 device_tmp/att_ratio.py 1)"; done; done
for i in 1 2; do for v in old new; do cp /tmp/$v.so "$SO"; echo "$v 2thr $(taskset -c 0,1 timeout 60 python3 device_tmp/att_ratio.py 2)"; done; done
cp /tmp/new.so "$SO"
taskset -c 0,1 timeout 200 python3 -m pytest -q -x tests/native/test_native_attention.py tests/backends/test_kernel_oracle.py -k "attention or sdpa" -p no:cacheprovider 2>&1 | tail -1
echo "done at ${SECONDS}s"
