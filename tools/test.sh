#!/usr/bin/env bash
# Builds rnnjit (Release, in build/) and runs every test; extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tools/setup.sh
exec ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
