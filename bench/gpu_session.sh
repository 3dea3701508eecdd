#!/usr/bin/env bash
# One call on a lent GPU machine: what can only be checked there, in the order that tells most
# if the lease runs out. Every stage has its own time limit; logs and JSON go to $OUT.
#
#   OUT=DIR [STAGES="cli tests bench"] bash bench/gpu_session.sh [BENCH_SECONDS] [WORKLOADS]
#
# 1. the device and the versions it runs (device.txt);
# 2. `fusionlang demo` and `fusionlang run --target cuda --check` on a light model (cli.log);
# 3. the GPU tests: tests/backend/test_gpu.py and the ONNX backend on CUDA (tests.log);
# 4. bench/gpu_runtime.py on WORKLOADS (default: every workload, the large blocks first),
#    torch.compile on the blocks only (gpu_runtime.json, rewritten after each workload).
#
# Python packages the machine lacks travel as wheels in .whl/ (see the device tool's notes).
set -u
out=${OUT:-/tmp/gpu_session}
mkdir -p "$out"
bench_seconds=${1:-240}
workloads=${2:-}
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || { echo "installing .whl/ failed"; exit 1; }
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

stages=${STAGES:-cli tests bench}
stage() {  # stage NAME SECONDS LOG COMMAND...: run it under its limit, say how it ended
    local name=$1 limit=$2 log=$3 start=$SECONDS rc
    shift 3
    case " $stages " in *" ${log%.log} "*) ;; *) return ;; esac
    timeout "$limit" "$@" >>"$out/$log" 2>&1
    rc=$?
    echo "== $name: exit $rc after $((SECONDS - start)) s (limit $limit)" | tee -a "$out/$log"
}

{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv
    python3 -c "import sys, numpy, onnx, onnxruntime, cupy, torch; print(sys.version.split()[0], 'numpy', numpy.__version__, 'onnx', onnx.__version__, 'ort', onnxruntime.__version__, 'cupy', cupy.__version__, 'torch', torch.__version__)"
    python3 -c "import fusionlang.backend as b; print('cuda_available', b.cuda_available(), 'nvrtc', b.nvrtc_available() or 'ok')"
} >"$out/device.txt" 2>&1
cat "$out/device.txt"

light=$(python3 -c "import onnx, pathlib; print(pathlib.Path(onnx.__file__).parent / 'backend/test/data/light/light_squeezenet.onnx')")
stage demo 45 cli.log python3 -m fusionlang demo
stage "run squeezenet" 60 cli.log python3 -m fusionlang run "$light" --random-inputs 0 --target cuda --check

stage tests 120 tests.log python3 -m pytest -p no:cacheprovider -q -rs tests/backend/test_gpu.py \
    tests/frontend/test_onnx_backend_api.py
tail -5 "$out/tests.log"

if [ -z "$workloads" ]; then
    workloads=$(python3 - <<'EOF'
import sys
sys.path.insert(0, "bench")
import gpu_runtime
names = list(gpu_runtime.workloads())
big = [n for n in names if n.endswith("16384x4096")]
print(",".join(big + [n for n in names if n.startswith("matmul")] + [n for n in names if n not in big and not n.startswith("matmul")]))
EOF
)
fi
stage bench "$bench_seconds" bench.log python3 bench/gpu_runtime.py --rounds 10 --torch-compile blocks \
    --only "$workloads" --out "$out/gpu_runtime.json"
tail -30 "$out/bench.log"
