# Sourced by a device recipe (e.g. benchmarks/results/session71-device/run*.sh) on the GPU machine, from the
# repository root: the interpreter's scripts on PATH (`ipexconvert`), the wheels the project needs there (`.whl/`,
# fetched by ../shared/tools/gpu-host-wheels.sh; pass carry [".whl"]) and an editable build, logged to
# $OUT/install.log (the recipe exits with its tail if the build fails), the GPU hidden for CPU work (KEEP_GPU=1
# keeps it).
set -u
export PATH="$(dirname "$(command -v python3)"):$PATH"
python3 -m pip install -q --no-index --no-deps .whl/*.whl >"$OUT/install.log" 2>&1
[ -n "${KEEP_GPU:-}" ] || export CUDA_VISIBLE_DEVICES=
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >>"$OUT/install.log" 2>&1 || { tail -40 "$OUT/install.log"; exit 1; }
echo "built at ${SECONDS}s"
