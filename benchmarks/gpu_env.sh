# Sourced by the GPU-machine scripts (gpu_run.sh, gpu_checks.sh): $OUT for logs, and the packages run
# from their src folders (the GPU machine has no hatchling), with nvFuser from the tarball that
# ../shared/nvfuser/build.sh writes to .nvf/ (carry it), as NVFUSER.md describes.
OUT=${OUT:-/tmp/thunder-gpu}
mkdir -p "$OUT"
SITE=$(mktemp -d)
if [ -f .nvf/nvfuser_torch211_site.tar.xz ]; then
  python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter='fully_trusted')" .nvf/nvfuser_torch211_site.tar.xz "$SITE"
fi
export PYTHONPATH=$SITE:$PWD/packages/thunder-core/src:$PWD/packages/thunder-interpreter/src:$PWD/packages/thunder-executors/src:$PWD/packages/thunder-dynamo/src:$PWD/src  # absolute: tests start subprocesses elsewhere
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
