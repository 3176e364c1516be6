"""Plain PyTorch DDP training on scikit-learn's digits, on any torch.distributed backend.

Launch it like any DDP script (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` in
the environment), with ``torchrun`` or ``tf-run``::

    tf-run --local 4 -- python examples/ddp_digits.py --backend tailfabric
    tf-run --hosts h1,h2,h3,h4 -- python examples/ddp_digits.py --backend tailfabric --hook dblp
    tf-run --hosts h1,h2,h3,h4 -- python examples/ddp_digits.py --backend gloo

Of tailfabric it uses only the backend's name (``import host.torchdist`` registers it) and,
with ``--hook dblp``, the DBLP communication hook. Each epoch rank 0 prints the mean training
loss and the test accuracy; every rank ends with one JSON line (its accuracy, time, and the
hook's per-round P and delivered fraction).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="tailfabric", help="torch.distributed backend")
    p.add_argument("--hook", choices=("none", "dblp"), default="none")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout-s", type=float, default=120.0)
    args = p.parse_args(argv)
    if args.epochs < 1 or args.batch < 1 or not args.lr > 0 or not args.timeout_s > 0:
        p.error("--epochs, --batch, --lr and --timeout-s must be positive")
    return args


def load_digits(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x_train, y_train, x_test, y_test): 80/20 split with a fixed seed, features in [0, 1]."""
    from sklearn.datasets import load_digits as sk_digits

    d = sk_digits()
    x = torch.tensor(d.data / 16.0, dtype=torch.float32)
    y = torch.tensor(d.target, dtype=torch.int64)
    order = torch.tensor(np.random.default_rng(seed).permutation(len(y)))
    n_test = len(y) // 5
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        if name not in os.environ:
            print(f"ddp_digits: {name} is not set: launch with tf-run or torchrun", file=sys.stderr)
            return 2
    if args.backend == "tailfabric" or args.hook == "dblp":
        import host.torchdist  # noqa: F401  (registers the backend)
    torch.set_num_threads(1)
    dist.init_process_group(
        args.backend, init_method="env://", timeout=timedelta(seconds=args.timeout_s)
    )
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    x_tr, y_tr, x_te, y_te = load_digits(args.seed)
    x_tr, y_tr = x_tr[rank::world], y_tr[rank::world]  # this rank's shard
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    ddp = DDP(model)
    steps = len(x_tr) // args.batch
    state = None
    if args.hook == "dblp":
        from host.torchdist.hook import DBLPState, dblp_hook

        state = DBLPState(rounds_per_epoch=steps)
        ddp.register_comm_hook(state, dblp_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    gen = torch.Generator().manual_seed(args.seed + rank)
    t0 = time.monotonic()
    acc = 0.0
    for epoch in range(args.epochs):
        order = torch.randperm(len(x_tr), generator=gen)
        total = 0.0
        for s in range(steps):
            idx = order[s * args.batch : (s + 1) * args.batch]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(ddp(x_tr[idx]), y_tr[idx])
            loss.backward()
            opt.step()
            total += loss.item()
        with torch.no_grad():
            acc = (model(x_te).argmax(1) == y_te).float().mean().item()
        if rank == 0:
            print(
                f"epoch {epoch + 1}: loss {total / steps:.4f} test accuracy {acc:.4f}", flush=True
            )
    took = time.monotonic() - t0
    out = {"rank": rank, "world": world, "backend": args.backend, "hook": args.hook}
    out.update(accuracy=acc, train_s=round(took, 3), steps=steps * args.epochs)
    if state is not None:
        out["dblp_p"] = [r.bound for r in state.rounds]
        out["dblp_delivered"] = [round(r.delivered_fraction, 4) for r in state.rounds]
        state.close()
    print(json.dumps(out), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
