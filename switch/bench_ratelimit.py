"""One switch forwarding through a rate-limited port (``python -m switch.bench_ratelimit``, root).

The topology of :mod:`switch.bench_net` (source namespace -> ``tf-switch`` -> sink namespace)
with every egress queue of the switch drained at ``--rates`` Mbit/s (``--queue-rate``): the
``ipv6_router`` program forwards one UDP flow of ``--payload``-byte datagrams, offered by
``udpblast raw`` at ``--loads`` times the port's rate in packets/s (above 1: the queue stays
full and tail-drops). Per rate and load: offered and delivered packets/s, the delivered rate in
Mbit/s of frames (and against the configured rate), the switch's CPU time per delivered packet
(``/proc/<pid>/stat`` over the window) and its egress queue as ``show_queues`` reports it
mid-run (depth, largest depth, drops). Writes a CSV (``--out``).
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from switch.bench_net import (
    DST_IP,
    SINK_MAC,
    _rx_packets,
    build_blaster,
    ipv6_udp_frame,
    running,
    switch_argv,
    topology,
    wait_forwarding,
)

THRIFT_PORT = 9392
FIELDS = [
    "rate_mbps",
    "load",
    "payload_bytes",
    "frame_bytes",
    "offered_pps",
    "delivered_pps",
    "delivered_mbps",
    "of_configured",
    "switch_cpu_us_per_pkt",
    "switch_cpu_share",
    "queue_depth",
    "queue_max_depth",
    "queue_drops",
    "loadavg",
]


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _queue(python: str, port: int) -> tuple[int, int, int]:
    """(depth, largest depth, drops) of egress port 2 from ``show_queues``."""
    out = subprocess.run(
        [python, "-m", "switch.device.control", "--thrift-port", str(THRIFT_PORT), "show_queues"],
        capture_output=True,
        text=True,
        timeout=20,
    ).stdout
    for line in out.splitlines():
        cols = line.split()
        if cols and cols[0] == str(port):
            return int(cols[1]), int(cols[2]), int(cols[5])
    return 0, 0, 0


def measure(
    rate_mbps: float,
    loads: Sequence[float],
    payload: int,
    duration: float,
    extra: str,
    switch_cpu: int | None,
    gen_cpu: int | None,
) -> list[dict[str, object]]:
    frame = ipv6_udp_frame(DST_IP, dst_mac=SINK_MAC, payload=b"\x00" * payload)
    blaster = build_blaster(Path("build"))
    python = sys.executable
    cmd = (
        "{python} -m switch.daemon -i 1@{if1} -i 2@{if2} "
        f"--thrift-port {THRIFT_PORT} --queue-rate {rate_mbps:g}mbps {extra} "
        "p4/ipv6_router.p4 -- --grpc-server-addr 127.0.0.1:9391"
    )
    setup = [
        python,
        "-m",
        "switch.device.control",
        "--wait",
        "30",
        "--thrift-port",
        str(THRIFT_PORT),
        "table_add",
        "ipv6_lpm",
        "ipv6_forward",
        f"{DST_IP}/64",
        "=>",
        SINK_MAC,
        "2",
    ]
    rows: list[dict[str, object]] = []
    with topology() as top:
        argv = switch_argv(cmd, top, DST_IP)
        with running(argv, None, switch_cpu) as proc:
            subprocess.run(setup, check=True, timeout=60, capture_output=True)
            wait_forwarding(top, frame, proc, 60)
            for load in loads:
                pps = int(rate_mbps * 1e6 / (len(frame) * 8) * load)
                gen = [str(blaster), "raw", top.src_if, frame.hex(), str(pps)]
                gen.append(str(int(duration + 3)))
                if gen_cpu is not None:
                    gen = ["taskset", "-c", str(gen_cpu), *gen]
                g = subprocess.Popen(
                    ["ip", "netns", "exec", top.src_ns, *gen],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                try:
                    time.sleep(1.0)
                    t0 = time.monotonic()
                    c0 = _cpu_s(proc.pid)
                    off0 = _rx_packets(None, top.if1)
                    del0 = _rx_packets(top.sink_ns, top.sink_if)
                    time.sleep(duration / 2)
                    depth = _queue(python, 2)
                    time.sleep(duration / 2)
                    off1 = _rx_packets(None, top.if1)
                    del1 = _rx_packets(top.sink_ns, top.sink_if)
                    c1 = _cpu_s(proc.pid)
                    dt = time.monotonic() - t0
                finally:
                    g.terminate()
                    g.wait(10)
                delivered = (del1 - del0) / dt
                mbps = delivered * len(frame) * 8 / 1e6
                rows.append(
                    {
                        "rate_mbps": rate_mbps,
                        "load": load,
                        "payload_bytes": payload,
                        "frame_bytes": len(frame),
                        "offered_pps": round((off1 - off0) / dt),
                        "delivered_pps": round(delivered),
                        "delivered_mbps": round(mbps, 1),
                        "of_configured": round(mbps / rate_mbps, 3),
                        "switch_cpu_us_per_pkt": round((c1 - c0) / max(del1 - del0, 1) * 1e6, 2),
                        "switch_cpu_share": round((c1 - c0) / dt, 3),
                        "queue_depth": depth[0],
                        "queue_max_depth": depth[1],
                        "queue_drops": depth[2],
                        "loadavg": os.getloadavg()[0],
                    }
                )
                print(rows[-1], file=sys.stderr, flush=True)
                time.sleep(0.5)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m switch.bench_ratelimit", description=__doc__)
    ap.add_argument("--rates", default="50,100,200", help="egress rates, Mbit/s")
    ap.add_argument("--loads", default="0.9,1.5", help="offered load, times the rate")
    ap.add_argument("--payload", type=int, default=1400, help="UDP payload bytes")
    ap.add_argument("--duration", type=float, default=4.0)
    ap.add_argument("--switch-args", default="", help="more tf-switch arguments")
    ap.add_argument("--switch-cpu", type=int, default=None)
    ap.add_argument("--gen-cpu", type=int, default=None)
    ap.add_argument("--out", type=Path, default=Path("results/bench_ratelimit.csv"))
    a = ap.parse_args(argv)
    try:
        rates = [float(x) for x in a.rates.split(",")]
        loads = [float(x) for x in a.loads.split(",")]
    except ValueError:
        ap.error("--rates and --loads take comma-separated numbers")
    if any(r <= 0 for r in rates) or any(x <= 0 for x in loads) or not 0 <= a.payload <= 1400:
        ap.error("rates and loads must be positive, the payload 0..1400 bytes")
    rows: list[dict[str, object]] = []
    for r in rates:
        rows += measure(r, loads, a.payload, a.duration, a.switch_args, a.switch_cpu, a.gen_cpu)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    with a.out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
