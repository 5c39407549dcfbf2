#!/usr/bin/env bash
# Builds rnnjit (Release, in build/) and runs the demo: rnn-jit demo [flags...].
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tools/setup.sh
rnnjit_build build
exec build/bin/rnn-jit demo "$@"
