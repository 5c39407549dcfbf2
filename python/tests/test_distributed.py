"""DistributedDataParallel over rnnjit.torch.LSTM: 2 processes on gloo over the loopback address
train on halves of a batch; their parameters must equal one process's on the whole batch."""

import os
import socket
import subprocess
import sys

import pytest

from conftest import torch_or_skip

torch = torch_or_skip()
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("this torch has no torch.distributed with gloo", allow_module_level=True)

import ddp_model  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_matches_a_single_process_on_the_whole_batch(tmp_path):
    out = tmp_path / "ddp.pt"
    port = str(free_port())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE] + sys.path))
    workers = [subprocess.Popen([sys.executable, os.path.join(HERE, "ddp_worker.py"), str(rank), "2", port, str(out)],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for rank in range(2)]
    logs = []
    for w in workers:
        try:
            logs.append(w.communicate(timeout=240)[0])
        except subprocess.TimeoutExpired:
            for v in workers:
                v.kill()
            pytest.fail("a DDP worker did not finish in 240 s")
    for w, log in zip(workers, logs):
        assert w.returncode == 0, f"worker failed:\n{log}"

    torch.manual_seed(1234)  # rank 0's seed: DDP broadcasts rank 0's initial parameters
    model = ddp_model.make_model()
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    x, target = ddp_model.make_data()
    ddp_model.train(model, x, target, ddp_model.STEPS)
    trained = torch.load(out)
    assert trained.keys() == model.state_dict().keys()
    for name, value in model.state_dict().items():
        torch.testing.assert_close(trained[name], value, rtol=1e-5, atol=1e-6, msg=name)
    assert all(not torch.allclose(initial[k], trained[k]) for k in initial), "training moved every parameter"
