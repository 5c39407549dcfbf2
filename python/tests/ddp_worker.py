"""One process of test_distributed.py: trains the shared small model under
DistributedDataParallel (gloo, loopback) on its half of the batch and saves the parameters.

    python ddp_worker.py RANK WORLD_SIZE PORT OUT_FILE
"""

import os
import sys

import torch
import torch.distributed as dist

from ddp_model import BATCH, STEPS, make_model, make_data, train


def main():
    rank, world, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    torch.manual_seed(1234 + rank)  # different on each rank: DDP's broadcast must make them equal
    model = torch.nn.parallel.DistributedDataParallel(make_model())
    x, target = make_data()
    share = BATCH // world
    rows = slice(rank * share, (rank + 1) * share)
    train(model, x[:, rows], target[:, rows], STEPS)
    if rank == 0:
        torch.save({k: v.detach().clone() for k, v in model.module.state_dict().items()}, out)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
