#!/bin/bash
# Session 65's second device call: on the GPU machine's host CPU (AMX Xeon, GPU hidden, 2 cores pinned), this session's
# bf16 row chunks (BERT-base b8 bf16, same process A/B; the per-shape micro-benchmark) and peak.py's AMX tile peaks.
set -u
python3 -m pip install -q --no-index --no-deps .whl/*.whl >"$OUT/install.log" 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { tail -40 "$OUT/install.log"; exit 1; }
export CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=2
{ lscpu | grep -E 'Model name|^CPU\(s\)|L2|L3'; python3 -c "import torch; print(torch.__version__)"; } | tee "$OUT/machine.txt"; echo "installed at ${SECONDS}s"
taskset -c 0,1 timeout 120 python3 benchmarks/row_chunks.py --rounds 9 >"$OUT/row_chunks.md" 2>&1; tail -21 "$OUT/row_chunks.md"; echo "micro done at ${SECONDS}s"
timeout 60 ipexconvert optimize example:bert-base --dtype bf16 -o /tmp/bb.ipxc --no-timing >"$OUT/bert_convert.log" 2>&1; tail -1 "$OUT/bert_convert.log"
taskset -c 0,1 timeout 240 python3 benchmarks/ab.py /tmp/bb.ipxc --env IPEXCONVERT_ROW_CHUNKS --dim batch=8 --rounds 10 --threads 2 >"$OUT/bert_b8_ab.log" 2>&1; tail -3 "$OUT/bert_b8_ab.log"; echo "ab done at ${SECONDS}s"
taskset -c 0,1 timeout 120 python3 benchmarks/peak.py --threads 2 --rounds 5 >"$OUT/peak.md" 2>&1; grep -E "^\|" "$OUT/peak.md"; echo "peak done at ${SECONDS}s"
