#!/usr/bin/env bash
# A second build of the benchmark against oneDNN 3.x, beside build/ (Debian's oneDNN 2.6.3):
# installs PyPI's onednn-devel-cpu-gomp (oneDNN 3.2 with the OpenMP runtime: headers, CMake
# config and libdnnl.so.3) into a virtual environment under build/, configures BUILD_DIR with
# -DRNNJIT_ONEDNN_ROOT pointing at it and builds what the peer needs there: rnn-jit and the
# oneDNN tests (ctest --test-dir BUILD_DIR -R onednn, and BUILD_DIR/bin/test_cli_features
# --gtest_filter='*OneDnn*', the CLI's). Optional, never part of tools/test.sh: the
# peer is a benchmark's, and PyPI may be out of reach. bench/ds2_suite.sh times both peers when
# both builds are there. Why 3.2 and not PyPI's newest (3.13, a SYCL build): docs/benchmarks.md.
#   tools/onednn3.sh [BUILD_DIR]     (default build-onednn3)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build-onednn3}
venv=build/onednn3-venv
package=onednn-devel-cpu-gomp==2023.2.0  # PyPI's version of oneDNN 3.2.0

if [[ ! -f $venv/lib/cmake/dnnl/dnnl-config.cmake ]]; then
  mkdir -p build
  python3 -m venv "$venv"
  timeout 600 "$venv/bin/pip" install -q --timeout 30 --retries 2 "$package" ||
    { echo "onednn3: could not install $package from PyPI" >&2; exit 1; }
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "-DRNNJIT_ONEDNN_ROOT=$PWD/$venv"
jobs=$(nproc)
((jobs > 2)) && jobs=2  # a shared 2-core machine
cmake --build "$build" -j"$jobs" --target rnn-jit test_onednn_peer test_onednn_stacks test_cli_features
"$build/bin/rnn-jit" bench --cell lstm --input-size 8 --hidden-size 8 --seq 2 --batch 1 --reps 1 --warmup 0 \
  --compare onednn | grep -m1 'onednn:'
