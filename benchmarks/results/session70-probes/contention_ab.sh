#!/bin/bash
# Two busy background processes on the 2 cores; our model timed in fresh processes, placed vs not, alternating.
cd /work/main
for i in 1 2; do python3 -c 'while True: pass' & done
sleep 1
for A in benchmarks/.cache/resnet50.fp32.2dda2cd6d2ae.ipxc benchmarks/.cache/resnet50.int8-cal17ead8fab2.2dda2cd6d2ae.ipxc; do
  for i in 1 2; do
    for pin in 1 0; do
      IPEXCONVERT_PIN_THREADS=$pin .venv/bin/python -c "
import sys; sys.path.insert(0, '.')
import ipexconvert, time, statistics, torch
from ipexconvert.artifact import read_example_inputs
p = '$A'; m = ipexconvert.load_artifact(p); x = read_example_inputs(p)
for _ in range(5): m.run_dict(x)
ts = []
for _ in range(15):
    s = time.perf_counter(); m.run_dict(x); ts.append(time.perf_counter() - s)
print('PIN=$pin', p.split('/')[-1][:22], 'median %.1f ms' % (statistics.median(ts) * 1e3))
"
    done
  done
done
kill %1 %2 2>/dev/null; wait 2>/dev/null
