#!/bin/bash
# Session 74, GPU machine's host CPU (AMX Xeon, GPU hidden, torch 2.11): why int4-a8 decode reads 0.77-0.80 of the
# bandwidth there (session 65) against 0.93 on another AMX Xeon. The CPU topology (are CPUs 0 and 1 one core's two
# hyperthreads?), then Qwen2-0.5B-shaped int8-a8 / int4-a8 (benchmarks/qwen2_module.py, random weights) on CPUs 0,1
# and on two CPUs of two different cores, `ipexconvert bench`'s share of the read bandwidth it measures.
source benchmarks/device_setup.sh
{ lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Core|Socket|NUMA|L2|L3'; lscpu -p=CPU,CORE,SOCKET,NODE | grep -v '^#' | head -20; } | tee "$OUT/topology.txt"
other=$(lscpu -p=CPU,CORE | grep -v '^#' | awk -F, '$1==0{c=$2} $1!=0 && $2!=c && !f{print $1; f=1}')
sib=$(lscpu -p=CPU,CORE | grep -v '^#' | awk -F, '$1==0{c=$2} $1!=0 && $2==c && !f{print $1; f=1}')
echo "cpu 0's sibling: ${sib:-none}; a CPU of another core: $other" | tee -a "$OUT/topology.txt"
timeout 240 python3 benchmarks/qwen2_module.py --shape qwen2-0.5b --dtypes int8-a8,int4-a8 --out /tmp/q >"$OUT/convert.log" 2>&1; grep converted "$OUT/convert.log"
echo "converted at ${SECONDS}s"
for d in int4-a8 int8-a8 int4-a8; do
  for cpus in 0,1 0,$other; do
    echo "== $d on cpus $cpus"
    COLUMNS=200 OMP_NUM_THREADS=2 taskset -c $cpus timeout 100 ipexconvert bench /tmp/q/qwen2-0.5b.$d.ipxc --threads 2 --prompt-tokens 512 --new-tokens 32 --rounds 3 2>&1 | grep -A3 generation
  done
done | tee "$OUT/bench.log"; echo "done at ${SECONDS}s"
