#!/usr/bin/env bash
# The first GPU call for this branch's unmeasured kernels (attention_head, the q/k/v GEMV's RoPE epilogue), in one
# device call of at most 10 minutes: install, the CUDA tests and GPU oracle cases, the attention sweep with
# attention_head beside attention_rows, and the decode step with and without each change. Logs go to $OUT (or
# ./gpu-branch-check when unset); each stage has its own time limit so a slow one does not take the others' time.
#
#   bash benchmarks/gpu_branch_check.sh            (on the device machine, from the repository root)
set -u
out="${OUT:-gpu-branch-check}"
mkdir -p "$out"
stage() {  # stage NAME SECONDS COMMAND...: run it, its output in $out/NAME.log, its status and time in status.log
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    echo "$name rc=$? ${limit}s-limit took $((SECONDS - start))s" | tee -a "$out/status.log"
}
stage install 90 bash -c 'python3 -m pip install -q --no-index --no-deps .whl/*.whl && python3 -m pip install -q --no-index --no-deps --no-build-isolation -e .'
stage tests 180 python3 -m pytest -q -x -p no:cacheprovider tests/backends/cuda tests/backends/test_kernel_oracle.py -k cuda
cd benchmarks || exit 1
stage sweep 90 python3 gpu_attention_sweep.py --head --defaults-only --keys 128,544,1024,1920,4096
stage decode 200 python3 gpu_decode.py --dtypes int4-bf16,int4-bf16+noepilogue,int4-bf16+head \
    --prompt-tokens 512 --new-tokens 32 --rounds 3 --cache /tmp/gd
