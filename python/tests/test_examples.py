"""The README's Python example (examples/torch_lstm.py) runs and trains."""

import os
import re
import subprocess
import sys

from conftest import torch_or_skip

torch_or_skip()
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_torch_lstm_example_runs():
    run = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "torch_lstm.py")], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    m = re.fullmatch(r"loss (\d+\.\d+), kernels compiled (\d+)\n", run.stdout)
    assert m, run.stdout
    assert float(m.group(1)) > 0 and int(m.group(2)) >= 1
