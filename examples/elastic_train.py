"""An elastic data-parallel training job for Cluster Ops' local executor (PyTorch, CPU, gloo).

    python examples/elastic_train.py --steps 600 [--global-batch 64] [--step-seconds 0.02]

It reads what the node agent sets (WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT,
CHECKPOINT_DIR, CLUSTER_OPS_REPORT_URL, CLUSTER_OPS_REPORT_TOKEN); without them it runs
alone. A small MLP learns a fixed random function from synthetic data, drawn from a seed
per step, so the data of a step does not depend on the number of workers: the global
batch stays the same and each rank trains on its 1/WORLD_SIZE share of it.

- Checkpoints (model, optimizer, step, loss history) go to CHECKPOINT_DIR every
  ``--checkpoint-every`` steps and when it is stopped, written by rank 0 to a temporary
  file and renamed, so a reader never sees half a checkpoint.
- On start it resumes from the checkpoint at whatever world size it now has.
- On SIGTERM every rank agrees to stop after the same step (the stop flag travels with the
  step's all-reduce), rank 0 saves, and it exits 143: stopped, not finished.
- Every ``--log-every`` steps rank 0 prints ``step=N loss=L world_size=W``; every
  ``--report-every`` steps it POSTs progress to CLUSTER_OPS_REPORT_URL (failures ignored).
- It exits 0 once ``--steps`` steps are done in total.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import time
import urllib.request
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

FEATURES = 16
STOPPED = 143  # 128 + SIGTERM, as a shell reports a process ended by it


def main() -> int:
    args = parse_args()
    stop = {"requested": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(requested=True))
    rank, world = init_distributed()
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    checkpoints = Path(os.environ.get("CHECKPOINT_DIR", "checkpoints"))
    step, losses = load_checkpoint(checkpoints, model, optimizer)
    ddp = DistributedDataParallel(model)
    print(f"rank={rank} world_size={world} start_step={step} resumed={step > 0} "
          f"local_batch={len(shard(range(args.global_batch), rank, world))} "
          f"devices={os.environ.get('CUDA_VISIBLE_DEVICES', '-')}", flush=True)
    reporter = Reporter(args.global_batch, world, step)
    while step < args.steps:
        loss, stopping = train_step(ddp, optimizer, args, step, rank, world, stop["requested"])
        step += 1
        losses.append([step, loss])
        if rank == 0 and step % args.log_every == 0:
            print(f"step={step} loss={loss:.5f} world_size={world}", flush=True)
        if stopping or step % args.checkpoint_every == 0 or step == args.steps:
            save_checkpoint(checkpoints, rank, model, optimizer, step, losses)
            dist.barrier()  # no rank leaves before the checkpoint is on disk
        if stopping:
            print(f"rank={rank} stopped at step={step}", flush=True)
            return STOPPED
        if rank == 0 and (step % args.report_every == 0 or step == args.steps):
            reporter.report(step)
        time.sleep(args.step_seconds)
    print(f"rank={rank} done step={step} loss={losses[-1][1]:.5f}", flush=True)
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Elastic DDP training on synthetic data (CPU, gloo).")
    parser.add_argument("--steps", type=int, default=600, help="total steps over all restarts")
    parser.add_argument("--global-batch", type=int, default=64, help="samples per step over all ranks")
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--checkpoint-every", type=int, default=50)
    parser.add_argument("--report-every", type=int, default=50)
    parser.add_argument("--step-seconds", type=float, default=0.0, help="pause after each step (demos)")
    return parser.parse_args()


def init_distributed() -> tuple[int, int]:
    """Join the job's process group (env://); alone when the agent set nothing."""
    if "WORLD_SIZE" not in os.environ:
        os.environ.update(WORLD_SIZE="1", RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=120))
    return dist.get_rank(), dist.get_world_size()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def shard(items: range, rank: int, world: int) -> range:
    """This rank's contiguous share; shares differ by at most one when the batch does not divide."""
    size, extra = divmod(len(items), world)
    start = rank * size + min(rank, extra)
    return items[start:start + size + (rank < extra)]


def batch(step: int, args: argparse.Namespace, rank: int, world: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's share of the step's global batch: the same global batch at any world size."""
    target = torch.Generator().manual_seed(args.seed)
    weights = torch.randn(FEATURES, 1, generator=target)
    data = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
    x = torch.randn(args.global_batch, FEATURES, generator=data)
    y = torch.tanh(x @ weights / 4) + 0.05 * torch.randn(args.global_batch, 1, generator=data)
    mine = shard(range(args.global_batch), rank, world)
    return x[mine.start:mine.stop], y[mine.start:mine.stop]


def train_step(
    ddp: DistributedDataParallel, optimizer: torch.optim.Optimizer, args: argparse.Namespace, step: int, rank: int,
    world: int, stop_requested: bool,
) -> tuple[float, bool]:
    """One step; returns the global batch's mean loss and whether any rank was asked to stop."""
    x, y = batch(step, args, rank, world)
    optimizer.zero_grad()
    squared = (ddp(x) - y).pow(2).sum()
    # DDP averages gradients over ranks: scaling by world / global batch makes that the
    # gradient of the global mean loss, even when shares differ in size.
    (squared * world / args.global_batch).backward()
    optimizer.step()
    shared = torch.tensor([squared.item(), float(stop_requested)])
    dist.all_reduce(shared)  # one all-reduce carries the loss and the stop flag
    return shared[0].item() / args.global_batch, shared[1].item() > 0


def load_checkpoint(folder: Path, model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[int, list]:
    path = folder / "checkpoint.pt"
    if not path.exists():
        return 0, []
    state = torch.load(path, map_location="cpu")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return state["step"], state["losses"]


def save_checkpoint(folder: Path, rank: int, model: nn.Module, optimizer: torch.optim.Optimizer, step: int,
                    losses: list) -> None:
    if rank != 0:
        return
    folder.mkdir(parents=True, exist_ok=True)
    temporary = folder / f".checkpoint.pt.{os.getpid()}.tmp"
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step, "losses": losses},
               temporary)
    os.replace(temporary, folder / "checkpoint.pt")


class Reporter:
    """POSTs progress (samples done) and throughput to Cluster Ops; a failed report is skipped."""

    def __init__(self, global_batch: int, world: int, step: int) -> None:
        self.url, self.token = os.environ.get("CLUSTER_OPS_REPORT_URL"), os.environ.get("CLUSTER_OPS_REPORT_TOKEN", "")
        self.global_batch, self.world = global_batch, world
        self.nodes = int(os.environ.get("NNODES", "1"))
        self.since, self.step = time.monotonic(), step

    def report(self, step: int) -> None:
        now = time.monotonic()
        throughput = (step - self.step) * self.global_batch / max(now - self.since, 1e-9)
        self.since, self.step = now, step
        if not self.url:
            return
        body = {"progress": step * self.global_batch, "throughput": throughput, "batch_size": self.global_batch,
                "gpus": self.world, "nodes": self.nodes}
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), method="POST", headers={
            "Content-Type": "application/json", "X-Job-Token": self.token})
        try:
            urllib.request.urlopen(request, timeout=2).close()
        except OSError as error:  # URLError, HTTPError and timeouts: training goes on
            print(f"progress report failed: {error}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    code = main()
    if dist.is_initialized():
        dist.destroy_process_group()
    sys.exit(code)
