"""Rank programs for the ``tailfabric`` backend's tests, run as separate processes.

``python tests/unit/torchdist_ranks.py SCENARIO RANK WORLD DIR`` runs one rank of a scenario
and writes what it saw to ``DIR/rank<RANK>.json`` (``ok``, ``failures``, ``checked`` and
scenario facts); :func:`run_ranks` starts the ranks, waits with a deadline (killing every
rank that outlives it) and returns the ranks' reports and exit codes.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[2]


@dataclass
class Rank:
    rank: int
    code: int | None
    report: dict[str, Any]
    stderr: str


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ranks(
    scenario: str,
    world: int,
    out: pathlib.Path,
    *,
    start: list[int] | None = None,
    timeout_s: float = 60.0,
    env: dict[str, str] | None = None,
) -> list[Rank]:
    """Run ranks ``start`` (default all) of ``scenario``; kill any still running at
    ``timeout_s``."""
    port = str(free_port())
    procs = {}
    for r in start if start is not None else range(world):
        e = dict(os.environ, PYTHONPATH=str(ROOT), MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        e["TF_TEST_DIR"] = str(out)
        e.update(env or {})
        procs[r] = subprocess.Popen(
            [sys.executable, __file__, scenario, str(r), str(world), str(out)],
            cwd=ROOT,
            env=e,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    deadline = time.monotonic() + timeout_s
    results = []
    for r, p in procs.items():
        try:
            _, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs.values():
                q.kill()
            _, err = p.communicate()
        path = out / f"rank{r}.json"
        report = json.loads(path.read_text()) if path.exists() else {}
        results.append(Rank(r, p.returncode, report, err[-3000:]))
    return results


# -- inside a rank -------------------------------------------------------------------------


class Checker:
    def __init__(self) -> None:
        self.failures: list[str] = []
        self.checked = 0

    def close(self, what: str, got: Any, want: Any) -> None:
        import torch

        self.checked += 1
        try:
            if got.dtype in (torch.float16, torch.bfloat16):
                torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2)
            else:
                torch.testing.assert_close(got, want)
        except AssertionError as e:
            self.failures.append(f"{what}: {str(e)[:300]}")


def _inputs(dtype: Any, numel: int, rank: int) -> Any:
    import torch

    g = torch.Generator().manual_seed(1000 + rank)
    if dtype.is_floating_point:
        return (torch.rand(numel, generator=g) * 4 - 2).to(dtype)
    if dtype == torch.uint8:
        return torch.randint(0, 60, (numel,), generator=g).to(dtype)
    return torch.randint(-30, 30, (numel,), generator=g).to(dtype)


def collectives(rank: int, world: int, report: dict[str, Any]) -> None:
    """Every collective on a ``tailfabric`` group against gloo's (or a local) result."""
    import torch
    import torch.distributed as dist

    import host.torchdist  # noqa: F401

    dist.init_process_group("gloo", rank=rank, world_size=world, init_method="env://")
    tf = dist.new_group(backend="tailfabric", timeout=timedelta(seconds=30))
    check = Checker()
    ops = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "min": dist.ReduceOp.MIN}
    ops["max"] = dist.ReduceOp.MAX
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
    dtypes += [torch.int32, torch.int64, torch.uint8, torch.int8]
    for dtype in dtypes:
        for numel in (7, 100_003):  # one exchange; the ring (>= 256 KiB for 4-byte types)
            if numel > 7 and dtype.itemsize < 4:
                numel = 300_001
            every = [_inputs(dtype, numel, r) for r in range(world)]
            for name, op in ops.items():
                if name == "avg" and not dtype.is_floating_point:
                    continue
                mine = every[rank].clone()
                dist.all_reduce(mine, op=op, group=tf)
                if name == "avg":
                    want = torch.stack([t.double() for t in every]).mean(0).to(dtype)
                else:
                    want = every[rank].clone()
                    dist.all_reduce(want, op=op)  # gloo
                check.close(f"allreduce {name} {dtype} {numel}", mine, want)
    # async work, several in flight
    ts = [torch.full((1000,), float(rank + i)) for i in range(3)]
    works = [dist.all_reduce(t, group=tf, async_op=True) for t in ts]
    for w in works:
        w.wait()
    for i, t in enumerate(ts):
        check.close(
            f"async allreduce {i}", t, torch.full((1000,), float(sum(range(world)) + world * i))
        )
    # broadcast: small and in pieces (> 4 MiB)
    for numel in (5, 1_300_000):
        x = _inputs(torch.float32, numel, rank)
        want = _inputs(torch.float32, numel, 2)
        dist.broadcast(x, src=2, group=tf)
        check.close(f"broadcast {numel}", x, want)
    # all_gather (list) and into one tensor, bfloat16 and int64
    for dtype in (torch.bfloat16, torch.int64):
        mine = _inputs(dtype, 33, rank)
        outs = [torch.zeros(33, dtype=dtype) for _ in range(world)]
        dist.all_gather(outs, mine, group=tf)
        for r in range(world):
            check.close(f"all_gather {dtype} from {r}", outs[r], _inputs(dtype, 33, r))
        flat = torch.zeros(world * 33, dtype=dtype)
        dist.all_gather_into_tensor(flat, mine, group=tf)
        check.close(
            f"all_gather_into_tensor {dtype}",
            flat,
            torch.cat([_inputs(dtype, 33, r) for r in range(world)]),
        )
    # reduce_scatter (list) and from one tensor, against gloo
    ins = [_inputs(torch.float32, 10, rank * 10 + j) for j in range(world)]
    out, want = torch.zeros(10), torch.zeros(10)
    dist.reduce_scatter(out, ins, group=tf)
    every = [sum(_inputs(torch.float32, 10, r * 10 + rank) for r in range(world))]
    check.close("reduce_scatter", out, every[0])
    big = _inputs(torch.float64, 8 * world, rank)
    out64 = torch.zeros(8, dtype=torch.float64)
    dist.reduce_scatter_tensor(out64, big, op=dist.ReduceOp.MAX, group=tf)
    want64 = torch.stack([_inputs(torch.float64, 8 * world, r) for r in range(world)]).amax(0)
    check.close("reduce_scatter_tensor max", out64, want64[rank * 8 : (rank + 1) * 8])
    # reduce, gather, scatter to / from root 1
    x = _inputs(torch.int32, 9, rank)
    dist.reduce(x, dst=1, op=dist.ReduceOp.SUM, group=tf)
    if rank == 1:
        check.close("reduce", x, sum(_inputs(torch.int32, 9, r) for r in range(world)))
    g = [torch.zeros(4) for _ in range(world)] if rank == 1 else None
    dist.gather(_inputs(torch.float32, 4, rank), g, dst=1, group=tf)
    if rank == 1 and g is not None:
        for r in range(world):
            check.close(f"gather from {r}", g[r], _inputs(torch.float32, 4, r))
    s = torch.zeros(6)
    dist.scatter(
        s,
        [_inputs(torch.float32, 6, 50 + r) for r in range(world)] if rank == 1 else None,
        src=1,
        group=tf,
    )
    check.close("scatter", s, _inputs(torch.float32, 6, 50 + rank))
    # barrier and point to point around the ring (receives posted before sends)
    dist.barrier(group=tf)
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    got = torch.zeros(5, dtype=torch.float16)
    r_work = dist.irecv(got, src=prv, group=tf, tag=3)
    s_work = dist.isend(_inputs(torch.float16, 5, rank), dst=nxt, group=tf, tag=3)
    r_work.wait()
    s_work.wait()
    check.close("send/recv", got, _inputs(torch.float16, 5, prv))
    # a non-contiguous tensor
    m = torch.arange(12, dtype=torch.float32).reshape(3, 4).t() * (rank + 1)
    dist.all_reduce(m, group=tf)
    check.close(
        "non-contiguous",
        m,
        torch.arange(12, dtype=torch.float32).reshape(3, 4).t() * sum(range(1, world + 1)),
    )
    report.update(failures=check.failures, checked=check.checked, ok=not check.failures)
    dist.destroy_process_group()


def _expect_error(fn: Callable[[], object], *words: str) -> tuple[bool, str, float]:
    """(a DistError carrying one of ``words`` was raised, its message, seconds taken)"""
    import torch.distributed as dist

    t0 = time.monotonic()
    try:
        fn()
    except dist.DistError as e:
        return any(w in str(e) for w in words), str(e), time.monotonic() - t0
    return False, "no error", time.monotonic() - t0


def _tf_init(rank: int, world: int, timeout_s: float) -> None:
    import torch.distributed as dist

    import host.torchdist  # noqa: F401

    dist.init_process_group(
        "tailfabric",
        rank=rank,
        world_size=world,
        init_method="env://",
        timeout=timedelta(seconds=timeout_s),
    )


def failures(rank: int, world: int, report: dict[str, Any]) -> None:
    """Bad arguments raise at once and leave the group usable; mismatched sizes (ranks 0
    and 1, in a subgroup) fail both ranks and break that group; then the last rank dies
    (SIGKILL) and the survivors' next collective fails, naming it."""
    import torch
    import torch.distributed as dist

    _tf_init(rank, world, 30)
    checks = {
        "unknown op": _expect_error(
            lambda: dist.all_reduce(torch.ones(3), op=dist._make_nccl_premul_sum(2.0)),
            "not supported",
        ),
        "avg of ints": _expect_error(
            lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32), op=dist.ReduceOp.AVG),
            "AVG needs a floating-point",
        ),
        "meta tensor": _expect_error(
            lambda: dist.all_reduce(torch.ones(3, device="meta")), "only dense CPU tensors"
        ),
    }
    t = torch.ones(4)
    dist.all_reduce(t)  # still usable
    report["usable_after_bad_args"] = bool((t == world).all())
    pair = dist.new_group([0, 1])
    if rank < 2:
        mismatch = _expect_error(
            lambda: dist.all_reduce(torch.ones(4 + rank), group=pair), "mismatched"
        )
        checks["mismatched sizes"] = mismatch
        report["mismatch_s"] = mismatch[2]
        checks["broken after"] = _expect_error(
            lambda: dist.all_reduce(torch.ones(4), group=pair), "broken"
        )
    dist.all_reduce(t)  # the default group is not broken by the pair's failure
    report["usable_after_mismatch"] = bool((t == world * world).all())
    if rank == world - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    killed = _expect_error(lambda: dist.all_reduce(torch.ones(1000)), f"rank {world - 1}")
    checks["killed rank"] = killed
    report["killed_message"], report["killed_s"] = killed[1], killed[2]
    report["checks"] = {k: [ok, msg] for k, (ok, msg, _) in checks.items()}
    report["ok"] = (
        all(ok for ok, _, _ in checks.values())
        and report["usable_after_bad_args"]
        and report["usable_after_mismatch"]
    )
    dist.destroy_process_group()


def absent(rank: int, world: int, report: dict[str, Any]) -> None:
    """The other ranks never join (a file store, so the backend's own rendezvous waits):
    init fails within the timeout, naming them."""
    import torch.distributed as dist

    import host.torchdist  # noqa: F401

    store = pathlib.Path(os.environ["TF_TEST_DIR"], "store")

    def init() -> None:
        dist.init_process_group(
            "tailfabric",
            rank=rank,
            world_size=world,
            init_method=f"file://{store}",
            timeout=timedelta(seconds=3),
        )

    missing = [r for r in range(world) if r != rank]
    ok, msg, took = _expect_error(init, f"ranks {missing} did not join within 3 s")
    report.update(ok=ok, message=msg, took_s=took)


def ddp_hook(rank: int, world: int, report: dict[str, Any]) -> None:
    """DDP with the DBLP hook: gradients equal the plain all-reduce average (no loss on
    loopback), and the state records each round's P and delivered fraction."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from host.torchdist.hook import DBLPState, dblp_hook

    t_start = time.monotonic()
    _tf_init(rank, world, 30)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 3))
    ref = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 3))
    ref.load_state_dict(model.state_dict())
    ddp = DDP(model)
    state = DBLPState(rounds_per_epoch=2)
    ddp.register_comm_hook(state, dblp_hook)
    check = Checker()
    for step in range(4):
        g = torch.Generator().manual_seed(step * 10 + rank)
        x, y = torch.randn(16, 20, generator=g), torch.randint(0, 3, (16,), generator=g)
        ddp.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        ref.zero_grad()
        torch.nn.functional.cross_entropy(ref(x), y).backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            assert q.grad is not None and p.grad is not None
            dist.all_reduce(q.grad, op=dist.ReduceOp.AVG)
            if state.rounds and state.rounds[-1].delivered_fraction == 1.0:
                check.close(f"step {step} grad", p.grad, q.grad)
    report.update(
        rounds=[[r.round, r.bound, r.delivered_fraction] for r in state.rounds],
        latency_s=[r.latency_s for r in state.rounds],
        took_s=time.monotonic() - t_start,
        failures=check.failures,
        checked=check.checked,
        ok=not check.failures,
    )
    state.close()
    dist.destroy_process_group()


SCENARIOS: dict[str, Callable[[int, int, dict[str, Any]], None]] = {
    "collectives": collectives,
    "failures": failures,
    "absent": absent,
    "ddp_hook": ddp_hook,
}


def main() -> None:
    scenario, rank, world, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    report: dict[str, Any] = {"ok": False}
    try:
        SCENARIOS[scenario](rank, world, report)
    except BaseException:
        report["error"] = traceback.format_exc()[-2000:]
    pathlib.Path(out, f"rank{rank}.json").write_text(json.dumps(report))
    sys.exit(0 if report.get("ok") else 1)


if __name__ == "__main__":
    main()
