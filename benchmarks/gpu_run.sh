#!/usr/bin/env bash
# One GPU-machine session's checks and benchmarks, logs under $OUT (see /work/.library/device).
set -u
source benchmarks/gpu_env.sh
timeout 240 python3 -m pytest packages/thunder-executors/tests/test_triton.py packages/thunder-executors/tests/test_nvfuser.py \
  packages/thunder-executors/tests/test_fusion_training.py -q -p no:xdist -p no:cacheprovider -m "slow or not slow" -rs \
  > "$OUT/fusion_tests.log" 2>&1
tail -15 "$OUT/fusion_tests.log"
timeout 150 python3 benchmarks/latency.py > "$OUT/latency.log" 2>&1; tail -12 "$OUT/latency.log"
timeout 300 python3 benchmarks/training.py --workloads mlp,gpt --gpt-size small --dtype bfloat16 --warmup 3 --steps 10 > "$OUT/training.log" 2>&1
for ex in nvfuser triton; do
  timeout 200 python3 benchmarks/training.py --workloads mlp,gpt --gpt-size small --dtype bfloat16 --warmup 3 --steps 10 \
    --skip-compile --executors $ex > "$OUT/training_$ex.log" 2>&1
done
for f in training training_nvfuser training_triton; do echo "== $f"; tail -8 "$OUT/$f.log"; done
