"""Fixtures shared by the unit tests: ``pipeline_files``, the compiled ``p4/fabric.p4`` (P4Info
text and tf-switch device config) that the controller tests push to in-process switches."""

from __future__ import annotations

from pathlib import Path

import pytest

from switch.compile.package import load_device_config, make_device_config
from switch.p4info import p4info_text

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def pipeline_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(P4Info path, device config path) of ``p4/fabric.p4``, written once per module."""
    d = tmp_path_factory.mktemp("pipeline")
    cfg = make_device_config(ROOT / "p4" / "fabric.p4")
    (d / "fabric.tfp4.json").write_bytes(cfg)
    (d / "fabric.p4info.txtpb").write_text(p4info_text(load_device_config(cfg).schema))
    return d / "fabric.p4info.txtpb", d / "fabric.tfp4.json"
