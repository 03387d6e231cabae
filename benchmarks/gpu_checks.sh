#!/usr/bin/env bash
# The GPU-machine checks of a session that touched CUDA paths, logs under $OUT (see /work/.library/device):
# the CUDA tests, then benchmarks/inference.py.
#     bash benchmarks/gpu_checks.sh [inference models, default tinyllama]
set -u
source benchmarks/gpu_env.sh
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout 260 python3 -m pytest -q -p no:xdist -p no:cacheprovider -rs \
    tests/integration/test_cuda_graphs.py tests/integration/test_random.py \
    packages/thunder-executors/tests/test_random_fusion.py packages/thunder-executors/tests/test_nvfuser.py \
    packages/thunder-executors/tests/test_triton.py packages/thunder-executors/tests/test_fusion_training.py \
    > "$OUT/gpu_tests.log" 2>&1 || true
  tail -6 "$OUT/gpu_tests.log"
fi
timeout "${INFERENCE_TIMEOUT:-300}" python3 benchmarks/inference.py --models "${1:-tinyllama}" > "$OUT/inference.log" 2>&1
grep -v "^Row(" "$OUT/inference.log" | tail -12
