"""How tests/data/nccl's logs were captured: one all_reduce through torch.distributed's NCCL on a lent one-GPU machine.

NCCL refuses two ranks on one GPU of one host ("Duplicate GPU detected"), so each rank names its own NCCL_HOSTID:
NCCL then treats them as two hosts and connects them over its network plugin (NET/Socket or NET/IB), the path a
two-Spark group takes. Run: `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET torchrun --nproc_per_node=2 capture.py`.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


def main() -> None:
    rank = int(os.environ["RANK"])
    if os.environ.get("CAPTURE_TWO_HOSTS") == "1":
        # Read by NCCL's getHostHash at its first init, which torch defers to the first collective.
        os.environ["NCCL_HOSTID"] = f"capture-host-{rank}"
    torch.cuda.set_device(0)
    dist.init_process_group("nccl")
    tensor = torch.ones(1 << 20, device="cuda") * (rank + 1)
    dist.all_reduce(tensor)
    torch.cuda.synchronize()
    print(f"rank {rank}: all_reduce sum {tensor[0].item()} (torch {torch.__version__})")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
