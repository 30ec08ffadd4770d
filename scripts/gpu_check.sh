#!/usr/bin/env bash
# One command on a fresh GPU machine: install slangjit with the CUDA extra, run the whole pytest suite
# with the CUDA device, the conformance suites (core + autodiff) on CUDA and on the CPU for comparison,
# the GPU benchmarks that exist, and print a summary table last.
#
#   scripts/gpu_check.sh                 # from the repository root (or anywhere)
#
# Environment:
#   SLANGJIT_CONFORMANCE  the conformance folder (holds harness.py and tests/); default: the first of
#                         ../shared/conformance, shared/conformance, .gpu/conformance that exists
#                         (.gpu/ is git-ignored: when the tree is shipped to a GPU machine by a tool that sends
#                         only tracked/unignored files, copy the suite there and ship .gpu explicitly)
#   GPU_CHECK_VENV        virtual environment to create/use (default: /tmp/slangjit-gpu-venv); it is made with
#                         --system-site-packages so a machine's preinstalled torch / cuda-bindings are reused
#   GPU_CHECK_JOBS        parallel conformance jobs (default: number of CPUs)
#   GPU_CHECK_SKIP_CPU=1  skip the CPU conformance comparison runs
#   GPU_CHECK_OUT         folder for logs and TSV reports (default: /tmp/slangjit-gpu-check)
#   GPU_CHECK_PYTEST_ARGS the tests to run (default: tests; pytest-xdist, when installed, runs them on GPU_CHECK_JOBS
#                         workers)
#   GPU_CHECK_PYTEST_TIMEOUT, GPU_CHECK_SUITE_TIMEOUT, GPU_CHECK_BENCH_TIMEOUT  seconds for each part
#   GPU_CHECK_SKIP_CONFORMANCE=1 / GPU_CHECK_SKIP_BENCH=1  skip those parts
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
OUTD="${GPU_CHECK_OUT:-/tmp/slangjit-gpu-check}"
mkdir -p "$OUTD"
VENV="${GPU_CHECK_VENV:-/tmp/slangjit-gpu-venv}"
JOBS="${GPU_CHECK_JOBS:-$(nproc 2>/dev/null || echo 4)}"
export PYTHONUNBUFFERED=1
declare -a ROWS=()
row() { ROWS+=("$(printf '%-34s %s' "$1" "$2")"); }

echo "== environment"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "(no nvidia-smi)"

echo "== install"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv --system-site-packages "$VENV" || { echo "venv failed"; exit 1; }
    # When python3 is itself a virtual environment (GPU images often ship torch, cuda-bindings and the NVIDIA
    # wheels in one), --system-site-packages does not see its packages: link them with a .pth file.
    parent_site="$(python3 -c 'import site, sys; print("\n".join(site.getsitepackages()) if sys.prefix != sys.base_prefix else "")')"
    if [ -n "$parent_site" ]; then
        echo "$parent_site" >"$("$VENV/bin/python" -c 'import site; print(site.getsitepackages()[0])')/_gpu_check_parent.pth"
    fi
fi
# shellcheck disable=SC1091
. "$VENV/bin/activate"
# Offline first (fast when the machine already has the dependencies), then from the package index.
if pip install -q --no-index --no-build-isolation -e '.[test,cuda]' >"$OUTD/pip.log" 2>&1; then
    row "install" "pip install -e .[test,cuda]: ok (preinstalled deps)"
elif pip install -q -e '.[test,cuda]' >>"$OUTD/pip.log" 2>&1; then
    row "install" "pip install -e .[test,cuda]: ok"
elif pip install -q --no-index --no-build-isolation --no-deps -e . >>"$OUTD/pip.log" 2>&1; then
    row "install" "pip install --no-deps -e . (some [cuda] deps missing or other versions)"
else
    tail -20 "$OUTD/pip.log"; row "install" "FAILED (see $OUTD/pip.log)"
fi
python - <<'PY' 2>&1 | tee "$OUTD/cuda_info.txt"
from slangjit.runtime import cuda, cuda_compiler
print("nvrtc", cuda_compiler.nvrtc_version(), "fp16 headers", cuda_compiler.cuda_include_dirs()[:1])
print("cuda available:", cuda.is_available())
import slangjit
d = slangjit.create_device()
print("automatic device:", d, d.info)
PY
row "CUDA device" "$(grep -o 'automatic device:.*' "$OUTD/cuda_info.txt" | head -1 | cut -c1-80)"

CONF="${SLANGJIT_CONFORMANCE:-}"
if [ -z "$CONF" ]; then
    for c in ../shared/conformance shared/conformance .gpu/conformance; do
        if [ -f "$c/harness.py" ]; then CONF="$c"; break; fi
    done
fi
# The tests that compile every conformance program with NVRTC find the suite through this variable.
[ -n "$CONF" ] && export SLANGJIT_CONFORMANCE="$(cd "$CONF" && pwd)"
echo "== pytest (the \"auto\" and \"cuda\" device tests run on the GPU)"
# shellcheck disable=SC2086
# pytest-xdist (when installed) spreads the suite over the machine's cores: the whole suite then fits
# well inside one device call.
XDIST=""
python -c "import xdist" 2>/dev/null && XDIST="-n $JOBS"
timeout "${GPU_CHECK_PYTEST_TIMEOUT:-1800}" python -m pytest -q -p no:cacheprovider $XDIST ${GPU_CHECK_PYTEST_ARGS:-tests} 2>&1 \
    | tee "$OUTD/pytest.log" | grep -vE '^[.sxXFE]+ *(\[ *[0-9]+%\])?$' | tail -60
pt="$(grep -E '[0-9]+ (passed|failed)' "$OUTD/pytest.log" | tail -1)"
row "pytest tests" "${pt:-no summary (timed out or crashed): $(grep -oE '^[.sFEx]+' "$OUTD/pytest.log" | tr -d '\n' | tr -cd 'F' | wc -c) F so far}"

if [ "${GPU_CHECK_SKIP_CONFORMANCE:-0}" = 1 ]; then
    row "conformance" "skipped (GPU_CHECK_SKIP_CONFORMANCE=1)"
elif [ -n "$CONF" ] && [ -f "$CONF/harness.py" ]; then
    for suite in core autodiff; do
        for dev in cuda cpu; do
            if [ "$dev" = cpu ] && [ "${GPU_CHECK_SKIP_CPU:-0}" = 1 ]; then continue; fi
            echo "== conformance $suite on $dev"
            timeout "${GPU_CHECK_SUITE_TIMEOUT:-1200}" python "$CONF/harness.py" suite "$CONF/tests/$suite" --backend project --device "$dev" --jobs "$JOBS" \
                -q --report "$OUTD/conf-$suite-$dev.tsv" >"$OUTD/conf-$suite-$dev.log" 2>&1
            grep -E '^summary' "$OUTD/conf-$suite-$dev.log" || tail -5 "$OUTD/conf-$suite-$dev.log"
            row "conformance $suite ($dev)" "$(grep -E '^summary' "$OUTD/conf-$suite-$dev.log" | sed 's/summary: //' | cut -c1-70)"
        done
        if [ -f "$OUTD/conf-$suite-cuda.tsv" ] && [ -f "$OUTD/conf-$suite-cpu.tsv" ]; then
            echo "-- $suite: programs passing on the CPU but not on CUDA:"
            join -t $'\t' <(awk -F'\t' 'NR>1{print $1"\t"$2}' "$OUTD/conf-$suite-cpu.tsv" | sort) \
                          <(awk -F'\t' 'NR>1{print $1"\t"$2}' "$OUTD/conf-$suite-cuda.tsv" | sort) \
                | awk -F'\t' '$2=="pass" && $3!="pass"{print "   " $1 " (" $3 ")"}'
            awk -F'\t' 'NR>1 && $2!="pass"{print "   cuda " $1 ": " $2 " " substr($8,1,200)}' "$OUTD/conf-$suite-cuda.tsv" | head -30
        fi
    done
else
    row "conformance" "skipped: harness not found (set SLANGJIT_CONFORMANCE)"
fi

echo "== GPU benchmarks"
nb=0
for b in benchmarks/gpu_*.py; do
    [ -f "$b" ] || continue
    [ "${GPU_CHECK_SKIP_BENCH:-0}" = 1 ] && continue
    nb=$((nb + 1))
    echo "-- $b"
    timeout "${GPU_CHECK_BENCH_TIMEOUT:-600}" python "$b" 2>&1 | tee "$OUTD/$(basename "$b" .py).log" | tail -24
    row "$(basename "$b")" "$(tail -1 "$OUTD/$(basename "$b" .py).log" | cut -c1-70)"
done
[ "$nb" = 0 ] && row "GPU benchmarks" "none yet (benchmarks/gpu_*.py)"

echo
echo "================ slangjit GPU check summary ================"
for r in "${ROWS[@]}"; do echo "$r"; done
echo "logs: $OUTD"
