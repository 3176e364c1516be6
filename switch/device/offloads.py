"""Turning off NIC offloads (checksum, segmentation, GRO/LRO) with the SIOCETHTOOL ioctl.

Why a software switch wants them off on every interface it touches, and on the hosts' veths:

* With ``tx-checksumming`` on, a host's UDP/TCP packets cross a veth with a *partial* checksum
  (only the pseudo-header sum is in the packet; the kernel marks it ``CHECKSUM_PARTIAL``). A
  packet socket on the far end sees that unfinished checksum (``TP_STATUS_CSUMNOTREADY``), and
  once the switch re-sends the bytes the receiver drops the packet as corrupt.
* With TSO/GSO (sender) or GRO/LRO (receiver) on, one "frame" can be up to 64 KiB, larger than
  the MTU and than a ring slot.

:func:`disable_offloads` reads the kernel's feature names (``ETHTOOL_GSTRINGS`` of the
``ETH_SS_FEATURES`` set) and clears, with one ``ETHTOOL_SFEATURES``, every changeable feature
named like a transmit checksum, scatter-gather, segmentation offload, GRO or LRO (what
``ethtool -K IF tx off sg off tso off gso off gro off lro off`` does, plus newer bits such as
``tx-udp-segmentation``). Where that interface is missing it falls back to the legacy
per-feature commands. No ``ethtool`` binary is needed.
"""

from __future__ import annotations

import ctypes
import fcntl
import socket
import struct

SIOCETHTOOL = 0x8946
_IFREQ_SIZE = 40

# (get, set) command pairs of <linux/ethtool.h> for one boolean feature each (legacy interface).
_FEATURES: dict[str, tuple[int, int]] = {
    "tx-checksumming": (0x16, 0x17),
    "scatter-gather": (0x18, 0x19),
    "tcp-segmentation-offload": (0x1E, 0x1F),
    "generic-segmentation-offload": (0x23, 0x24),
    "generic-receive-offload": (0x2B, 0x2C),
}
_GFLAGS, _SFLAGS = 0x25, 0x26
_ETH_FLAG_LRO = 1 << 15

# What a packet switch turns off: everything that changes frame sizes or leaves checksums
# unfinished. rx-checksumming only marks checksums as verified and is left alone.
SWITCH_OFF = (
    "tx-checksumming",
    "scatter-gather",
    "tcp-segmentation-offload",
    "generic-segmentation-offload",
    "generic-receive-offload",
)


_GSTRINGS, _GSSET_INFO, _GFEATURES, _SFEATURES = 0x1B, 0x37, 0x3A, 0x3B
_ETH_SS_FEATURES = 4
_ETH_GSTRING_LEN = 32
# Feature-name patterns cleared by disable_offloads (prefix match).
OFF_PREFIXES = (
    "tx-checksum-",
    "tx-scatter-gather",
    "tx-tcp",
    "tx-udp",
    "tx-gso-",
    "tx-generic-segmentation",
    "tx-gre-",
    "tx-ipxip",
    "tx-sctp-segmentation",
    "tx-esp-segmentation",
    "tx-tunnel-remcsum-segmentation",
    "rx-gro",
    "rx-lro",
    "rx-udp-gro-forwarding",
)


def _ethtool_buf(sock: socket.socket, ifname: str, payload: bytes) -> bytes:
    """SIOCETHTOOL with an arbitrary command structure; returns it as the kernel left it."""
    buf = ctypes.create_string_buffer(payload, len(payload))
    name = ifname.encode()
    if len(name) > 15:
        raise ValueError(f"interface name {ifname!r} is too long")
    ifreq = bytearray(struct.pack("16sP", name, ctypes.addressof(buf)).ljust(_IFREQ_SIZE, b"\0"))
    fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifreq, True)
    return buf.raw


def feature_names(sock: socket.socket, ifname: str) -> list[str]:
    """The kernel's feature names, in bit order (``ETH_SS_FEATURES``)."""
    info = _ethtool_buf(sock, ifname, struct.pack("IIQI", _GSSET_INFO, 0, 1 << _ETH_SS_FEATURES, 0))
    count = struct.unpack_from("I", info, 16)[0]
    raw = _ethtool_buf(
        sock,
        ifname,
        struct.pack("III", _GSTRINGS, _ETH_SS_FEATURES, count) + bytes(count * _ETH_GSTRING_LEN),
    )
    names = []
    for i in range(count):
        chunk = raw[12 + i * _ETH_GSTRING_LEN : 12 + (i + 1) * _ETH_GSTRING_LEN]
        names.append(chunk.split(b"\0", 1)[0].decode())
    return names


def _get_features(sock: socket.socket, ifname: str, words: int) -> list[tuple[int, int, int, int]]:
    raw = _ethtool_buf(sock, ifname, struct.pack("II", _GFEATURES, words) + bytes(16 * words))
    return [struct.unpack_from("IIII", raw, 8 + 16 * i) for i in range(words)]


def active_features(ifname: str) -> dict[str, bool]:
    """Every named feature of ``ifname`` and whether it is active (like ``ethtool -k``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        names = feature_names(sock, ifname)
        blocks = _get_features(sock, ifname, (len(names) + 31) // 32)
    return {n: bool(blocks[i // 32][2] >> (i % 32) & 1) for i, n in enumerate(names) if n}


def _disable_by_name(sock: socket.socket, ifname: str) -> list[str]:
    names = feature_names(sock, ifname)
    words = (len(names) + 31) // 32
    blocks = _get_features(sock, ifname, words)
    valid = [0] * words
    changed = []
    for i, name in enumerate(names):
        if not name.startswith(OFF_PREFIXES):
            continue
        available, requested, active, _never = blocks[i // 32]
        bit = 1 << (i % 32)
        if available & bit and (requested | active) & bit:
            valid[i // 32] |= bit
            changed.append(name)
    if changed:
        payload = struct.pack("II", _SFEATURES, words) + b"".join(
            struct.pack("II", v, 0) for v in valid
        )
        _ethtool_buf(sock, ifname, payload)
    return changed


def _ethtool(sock: socket.socket, ifname: str, cmd: int, data: int = 0) -> int:
    raw = _ethtool_buf(sock, ifname, struct.pack("II", cmd, data))
    return int(struct.unpack_from("I", raw, 4)[0])


def disable_offloads(ifname: str) -> list[str]:
    """Turn off checksum/segmentation/GRO offloads and LRO on ``ifname``; return what changed.

    Acts in the network namespace of the calling *thread*: the ioctl socket is opened here, on
    every call, and a socket belongs to the namespace of the thread that creates it. So a thread
    that has joined another namespace (:func:`switch.device.netns.call_in_netns`, or
    :func:`switch.device.netns.join_netns` in a thread of its own) changes the ``ifname`` of
    that namespace. Features the driver cannot change are left as they are.

    Raises:
        OSError: there is no interface ``ifname`` in that namespace.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        socket.if_nametoindex(ifname)  # raises OSError for an unknown interface
        try:
            return _disable_by_name(sock, ifname)
        except OSError:
            return _disable_legacy(sock, ifname)


def enable_gro(ifname: str) -> bool:
    """Turn GRO (``rx-gro``) on for ``ifname``; return whether it is now requested.

    On a veth this is what gives the interface a NAPI context: frames its peer sends are queued
    and received in a NAPI poll (batched, and in a kernel thread of its own once the interface's
    ``threaded`` attribute is 1) instead of inside the sender's transmit call. For UDP without a
    socket that asks for UDP GRO nothing is merged. Same namespace rule as
    :func:`disable_offloads`.

    Raises:
        OSError: there is no interface ``ifname``, or the driver refused the change.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        socket.if_nametoindex(ifname)
        names = feature_names(sock, ifname)
        if "rx-gro" not in names:
            return False
        i = names.index("rx-gro")
        words = (len(names) + 31) // 32
        available = _get_features(sock, ifname, words)[i // 32][0]
        bit = 1 << (i % 32)
        if not available & bit:
            return False
        blocks = [(bit, bit) if w == i // 32 else (0, 0) for w in range(words)]
        _ethtool_buf(
            sock,
            ifname,
            struct.pack("II", _SFEATURES, words) + b"".join(struct.pack("II", *b) for b in blocks),
        )
        return bool(_get_features(sock, ifname, words)[i // 32][1] & bit)


def _disable_legacy(sock: socket.socket, ifname: str) -> list[str]:
    changed: list[str] = []
    for feature in SWITCH_OFF:
        get_cmd, set_cmd = _FEATURES[feature]
        try:
            if _ethtool(sock, ifname, get_cmd):
                _ethtool(sock, ifname, set_cmd, 0)
                changed.append(feature)
        except OSError:
            continue  # not supported by this driver, or fixed
    try:
        flags = _ethtool(sock, ifname, _GFLAGS)
        if flags & _ETH_FLAG_LRO:
            _ethtool(sock, ifname, _SFLAGS, flags & ~_ETH_FLAG_LRO)
            changed.append("large-receive-offload")
    except OSError:
        pass
    return changed
