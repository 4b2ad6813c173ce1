#!/bin/bash
# Session 72, third device call (the machine still warm from run2.sh): checked_vs_scanned.py again, twice a dtype,
# the artifacts run2.sh converted (converted again if the machine was not the same).
source benchmarks/device_setup.sh
for d in int8 bf16; do
  extra=""; [ $d = int8 ] && extra="--calib-synthetic 2"
  [ -f /tmp/r50.$d.ipxc ] || taskset -c 0,1 ipexconvert optimize example:resnet50 --dtype $d $extra -o /tmp/r50.$d.ipxc >/dev/null 2>&1
  for i in 1 2; do taskset -c 0,1 timeout 150 python3 benchmarks/results/session72-device/checked_vs_scanned.py /tmp/r50.$d.ipxc 2>&1 | tail -1; done
done
echo "done at ${SECONDS}s"
