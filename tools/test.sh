#!/usr/bin/env bash
# Builds rnnjit (Release, in build/) and runs every test; extra arguments go to ctest.
#   tools/test.sh --sanitize          the same suite built with ASan + UBSan, in build-asan/
#   tools/test.sh --sanitize=thread   the multi-threaded tests built with TSan, in build-tsan/
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tools/setup.sh

# onnx_peers VENV: onnx and onnxruntime for test_onnxruntime.py (rnnjit's ONNX Runtime library),
# from PyPI, bounded; those tests skip without them. numpy<2 keeps Debian's numpy, which Debian's
# torch is built against.
onnx_peers() {
  if ! "$1/bin/python" -c 'import onnx, onnxruntime' 2>/dev/null; then
    timeout 300 "$1/bin/pip" install -q --timeout 20 --retries 2 onnx onnxruntime 'numpy<2' ||
      echo "test: could not install onnx and onnxruntime into $1: test_onnxruntime.py will skip" >&2
  fi
}
case "${1:-}" in
  --sanitize|--sanitize=address)
    shift
    # With the Python extension where its build tools install (its tests run below).
    python_flags=()
    if rnnjit_python_venv build/python-venv; then
      python_flags=(-DRNNJIT_PYTHON=ON "-DPython_EXECUTABLE=$PWD/build/python-venv/bin/python")
      onnx_peers build/python-venv
    fi
    rnnjit_build build-asan -DRNNJIT_SANITIZE=address "${python_flags[@]}"
    # Xbyak-generated code and OpenBLAS are not instrumented; leaks are reported at exit.
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    ctest --test-dir build-asan --output-on-failure -j"$(nproc)" "$@"
    if ((${#python_flags[@]} > 0 && $# == 0)); then
      # The Python tests through the instrumented module. The interpreter is not built with ASan:
      # its runtime is preloaded, with libstdc++ (else ASan cannot intercept C++ throws), and the
      # interpreter's own allocations left at exit are not leaks of ours.
      LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)" \
        ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 PYTHONPATH=build-asan/python \
        build/python-venv/bin/python -m pytest -q -p no:cacheprovider python/tests
    fi
    exit 0
    ;;
  --sanitize=thread)
    shift
    rnnjit_build build-tsan -DRNNJIT_SANITIZE=thread
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
    # (test_gemm's AVX2 half left out: its threading is the AVX-512 half's, the executor's.)
    GTEST_FILTER='-*/avx2_*' ctest --test-dir build-tsan --output-on-failure -j"$(nproc)" \
      -R 'test_(api|stress|c_api|gemm|thread_team)$' "$@"
    # Of the feature tests, the AVX-512 ones whose steps are split across two threads, and the
    # LSTM ones split by batch rows; not the sigmoid and leaky ReLU cases, whose threading is the
    # other vanilla RNNs' (their activation is all that differs). AVX2 plans (their packing and
    # kernels under the same executor): the combined features and the LSTM's variable lengths
    # on two threads.
    exec build-tsan/bin/test_features --gtest_brief=1 \
      --gtest_filter='*avx512_t2:*lstm*avx512_t2_rows:*all_*avx2_t2:*lengths_lstm*avx2_t2:Dropout.*:VariableLengths.*:SplitDirections.*-*rnn_sigmoid*:*leaky_relu*'
    ;;
esac
rnnjit_build build
# onnx and onnxruntime, for test_c_api's comparisons of the ONNX operators, in a virtual
# environment under build/ (PyPI): best effort, those tests skip without them. An interpreter
# already named by RNNJIT_TEST_PYTHON (e.g. one with torch as well) is kept.
if [[ -z ${RNNJIT_TEST_PYTHON:-} ]]; then
  venv=build/python-peers
  if ! "$venv/bin/python" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
    # Bounded: without PyPI, pip's retries must not eat into CI's time.
    python3 -m venv "$venv" && timeout 300 "$venv/bin/pip" install -q --timeout 20 --retries 2 onnx onnxruntime numpy ||
      echo "test: could not install onnx and onnxruntime: their comparisons will skip" >&2
  fi
  if "$venv/bin/python" -c 'import onnx, onnxruntime, numpy' 2>/dev/null; then
    export RNNJIT_TEST_PYTHON=$PWD/$venv/bin/python
  fi
fi
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"

# The Python package as a user gets it: `pip install .`, then its tests, against the two torch
# versions users have: Debian's python3-torch (1.13; build/python-venv sees it) and PyPI's newest
# 2.x (torch.compile, torch.export, both ONNX exporters, oneDNN's LSTM as the peer). The whole
# suite runs on each (about 20 s on Debian's torch, 1-2 min on PyPI's on 2 cores); the torch
# tests skip where torch is missing. Not with ctest arguments (a selection of C++ tests).
if (($# == 0)); then
  venv=build/python-venv
  if rnnjit_python_venv "$venv"; then
    onnx_peers "$venv"
    "$venv/bin/pip" install -q --no-build-isolation --no-deps --config-settings=build-dir=build/python-wheel .
    "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests
  else
    echo "test: the Python package's tests did not run: its build tools could not be installed" >&2
  fi
  # PyPI's torch is a CUDA build of about 3 GB: installed once into a virtual environment outside
  # the clone that later runs (and other clones) reuse, bounded in time; without it, say so and go on.
  torch_venv=${RNNJIT_TORCH_VENV:-$HOME/.cache/rnnjit/torch-venv}
  torch_packages=(torch onnx onnxruntime onnxscript numpy pytest 'nanobind>=2.4' 'scikit-build-core>=0.10')
  if ! "$torch_venv/bin/python" -c 'import torch, onnx, onnxruntime, onnxscript, numpy, pytest, nanobind, scikit_build_core' 2>/dev/null; then
    echo "test: installing PyPI's torch into $torch_venv (once; up to ${RNNJIT_TORCH_INSTALL_TIMEOUT:-1200} s)" >&2
    mkdir -p "$(dirname "$torch_venv")"
    { python3 -m venv "$torch_venv" &&
        timeout "${RNNJIT_TORCH_INSTALL_TIMEOUT:-1200}" "$torch_venv/bin/pip" install -q --timeout 60 --retries 2 \
          "${torch_packages[@]}"; } ||
      echo "test: could not install PyPI's torch: the tests on PyTorch 2.x did not run" >&2
  fi
  # rnnjit itself goes into a virtual environment of this clone that sees the shared one's
  # packages (a .pth file): clones never install into the shared environment.
  pypi_venv=build/python-venv-pypi
  if "$torch_venv/bin/python" -c 'import torch, pytest, nanobind, scikit_build_core' 2>/dev/null; then
    if [[ ! -x $pypi_venv/bin/python ]]; then
      "$torch_venv/bin/python" -m venv "$pypi_venv"
    fi
    purelib() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
    purelib "$torch_venv/bin/python" >"$(purelib "$pypi_venv/bin/python")/rnnjit-torch-venv.pth"
    "$pypi_venv/bin/pip" install -q --no-build-isolation --no-deps --config-settings=build-dir=build/python-wheel-pypi .
    "$pypi_venv/bin/python" -m pytest -q -p no:cacheprovider python/tests
  fi
fi
