"""Classic libpcap capture files (what ``tf-switch --pcap DIR`` writes per port, like BMv2).

Format (little-endian, as written on x86): a 24-byte global header ``magic 0xa1b2c3d4
(microsecond timestamps), version 2.4, thiszone 0, sigfigs 0, snaplen, linktype 1
(DLT_EN10MB)``, then per packet a 16-byte record header ``ts_sec, ts_usec, incl_len, orig_len``
followed by ``incl_len`` bytes. tcpdump, Wireshark and scapy's ``rdpcap`` read it.

:class:`PcapWriter` buffers in memory and writes to disk at most ``flush_interval`` seconds
after a packet: on the next write, or from one background thread per process that flushes
every open writer, so a reader sees a packet within about a second even when traffic stops.
"""

from __future__ import annotations

import struct
import threading
import time
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path

PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_MAGIC_NS = 0xA1B23C4D
LINKTYPE_ETHERNET = 1
DEFAULT_SNAPLEN = 262144
GLOBAL_HEADER = struct.Struct("<IHHiIII")
RECORD_HEADER = struct.Struct("<IIII")


def global_header(snaplen: int = DEFAULT_SNAPLEN, linktype: int = LINKTYPE_ETHERNET) -> bytes:
    """The 24-byte file header (version 2.4, microsecond timestamps)."""
    return GLOBAL_HEADER.pack(PCAP_MAGIC_US, 2, 4, 0, 0, snaplen, linktype)


def record(frame: bytes, ts: float, snaplen: int = DEFAULT_SNAPLEN) -> bytes:
    """One packet record: header plus (at most ``snaplen`` bytes of) the frame."""
    sec = int(ts)
    usec = int(round((ts - sec) * 1e6))
    if usec >= 1_000_000:
        sec, usec = sec + 1, usec - 1_000_000
    data = frame[:snaplen]
    return RECORD_HEADER.pack(sec, usec, len(data), len(frame)) + data


class _Flusher:
    """One daemon thread per process that flushes the open writers periodically."""

    def __init__(self) -> None:
        self.writers: weakref.WeakSet[PcapWriter] = weakref.WeakSet()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.interval = 0.25

    def register(self, writer: PcapWriter) -> None:
        with self.lock:
            self.writers.add(writer)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="pcap-flusher", daemon=True)
                self.thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(self.interval)
            with self.lock:
                writers = list(self.writers)
            for writer in writers:
                writer.flush_if_due()


_FLUSHER = _Flusher()


class PcapWriter:
    """Appends Ethernet frames to a new classic pcap file at ``path`` (truncated if present).

    ``write`` is safe to call from one thread while the background flusher runs. The file is
    complete and readable after every flush; ``close`` is idempotent.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        snaplen: int = DEFAULT_SNAPLEN,
        flush_interval: float = 0.5,
        linktype: int = LINKTYPE_ETHERNET,
    ) -> None:
        self.path = Path(path)
        self.snaplen = snaplen
        self.flush_interval = flush_interval
        self.packets = 0
        self._lock = threading.Lock()
        self._chunks: list[bytes] = []
        self._first_pending = 0.0
        self._file = open(self.path, "wb", buffering=0)  # closed in close()
        self._file.write(global_header(snaplen, linktype))
        self.closed = False
        _FLUSHER.register(self)

    def write(self, frame: bytes, ts: float | None = None) -> None:
        """Record ``frame`` with timestamp ``ts`` (seconds since the epoch; default: now)."""
        now = time.time()
        rec = record(frame, now if ts is None else ts, self.snaplen)
        with self._lock:
            if self.closed:
                return
            if not self._chunks:
                self._first_pending = now
            self._chunks.append(rec)
            self.packets += 1
            due = now - self._first_pending >= self.flush_interval
        if due:
            self.flush()

    def flush(self) -> None:
        """Write everything buffered to the file."""
        with self._lock:
            if self.closed or not self._chunks:
                return
            data = b"".join(self._chunks)
            self._chunks.clear()
            self._file.write(data)

    def flush_if_due(self) -> None:
        """Flush when the oldest buffered packet has waited ``flush_interval`` (flusher)."""
        if self._chunks and time.time() - self._first_pending >= self.flush_interval:
            self.flush()

    def close(self) -> None:
        """Flush and close the file (idempotent)."""
        self.flush()
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._file.close()

    def __enter__(self) -> PcapWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_pcap(path: str | Path) -> Iterator[tuple[float, bytes]]:
    """``(timestamp, frame)`` of each record of a classic pcap file (either byte order).

    Stops quietly at a record cut short (a file still being written).
    """
    data = Path(path).read_bytes()
    if len(data) < GLOBAL_HEADER.size:
        raise ValueError(f"{path}: not a pcap file (too short)")
    magic_le = struct.unpack_from("<I", data)[0]
    if magic_le in (PCAP_MAGIC_US, PCAP_MAGIC_NS):
        order = "<"
    elif struct.unpack_from(">I", data)[0] in (PCAP_MAGIC_US, PCAP_MAGIC_NS):
        order = ">"
    else:
        raise ValueError(f"{path}: not a classic pcap file (magic {magic_le:#x})")
    magic = struct.unpack_from(order + "I", data)[0]
    scale = 1e-9 if magic == PCAP_MAGIC_NS else 1e-6
    rec = struct.Struct(order + "IIII")
    off = GLOBAL_HEADER.size
    while off + rec.size <= len(data):
        sec, frac, incl, _orig = rec.unpack_from(data, off)
        off += rec.size
        if off + incl > len(data):
            return
        yield sec + frac * scale, data[off : off + incl]
        off += incl


def port_pcap_paths(directory: str | Path, ifname: str) -> tuple[Path, Path]:
    """``(DIR/<ifname>_in.pcap, DIR/<ifname>_out.pcap)``, BMv2's names for a port's captures."""
    d = Path(directory)
    return d / f"{ifname}_in.pcap", d / f"{ifname}_out.pcap"


class PortCaptures:
    """BMv2-style captures of a switch's ports: ``DIR/<ifname>_in.pcap``/``_out.pcap`` each.

    ``ports`` maps port numbers to interface names; frames of other ports are ignored.
    """

    def __init__(
        self,
        directory: str | Path,
        ports: Mapping[int, str],
        *,
        flush_interval: float = 0.5,
    ) -> None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        self._in: dict[int, PcapWriter] = {}
        self._out: dict[int, PcapWriter] = {}
        try:
            for number, ifname in ports.items():
                in_path, out_path = port_pcap_paths(directory, ifname)
                self._in[number] = PcapWriter(in_path, flush_interval=flush_interval)
                self._out[number] = PcapWriter(out_path, flush_interval=flush_interval)
        except BaseException:
            self.close()
            raise

    def received(self, port: int, frame: bytes, ts: float | None = None) -> None:
        """Record a frame that came in on ``port``."""
        writer = self._in.get(port)
        if writer is not None:
            writer.write(frame, ts)

    def sent(self, port: int, frame: bytes, ts: float | None = None) -> None:
        """Record a frame that went out of ``port``."""
        writer = self._out.get(port)
        if writer is not None:
            writer.write(frame, ts)

    def close(self) -> None:
        """Close every file (idempotent)."""
        for writer in [*self._in.values(), *self._out.values()]:
            writer.close()

    def __enter__(self) -> PortCaptures:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
