"""``FabricController``: the controller of one running fabric -- the API the fabric builder
(:mod:`topologies.emulation.bringup`) calls.

Usage (what ``make fabric`` and ``tf-ctl serve`` do)::

    fabric = Fabric.load("results/fabric/topology.json")
    with FabricController(fabric, "build/fabric.p4info.txtpb", "build/fabric.tfp4.json") as ctl:
        ctl.connect()             # every switch: channel, stream, arbitration (primary)
        ctl.push_pipeline()       # SetForwardingPipelineConfig VERIFY_AND_COMMIT, in parallel
        ctl.install_routes()      # the computed entries (plus current failures / loss / ECN)
        ctl.start_telemetry()     # burst digests -> results/telemetry.csv
        report = ctl.check_paths()   # read back every switch, walk every host pair's paths
        print(ctl.run_command(["fail", "plane", "1"]))   # what the Mininet CLI calls

All state lives in one :class:`~controller.conditions.Conditions` value; every change computes
the wanted entries of the switches it can change (:func:`controller.routes.affected_switches`,
:func:`controller.routes.desired_entities`) and writes the difference
(:meth:`controller.switches.SwitchSession.sync`), so commands are idempotent and a rejected one
changes nothing. Conditions are saved to ``results/fabric/conditions.json``.

Switch addresses: ``addresses`` if given, else ``grpc`` from ``results/fabric/state.json``,
else ``127.0.0.1:<grpc_port>`` from the topology. Without a P4Info file (one-shot ``tf-ctl``)
the P4Info is fetched from the switches.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from p4.v1 import p4runtime_pb2

from controller import program as fp
from controller.conditions import Conditions
from controller.config import ControllerConfig
from controller.dataplane import views, working_paths
from controller.drops import per_port
from controller.entries import diff
from controller.errors import CommandError, ControllerError, FabricUnavailable
from controller.linux import interface_exists, set_link
from controller.p4rt import Arbitration, new_election_id
from controller.processes import FabricProcesses
from controller.routes import affected_switches, desired_entities
from controller.schema import Schema, load_p4info, pipeline_cookie
from controller.switches import SwitchSession, SyncResult, for_each, run_parallel
from controller.telemetry import FlushPacer, TelemetryCollector
from controller.wiring import Wiring
from topologies.model import Fabric

CONDITIONS_FILE = Path("fabric") / "conditions.json"
TELEMETRY_CSV = "telemetry.csv"
RECONNECT_MIN_S = 0.1  # first wait between reconnect attempts to a restarted switch
RECONNECT_MAX_S = 2.0  # the longest (doubling in between)
#: A minimal frame sent out of the drop port to make a switch's ingress emit pending reports.
FLUSH_FRAME = bytes(12) + b"\x88\xb5" + bytes(46)


@dataclass(frozen=True)
class PathReport:
    """Installed state read back from every switch, and the paths it gives every host pair."""

    pairs: int
    paths_per_pair: int  # P x S
    working: dict[tuple[str, str], int] = field(default_factory=dict)
    drift: dict[str, int] = field(default_factory=dict)  # switch -> entities differing from wanted

    @property
    def degraded(self) -> list[tuple[str, str, int]]:
        return [(a, b, n) for (a, b), n in self.working.items() if n < self.paths_per_pair]

    @property
    def ok(self) -> bool:
        return not self.degraded and not any(self.drift.values())

    def summary(self) -> str:
        drift = sum(self.drift.values())
        if self.ok:
            return (
                f"{self.pairs} host pairs, each with all {self.paths_per_pair} paths; "
                f"switches hold exactly the computed entries"
            )
        return (
            f"{len(self.degraded)} of {self.pairs} host pairs lack paths; "
            f"{drift} entities differ from the computed ones"
        )


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


class FabricController:
    """Controller of one fabric (see the module docstring)."""

    def __init__(
        self,
        fabric: Fabric,
        p4info_path: str | Path | None = None,
        config_path: str | Path | None = None,
        *,
        results_dir: str | Path = "results",
        config: ControllerConfig | None = None,
        addresses: Mapping[str, str] | None = None,
        resume: bool = False,
    ) -> None:
        """Nothing is contacted yet.

        Args:
            fabric: the topology.
            p4info_path: the pipeline's P4Info (text, JSON or binary); None: fetch it from
                the switches (they must have a pipeline).
            config_path: the opaque device config to push (tf-p4 compile output, or p4c's
                BMv2 JSON); needed by :meth:`push_pipeline` only.
            results_dir: where ``telemetry.csv`` and ``fabric/`` go.
            config: controller settings.
            addresses: ``{switch: "host:port"}`` overrides for the gRPC addresses.
            resume: start from the saved conditions (failures, loss, ECN) instead of none.
        Raises:
            SchemaError: the P4Info file cannot be read.
        """
        self.fabric = fabric
        self.wiring = Wiring(fabric)
        self.config = config or ControllerConfig()
        self.results_dir = Path(results_dir)
        self.p4info = load_p4info(p4info_path) if p4info_path is not None else None
        self.config_path = Path(config_path) if config_path is not None else None
        self.schema = Schema(self.p4info) if self.p4info is not None else None
        if self.schema is not None:
            fp.check_program(self.schema)
        self.processes = FabricProcesses.load(self.results_dir)
        self.addresses = dict(addresses or {})
        self.conditions = Conditions(ecn_threshold_pkts=self.config.ecn_threshold_pkts)
        if resume:
            self.conditions = self._load_conditions() or self.conditions
        self.sessions: dict[str, SwitchSession] = {}
        self.telemetry: TelemetryCollector | None = None
        self.cookie: int | None = None
        if self.p4info is not None and self.config_path is not None:
            with contextlib.suppress(OSError):  # push_pipeline reports a missing file
                self.cookie = pipeline_cookie(self.p4info, self.config_path.read_bytes())
        self.timings_s: dict[str, float] = {}
        self.last_sync = SyncResult()
        """What the latest successful :meth:`apply` wrote (and when its first write returned)."""
        self.lock = threading.RLock()
        self._trusted: set[str] = set()  # sessions whose mirror is known to match the switch
        self._expiry: threading.Timer | None = None
        self._flush_stop = threading.Event()
        self._flush_kick = threading.Event()  # a watcher came: flush soon, not after a long wait
        self._flush_thread: threading.Thread | None = None
        self._last_report: float | None = None  # monotonic time of the latest burst digest
        self._closed = False
        self._stopping = threading.Event()  # set by close(): reconnect loops end
        self._reconnect_lock = threading.Lock()
        self._reconnecting: set[str] = set()
        self.reconnects: dict[str, int] = {}
        """Switches this controller reconnected to and restored, and how often."""

    # -- addresses and files --------------------------------------------------------------

    def address_of(self, switch: str) -> str:
        if switch in self.addresses:
            return self.addresses[switch]
        if self.processes is not None:
            sp = self.processes.switches.get(switch)
            if sp is not None and sp.grpc:
                return sp.grpc
        return f"127.0.0.1:{self.wiring.switches[switch].grpc_port}"

    def not_listening(self, timeout_s: float = 0.5) -> list[str]:
        """The switches whose P4Runtime address accepts no TCP connection within
        ``timeout_s`` (probed in parallel; a fabric that is down fails at once here, where a
        gRPC connect would wait out its timeout)."""

        def accepts(name: str) -> bool:
            host, _, port = self.address_of(name).rpartition(":")
            try:
                with socket.create_connection((host.strip("[]"), int(port)), timeout_s):
                    return True
            except (OSError, ValueError):
                return False

        names = [sw.name for sw in self.fabric.switches]
        with ThreadPoolExecutor(max_workers=16) as pool:
            up = list(pool.map(accepts, names))
        return [n for n, ok in zip(names, up, strict=True) if not ok]

    @property
    def conditions_path(self) -> Path:
        return self.results_dir / CONDITIONS_FILE

    def _load_conditions(self) -> Conditions | None:
        try:
            return Conditions.from_json(self.conditions_path.read_text()).expire()
        except (OSError, ValueError):
            return None

    def _save_conditions(self) -> None:
        write_atomic(self.conditions_path, self.conditions.to_json() + "\n")

    # -- lifecycle ------------------------------------------------------------------------

    def connect(self) -> None:
        """Connect to every switch and become primary (in parallel).

        Raises:
            FabricUnavailable: a switch does not answer, or (without a P4Info file) no switch
                has a pipeline to take the P4Info from.
        """
        t0 = time.monotonic()
        election = new_election_id()
        for sw in self.fabric.switches:
            if sw.name not in self.sessions:
                s = SwitchSession(
                    sw, self.address_of(sw.name), self.config, self.schema, election_id=election
                )
                s.client.on_arbitration = lambda arb, s=s: self._on_arbitration(s, arb)
                s.client.on_stream_end = lambda why, s=s: self._on_stream_end(s, why)
                self.sessions[sw.name] = s
        for_each(self.sessions.values(), lambda s: s.connect())
        if self.schema is None:
            self._fetch_schema()
        self.timings_s["connect"] = time.monotonic() - t0

    def _fetch_schema(self) -> None:
        for s in self.sessions.values():
            info, cookie = s.fetch_pipeline()
            if info is not None and (info.tables or info.actions):
                self.p4info, self.cookie = info, cookie
                self.schema = Schema(info)
                fp.check_program(self.schema)
                for other in self.sessions.values():
                    other.schema = self.schema
                return
        raise FabricUnavailable(
            "no switch has a pipeline to read the P4Info from; start "
            "`tf-ctl serve` (which pushes one) or pass --p4info"
        )

    def push_pipeline(self) -> None:
        """``SetForwardingPipelineConfig`` (VERIFY_AND_COMMIT) on every switch, in parallel.

        Raises:
            ControllerError: no P4Info / device config given, or a switch refused it.
        """
        if self.p4info is None or self.config_path is None:
            raise ControllerError("push_pipeline needs a P4Info file and a device config file")
        try:
            device_config = self.config_path.read_bytes()
        except OSError as e:
            raise ControllerError(
                f"cannot read device config {self.config_path}: {e.strerror}"
            ) from None
        self.cookie = pipeline_cookie(self.p4info, device_config)
        t0 = time.monotonic()
        info, cookie = self.p4info, self.cookie
        with self.lock:
            for_each(self._live(), lambda s: s.push(info, device_config, cookie))
            self._trusted = set(self.sessions)
        self.timings_s["push_pipeline"] = time.monotonic() - t0

    def install_routes(self) -> SyncResult:
        """Make every switch hold the computed entries for the current conditions.

        Switches not pushed by this controller are read back first, so entries left by an
        earlier controller are kept, changed or removed as needed (never inserted twice).
        """
        t0 = time.monotonic()
        with self.lock:
            stale = [s for s in self._live() if s.name not in self._trusted]
            for_each(stale, self._adopt)
            self._trusted.update(s.name for s in stale)
            result = self._sync(self.conditions)
            self._apply_phy(Conditions(), self.conditions, strict=False)
            self._save_conditions()
            self._schedule_expiry()
        self.timings_s["install_routes"] = time.monotonic() - t0
        return result

    def _adopt(self, s: SwitchSession) -> None:
        """Take over a switch this controller did not push: it must run a pipeline (ours, if
        we know which), and its entries become the mirror."""
        info, cookie = s.fetch_pipeline()
        if info is None or not (info.tables or info.actions):
            raise FabricUnavailable(
                f"{s.name} has no pipeline: push one (tf-ctl serve without "
                f"--no-push, or FabricController.push_pipeline())"
            )
        if self.cookie is not None and cookie is not None and cookie != self.cookie:
            raise ControllerError(
                f"{s.name} runs another pipeline (cookie {cookie:#x}, expected "
                f"{self.cookie:#x}): push ours (tf-ctl serve without "
                f"--no-push)"
            )
        s.read_installed()

    def _live(self) -> list[SwitchSession]:
        if not self.sessions:
            raise FabricUnavailable("not connected (call connect() first)")
        return list(self.sessions.values())

    def _sync(self, conditions: Conditions, only: set[str] | None = None) -> SyncResult:
        """Sync every switch (or those ``only`` names) to ``conditions``' entities."""
        desired = desired_entities(self.wiring, self.config, conditions, only)
        live = [s for s in self._live() if s.name in desired]
        results = for_each(live, lambda s: s.sync(desired[s.name])) if live else {}
        total = SyncResult()
        for r in results.values():
            assert isinstance(r, SyncResult)
            total = total + r
        return total

    def apply(self, conditions: Conditions) -> SyncResult:
        """Move the fabric to ``conditions``; on failure try to go back, then raise."""
        with self.lock:
            old = self.conditions
            self._check_phy(conditions)
            # only the switches whose entities change are computed and written
            only = affected_switches(self.wiring, self.config, old, conditions)
            try:
                self._apply_phy(old, conditions, strict=True)
                result = self._sync(conditions, only)
            except ControllerError:
                try:
                    self._apply_phy(conditions, old, strict=False)
                    self._sync(old, only)
                except ControllerError:
                    pass
                raise
            self.conditions = conditions
            self.last_sync = result
            self._save_conditions()
            self._schedule_expiry()
            return result

    # -- phy (Linux link) failures --------------------------------------------------------

    def phy_interfaces(self, conditions: Conditions) -> set[str]:
        if self.processes is None:
            return set()
        return {
            self.processes.ifname(sw, port)
            for sw, port in conditions.down_ends(self.wiring, phy=True)
        }

    def _check_phy(self, conditions: Conditions) -> None:
        wanted = conditions.down_ends(self.wiring, phy=True)
        if not wanted:
            return
        if self.processes is None:
            raise CommandError(
                f"--phy needs the running fabric's state "
                f"({self.results_dir / 'fabric' / 'state.json'} is missing)"
            )
        missing = sorted(i for i in self.phy_interfaces(conditions) if not interface_exists(i))
        if missing:
            raise CommandError(f"--phy: no interface {', '.join(missing)} here")

    def _apply_phy(self, old: Conditions, new: Conditions, *, strict: bool) -> None:
        before, after = self.phy_interfaces(old), self.phy_interfaces(new)
        for ifname, up in [(i, False) for i in sorted(after - before)] + [
            (i, True) for i in sorted(before - after)
        ]:
            try:
                set_link(ifname, up)
            except CommandError:
                if strict:
                    raise

    # -- loss expiry ----------------------------------------------------------------------

    def _schedule_expiry(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        times = [e.expires_unix_s for e in self.conditions.losses if e.expires_unix_s is not None]
        if not times or self._closed:
            return
        delay = max(0.0, min(times) - time.time())
        self._expiry = threading.Timer(delay, self._expire)
        self._expiry.daemon = True
        self._expiry.start()

    def _expire(self) -> None:
        with self.lock:
            if self._closed:
                return
            try:
                self.apply(self.conditions.expire())
            except ControllerError:
                self._schedule_expiry()  # try again at the next deadline

    def pending_expiries(self) -> list[float]:
        return sorted(
            e.expires_unix_s for e in self.conditions.losses if e.expires_unix_s is not None
        )

    def wait_for_expiries(self, timeout_s: float | None = None) -> None:
        """Block until every timed loss event has been removed (one-shot ``tf-ctl loss --for``)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self.pending_expiries():
            if deadline is not None and time.monotonic() > deadline:
                return
            time.sleep(0.01)

    # -- switch restarts ------------------------------------------------------------------

    def _on_stream_end(self, s: SwitchSession, why: str) -> None:
        s.last_error = f"stream ended: {why}"
        with self._reconnect_lock:
            if self._closed or s.name in self._reconnecting:
                return
            self._reconnecting.add(s.name)
        threading.Thread(
            target=self._reconnect, args=(s,), daemon=True, name=f"reconnect-{s.name}"
        ).start()

    def _reconnect(self, s: SwitchSession) -> None:
        """Reconnect to a switch whose stream ended (it restarted, or its gRPC server did) and
        give it back everything: the pipeline if it lost it, the entities of the current
        conditions (routes, failures, loss, ECN, trimming) and the digest subscription. Retries
        with back-off until it answers or the controller closes."""
        delay = RECONNECT_MIN_S
        try:
            while not self._closed:
                try:
                    arb = s.client.reopen(new_election_id())
                    if not arb.primary:
                        s.last_error = "reconnected as backup: another controller is primary"
                        return
                    self._restore_switch(s)
                    s.last_error = ""
                    self.reconnects[s.name] = self.reconnects.get(s.name, 0) + 1
                    return
                except ControllerError as e:
                    s.last_error = f"reconnecting: {e}"
                if self._stopping.wait(delay):
                    return
                delay = min(delay * 2, RECONNECT_MAX_S)
        finally:
            with self._reconnect_lock:
                self._reconnecting.discard(s.name)

    def _restore_switch(self, s: SwitchSession) -> None:
        """Push the pipeline if the switch has none (or another one), then sync its entities."""
        with self.lock:
            info, cookie = s.fetch_pipeline()
            ours = info is not None and bool(info.tables or info.actions)
            if ours and None not in (self.cookie, cookie) and cookie != self.cookie:
                ours = False
            if not ours:
                if self.p4info is None or self.config_path is None:
                    raise ControllerError(
                        f"{s.name} came back without our pipeline, and this controller has no "
                        "device config to push (tf-ctl serve pushes one)"
                    )
                try:
                    device_config = self.config_path.read_bytes()
                except OSError as e:
                    raise ControllerError(f"cannot read {self.config_path}: {e.strerror}") from None
                s.push(self.p4info, device_config, pipeline_cookie(self.p4info, device_config))
            else:
                s.read_installed()
            s.sync(desired_entities(self.wiring, self.config, self.conditions, [s.name])[s.name])
            if self.telemetry is not None:
                self.telemetry.drops_baseline(s.name, _tail_drops(s))  # counters restarted
                s.enable_digest(fp.BURST_DIGEST)

    # -- arbitration ----------------------------------------------------------------------

    def _on_arbitration(self, s: SwitchSession, arb: Arbitration) -> None:
        if arb.no_primary and not self._closed:
            threading.Thread(target=self._reclaim, args=(s,), daemon=True).start()

    def _reclaim(self, s: SwitchSession) -> None:
        """Take primary back after another controller left, and re-sync that switch."""
        try:
            if not s.client.arbitrate(new_election_id()).primary:
                return
            with self.lock:
                saved = self._load_conditions()
                if saved is not None and saved != self.conditions:
                    self.conditions = saved
                s.read_installed()
                s.sync(desired_entities(self.wiring, self.config, self.conditions)[s.name])
                if self.telemetry is not None:
                    s.enable_digest(fp.BURST_DIGEST)
        except ControllerError as e:
            s.last_error = f"reclaiming primary: {e}"

    # -- telemetry ------------------------------------------------------------------------

    def start_telemetry(self) -> TelemetryCollector:
        """Subscribe to burst digests of every switch; records go to ``results/telemetry.csv``."""
        with self.lock:
            if self.telemetry is not None:
                return self.telemetry
            collector = TelemetryCollector(
                self.results_dir / TELEMETRY_CSV, self.config.recent_bursts
            )
            self.telemetry = collector
            baselines = run_parallel(self._live(), _tail_drops)
            for name, tail in baselines.items():
                collector.drops_baseline(name, None if isinstance(tail, Exception) else tail)
            for s in self._live():
                s.client.on_digest = lambda d, s=s: self._on_digest(s, d)
            for_each(self._live(), lambda s: s.enable_digest(fp.BURST_DIGEST))
            if self.config.telemetry_flush_s > 0:
                self._flush_thread = threading.Thread(
                    target=self._flush_loop, daemon=True, name="telemetry-flush"
                )
                self._flush_thread.start()
            return collector

    def _on_digest(self, s: SwitchSession, digest: p4runtime_pb2.DigestList) -> None:
        try:
            if self.telemetry is not None and s.digest_name(digest.digest_id) == fp.BURST_DIGEST:
                decoded = s.decode_digest(digest)
                try:
                    tail = _tail_drops(s)
                except ControllerError:
                    tail = None
                self.telemetry.add_digest(s.name, decoded, tail)
                self._last_report = time.monotonic()
                if self.config.telemetry_flush_s > 0:
                    # each ingress pass reports one finished burst: ask for the next at once
                    # rather than at the next flush round
                    self._flush(s)
        except ControllerError as e:
            s.last_error = f"digest: {e}"
        finally:
            try:
                s.client.ack_digest(digest.digest_id, digest.list_id)
            except ControllerError:
                pass

    def _flush(self, s: SwitchSession) -> None:
        if s.client.is_primary and s.schema is not None:
            try:
                s.packet_out(FLUSH_FRAME, egress_port=fp.DROP_PORT, routed=0)
            except ControllerError:
                pass

    def flush_reports(self) -> None:
        """One packet-out to the drop port of every switch: pending burst reports leave."""
        for s in list(self.sessions.values()):
            self._flush(s)

    def settle_reports(self) -> None:
        """Flush every switch and wait until their pending burst records can have arrived (the
        digest timeout and a little): what ``telemetry recent`` and ``incast`` read is current."""
        self.flush_reports()
        time.sleep(0.05 + self.config.digest_max_timeout_ns / 1e9)

    def watching(self) -> None:
        """Someone started watching telemetry: flush at the busy pace from now on."""
        self._flush_kick.set()

    def _flush_loop(self) -> None:
        cfg = self.config
        pacer = FlushPacer(cfg.telemetry_flush_s, cfg.telemetry_idle_flush_s)
        wait = pacer.busy_s
        while True:
            self._flush_kick.wait(wait)
            if self._flush_stop.is_set():
                return
            self._flush_kick.clear()
            self.flush_reports()
            tel = self.telemetry
            watchers = tel.watcher_count if tel is not None else 0
            wait = pacer.next_wait(time.monotonic(), watchers, self._last_report)

    # -- checks ---------------------------------------------------------------------------

    def check_paths(self, hosts: list[str] | None = None) -> PathReport:
        """Read back every switch; compare with the computed entries; walk every host pair's
        micro-SID paths through what the switches hold (phy failures included).

        Args:
            hosts: check only the pairs among these hosts (the walk costs pairs x P x S;
                a 512-host fabric has 261,632 pairs).
        """
        with self.lock:
            for_each(self._live(), lambda s: s.read_installed())
            desired = desired_entities(self.wiring, self.config, self.conditions)
            drift = {n: len(diff(s.installed, desired[n])) for n, s in self.sessions.items()}
            sws = views({n: s.installed for n, s in self.sessions.items()})
            down = self.conditions.down_ends(self.wiring, phy=True)
        working = {}
        names = (
            [self.wiring.check_host(h).name for h in hosts]
            if hosts is not None
            else [h.name for h in self.fabric.hosts]
        )
        for a, b in itertools.permutations(names, 2):
            working[(a, b)] = len(working_paths(self.wiring, sws, a, b, extra_down=down))
        spec = self.fabric.spec
        return PathReport(len(working), spec.planes * spec.spines, working, drift)

    # -- commands -------------------------------------------------------------------------

    def run_command(
        self,
        argv: list[str],
        out: Callable[[str], None] | None = None,
        alive: Callable[[], bool] | None = None,
    ) -> str:
        """Run one ``tf-ctl`` command (``["fail", "plane", "1"]``); its rendered output.

        ``out`` receives streamed lines (``telemetry watch``); ``alive`` returning False ends
        a stream whose reader has gone. Raises
        :class:`~controller.errors.CommandError` (nothing changed) or another
        :class:`~controller.errors.ControllerError`; the fabric keeps running either way.
        """
        from controller.commands import run

        return run(self, argv, out, alive)

    # -- close ----------------------------------------------------------------------------

    def close(self) -> None:
        """Remove timed loss events, stop telemetry, release every switch; idempotent."""
        if self._closed:
            return
        with self.lock:
            if self._expiry is not None:
                self._expiry.cancel()
            if self.pending_expiries() and self.sessions:
                try:
                    self.apply(self.conditions.expire(float("inf")))
                except ControllerError:
                    pass
            self._closed = True
        self._stopping.set()
        self._flush_stop.set()
        self._flush_kick.set()
        if self._flush_thread is not None:
            self._flush_thread.join(timeout=2)
            # a quiet fabric was flushed seldom: the last burst's record leaves before the end
            self.settle_reports()
        if self.telemetry is not None:
            self.telemetry.close()
        for s in self.sessions.values():
            s.close()

    def __enter__(self) -> FabricController:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _tail_drops(s: SwitchSession) -> dict[int, int] | None:
    """The switch's tail drops per port so far (None: the target does not count drops)."""
    drops = s.read_target_drops()
    return None if drops is None else {p: d.tail for p, d in per_port(drops).items()}
