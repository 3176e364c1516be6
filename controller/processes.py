"""The running fabric's processes, as the fabric builder records them in
``results/fabric/state.json``::

    {"topology": "results/fabric/topology.json",
     "hosts": {"h1": {"pid": 1234}, ...},
     "switches": {"p0l0": {"pid": 2345, "grpc": "127.0.0.1:50001", "thrift_port": 9091,
                           "interfaces": {"1": "p0l0-eth1", ...}}, ...}}

``interfaces`` is optional: without it a switch port ``N`` is Mininet's ``<switch>-eth<N>`` in
the root namespace. Host pids are processes inside each host's network namespace (Mininet's
host shells); ``incast`` sends from those namespaces.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.errors import CommandError

STATE_FILE = Path("fabric") / "state.json"


@dataclass(frozen=True)
class SwitchProcess:
    pid: int | None = None
    grpc: str | None = None
    thrift_port: int | None = None
    interfaces: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FabricProcesses:
    """What ``state.json`` says about the running fabric."""

    path: Path
    topology: str | None = None
    hosts: dict[str, int] = field(default_factory=dict)
    switches: dict[str, SwitchProcess] = field(default_factory=dict)

    @classmethod
    def load(cls, results_dir: str | Path) -> FabricProcesses | None:
        """The state of the fabric under ``results_dir``; None when there is no state file.

        Raises:
            CommandError: the file exists but is not such a state.
        """
        path = Path(results_dir) / STATE_FILE
        try:
            doc: Any = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, json.JSONDecodeError) as e:
            raise CommandError(f"{path}: unreadable fabric state ({e})") from None
        try:
            hosts = {
                str(k): int(v["pid"])
                for k, v in (doc.get("hosts") or {}).items()
                if isinstance(v, dict) and v.get("pid") is not None
            }
            switches = {}
            for name, v in (doc.get("switches") or {}).items():
                ifs = {int(p): str(i) for p, i in (v.get("interfaces") or {}).items()}
                switches[str(name)] = SwitchProcess(
                    int(v["pid"]) if v.get("pid") is not None else None,
                    str(v["grpc"]) if v.get("grpc") else None,
                    int(v["thrift_port"]) if v.get("thrift_port") is not None else None,
                    ifs,
                )
            topo = doc.get("topology")
            return cls(path, str(topo) if topo else None, hosts, switches)
        except (AttributeError, TypeError, ValueError, KeyError) as e:
            raise CommandError(f"{path}: malformed fabric state ({e})") from None

    def ifname(self, switch: str, port: int) -> str:
        """The Linux interface of a switch port (root namespace)."""
        sp = self.switches.get(switch)
        if sp is not None and port in sp.interfaces:
            return sp.interfaces[port]
        return f"{switch}-eth{port}"

    def host_pid(self, host: str) -> int:
        pid = self.hosts.get(host)
        if pid is None:
            raise CommandError(f"{self.path} has no pid for host {host}")
        return pid
