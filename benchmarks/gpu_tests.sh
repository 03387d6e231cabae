#!/usr/bin/env bash
# The CUDA test set of a session that touched GPU paths, run on the GPU machine (see /work/.library/device):
#     bash benchmarks/gpu_tests.sh            # about 200-270 s on an H100 with 4 workers
# Each test's outcome is written to $OUT/gpu_tests.log as it finishes (-rA would wait for the end): a
# timeout still leaves the names of the failures. The summary of failures is printed last.
set -u
source benchmarks/gpu_env.sh > /dev/null
tests=(
  tests/integration/{test_hf_training_gpu,test_backward_inside_jit,test_backward_memory,test_cuda_graphs,test_cuda_graph_pools}.py
  tests/integration/{test_hf_generation_gpu,test_decode_attention,test_cse,test_returned_values_of_updates}.py
  tests/integration/{test_reinplace,test_symbolic_shapes,test_gradients_dropped_before_the_step}.py
  tests/integration/{test_mutable_c_containers,test_requires_grad_parity,test_aliasing_of_returned_views}.py
  tests/integration/{test_layout_dependent_views,test_writes_through_eager_aliases,test_region_moves,test_rms_norm_symbol}.py
  packages/thunder-executors/tests/{test_fusion_training,test_torch_kernels,test_torchex_direct}.py
  packages/thunder-executors/tests/{test_gemv,test_gemv_rms_norm,test_gated_gemv,test_decode_attention_kernel}.py
  packages/thunder-executors/tests/{test_nvfuser,test_nvfuser_regions,test_nvfuser_writes}.py
  packages/thunder-core/tests/{test_devices_in_elementwise,test_layouts}.py
)
timeout "${TESTS_TIMEOUT:-400}" python3 -m pytest -v -n "${WORKERS:-4}" -p no:cacheprovider -m "slow or not slow" \
  -rfs "${tests[@]}" > "$OUT/gpu_tests.log" 2>&1
status=$?
echo "pytest exit status $status"
grep -E " (FAILED|ERROR) " "$OUT/gpu_tests.log" | sed 's/^\[gw[0-9]*\] \[ *[0-9]*%\] //' | sort -u | head -20
grep -E "^(=+ .*(passed|failed).* =+)$" "$OUT/gpu_tests.log" | tail -1
exit $status
