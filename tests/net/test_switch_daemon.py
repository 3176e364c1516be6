"""tf-switch as a process on real veths, driven by the real p4runtime-shell client.

Two hosts in their own network namespaces hang off switch ports 1 and 2. The switch starts with
``--no-p4``; p4runtime-shell pushes the IPv6 router pipeline and a route; a frame sent from h1
arrives at h2 rewritten by the program; pcap files record both directions; the runtime CLI
answers; SIGTERM stops the switch cleanly.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import grpc
import pytest
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.utils import rdpcap

from tests.netkit import NET_MARKS, NetKit, call_in_netns

pytestmark = NET_MARKS

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "p4" / "ipv6_router.p4"
H2_ADDR = "2001:db8:2::2"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if proc.poll() is not None:
            raise AssertionError(f"tf-switch exited early: {proc.stderr.read().decode()}")  # type: ignore[union-attr]
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return time.monotonic() - start
        except OSError:
            time.sleep(0.01)
    raise AssertionError(f"tf-switch did not listen on {port} within {timeout} s")


SHELL_SCRIPT = textwrap.dedent("""
    import sys
    import p4runtime_sh.shell as sh
    grpc, p4info, config, dst = sys.argv[1:5]
    sh.setup(device_id=1, grpc_addr=grpc, election_id=(0, 1),
             config=sh.FwdPipeConfig(p4info, config))
    te = sh.TableEntry("MyIngress.ipv6_lpm")(action="MyIngress.ipv6_forward")
    te.match["hdr.ipv6.dst_addr"] = dst + "/64"
    te.action["dst_mac"] = "02:00:00:00:00:22"
    te.action["port"] = "2"
    te.insert()
    n = sum(1 for _ in sh.TableEntry("MyIngress.ipv6_lpm").read())
    print("entries", n)
    sh.teardown()
""")


def raw_socket(ifname: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.bind((ifname, 0))
    s.settimeout(3.0)
    return s


def test_tf_switch_forwards_with_a_pipeline_pushed_over_p4runtime(
    netkit: NetKit, tmp_path: Path
) -> None:
    h1, h2 = netkit.netns("h1"), netkit.netns("h2")
    p1 = netkit.veth("s1p1", "h1e", ns_b=h1, switch_side=True, mac_b="02:00:00:00:00:11")
    p2 = netkit.veth("s1p2", "h2e", ns_b=h2, switch_side=True, mac_b="02:00:00:00:00:22")
    config, p4info = tmp_path / "router.tfp4.json", tmp_path / "router.p4info.txtpb"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "switch.cli",
            "compile",
            str(PROGRAM),
            "-o",
            str(config),
            "--p4info",
            str(p4info),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    grpc_port, cli_port = free_port(), free_port()
    pcap_dir = tmp_path / "pcap"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "switch.daemon",
            "-i",
            f"1@{p1.a}",
            "-i",
            f"2@{p2.a}",
            "--device-id",
            "1",
            "--cpu-port",
            "255",
            "--pcap",
            str(pcap_dir),
            "--no-p4",
            "--thrift-port",
            str(cli_port),
            "--",
            "--grpc-server-addr",
            f"127.0.0.1:{grpc_port}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        ready_s = wait_listening(grpc_port, proc, timeout=10)
        print(f"tf-switch ready after {ready_s:.2f} s")
        r = subprocess.run(
            [
                sys.executable,
                "-c",
                SHELL_SCRIPT,
                f"127.0.0.1:{grpc_port}",
                str(p4info),
                str(config),
                H2_ADDR,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        assert "entries 1" in r.stdout

        frame = bytes(
            Ether(src="02:00:00:00:00:11", dst="02:00:00:00:00:aa")
            / IPv6(src="2001:db8:1::1", dst=H2_ADDR, hlim=64)
            / UDP(sport=1234, dport=5678)
            / b"hello through tf-switch"
        )
        rx = call_in_netns(h2.name, lambda: raw_socket(p2.b))
        tx = call_in_netns(h1.name, lambda: raw_socket(p1.b))
        try:
            got = None
            for _ in range(5):  # the first frames may race the route install
                tx.send(frame)
                try:
                    while True:
                        data = rx.recv(4096)
                        pkt = Ether(data)
                        if pkt.haslayer(UDP) and pkt[UDP].dport == 5678:
                            got = pkt
                            break
                except TimeoutError:
                    continue
                if got is not None:
                    break
        finally:
            rx.close()
            tx.close()
        assert got is not None, "the frame never reached h2"
        assert got.dst == "02:00:00:00:00:22" and got.src == "02:00:00:00:00:aa"
        assert got[IPv6].hlim == 63
        assert bytes(got[UDP].payload) == b"hello through tf-switch"

        cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "switch.device.control",
                "--thrift-port",
                str(cli_port),
                "table_num_entries",
                "ipv6_lpm",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert cli.returncode == 0 and cli.stdout.strip() == "1", cli.stderr
        bad = subprocess.run(
            [
                sys.executable,
                "-m",
                "switch.device.control",
                "--thrift-port",
                str(cli_port),
                "set_queue_rat",
                "5",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert bad.returncode == 1 and "did you mean 'set_queue_rate'" in bad.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert rc == 0, proc.stderr.read().decode() if proc.stderr else ""
    ins = rdpcap(str(pcap_dir / f"{p1.a}_in.pcap"))
    outs = rdpcap(str(pcap_dir / f"{p2.a}_out.pcap"))
    assert any(p.haslayer(UDP) and p[UDP].dport == 5678 for p in ins)
    assert any(p.haslayer(UDP) and p[UDP].dport == 5678 and p[IPv6].hlim == 63 for p in outs)


def test_tf_switch_rejects_bad_usage_with_a_clear_message() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "switch.daemon", "-i", "x@eth0", "--no-p4"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2
    assert "bad interface 'x@eth0'" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "switch.daemon",
            "-i",
            "1@tfnosuchif0",
            "--no-p4",
            "--",
            "--grpc-server-addr",
            f"127.0.0.1:{free_port()}",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 1 and "tfnosuchif0" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "switch.daemon",
            str(ROOT / "tests" / "p4err" / "unknown_field.p4"),
            "--",
            "--grpc-server-addr",
            f"127.0.0.1:{free_port()}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1 and "unknown_field.p4:" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_tf_switch_serves_p4runtime_before_any_pipeline(tmp_path: Path) -> None:
    """With --no-p4 it answers P4Runtime at once, no program pushed. How soon it is ready is
    printed, not asserted (shared machines are noisy)."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "switch.daemon",
            "--no-p4",
            "--thrift-port",
            str(free_port()),
            "--",
            "--grpc-server-addr",
            f"127.0.0.1:{port}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        ready = wait_listening(port, proc, timeout=10)  # a hang guard
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            caps = p4runtime_pb2_grpc.P4RuntimeStub(channel).Capabilities(
                p4runtime_pb2.CapabilitiesRequest(), timeout=10
            )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    print(f"ready in {ready:.2f} s")
    assert caps.p4runtime_api_version
