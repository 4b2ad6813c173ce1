#!/bin/bash
# Session 70 device call, GPU machine's host CPU (GPU hidden, 2 cores pinned): thread placement per call
# (backends/cpu/thread_placement.py): its tests and the runtime's, then calls after an idle spell, placed or not.
set -u
export PATH="$(dirname "$(command -v python3)"):$PATH"
python3 -m pip install -q --no-index --no-deps .whl/*.whl >"$OUT/install.log" 2>&1
export CUDA_VISIBLE_DEVICES=
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { tail -40 "$OUT/install.log"; exit 1; }
echo "built at ${SECONDS}s"
taskset -c 0,1 ipexconvert doctor 2>&1 | grep -A3 -i "thread_placement\|^threads"
[ -n "${SKIP_TESTS:-}" ] || taskset -c 0,1 timeout 300 python3 -m pytest -q -x -p no:cacheprovider tests/backends/cpu/test_thread_placement.py tests/native/test_native_threads.py tests/runtime 2>&1 | tail -2
echo "tests done at ${SECONDS}s"
for m in tiny-cnn tiny-bert; do taskset -c 0,1 ipexconvert optimize example:$m -o /tmp/$m.ipxc >/dev/null 2>&1; done
taskset -c 0,1 ipexconvert optimize example:resnet50 --dtype bf16 -o /tmp/resnet50.bf16.ipxc >/dev/null 2>&1
taskset -c 0,1 timeout 240 python3 benchmarks/after_idle.py /tmp/tiny-cnn.ipxc /tmp/tiny-bert.ipxc /tmp/resnet50.bf16.ipxc --pairs 2
echo "done at ${SECONDS}s"
