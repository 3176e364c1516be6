"""The switches' gRPC ports are taken out of the kernel's ephemeral range while a fabric runs
(a client socket that got one made a switch fail to bind) and given back after, leaving every
other entry of the setting alone. Exercised on a file shaped like
``/proc/sys/net/ipv4/ip_local_reserved_ports``."""

from __future__ import annotations

from pathlib import Path

from topologies.emulation.mnfabric import release_ports, reserve_ports


def test_a_range_is_added_and_removed_and_other_entries_stay(tmp_path: Path) -> None:
    f = tmp_path / "reserved"
    f.write_text("8080,9000-9010\n")
    entry = reserve_ports(50001, 50008, f)
    assert entry == "50001-50008"
    assert f.read_text().split(",") == ["8080", "9000-9010", "50001-50008"]
    release_ports(entry, f)
    assert f.read_text().split(",") == ["8080", "9000-9010"]


def test_a_range_already_listed_is_not_ours_to_remove(tmp_path: Path) -> None:
    f = tmp_path / "reserved"
    f.write_text("50001-50008\n")
    assert reserve_ports(50001, 50008, f) is None
    assert f.read_text().strip() == "50001-50008"


def test_an_empty_setting_and_an_unwritable_one(tmp_path: Path) -> None:
    f = tmp_path / "reserved"
    f.write_text("\n")
    entry = reserve_ports(50001, 50002, f)
    assert entry is not None and f.read_text() == "50001-50002"
    release_ports(entry, f)
    assert f.read_text().strip() == ""
    assert reserve_ports(50001, 50002, tmp_path / "missing" / "reserved") is None
