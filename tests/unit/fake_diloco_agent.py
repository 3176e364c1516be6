"""A stand-in for :mod:`host.diloco_agent` in the driver's tests: it speaks the agent's protocol
and writes its files, trains nothing and imports nothing heavy (it starts in milliseconds).

``python tests/unit/fake_diloco_agent.py HOST OUT TEMPLATE [--die-at-round K] [--silent]``:
each ``run`` command gets a ``started`` event, per round a ``round`` event and a record line
(``TEMPLATE``: a JSON round record whose rank, host and round it fills in) and ``finished``;
``--die-at-round K`` exits with status 3 as its first job reaches round K (a crash),
``--silent`` says nothing after ``ready``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys


def emit(**ev: object) -> None:
    sys.stdout.write(json.dumps(ev) + "\n")
    sys.stdout.flush()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("host")
    ap.add_argument("out")
    ap.add_argument("template")
    ap.add_argument("--die-at-round", type=int, default=-1)
    ap.add_argument("--silent", action="store_true")
    a = ap.parse_args()
    template = json.loads(pathlib.Path(a.template).read_text())
    emit(event="ready", host=a.host)
    jobs = 0
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("cmd") == "quit":
            break
        if a.silent:
            continue
        run, rank, rounds = msg["run"], msg["rank"], msg["job"]["rounds"]
        host = int(a.host[1:]) - 1
        d = pathlib.Path(a.out) / run
        d.mkdir(parents=True, exist_ok=True)
        emit(event="started", run=run, rank=rank, host=a.host)
        with (d / f"{a.host}.jsonl").open("w") as f:
            for r in range(rounds):
                if jobs == 0 and r == a.die_at_round:
                    return 3
                rec = {**template, "kind": "round", "rank": rank, "host": host, "round": r}
                f.write(json.dumps(rec) + "\n")
                f.flush()
                emit(event="round", run=run, rank=rank, round=r, utilization=0.5)
            end = {"rank": rank, "host": host, "status": "finished", "last_round": rounds - 1}
            f.write(json.dumps({"kind": "outcome", **end, "error": ""}) + "\n")
        emit(event="finished", run=run, **{**end, "host": a.host}, rounds=rounds, error="")
        jobs += 1
    emit(event="done", host=a.host)
    return 0


if __name__ == "__main__":
    sys.exit(main())
