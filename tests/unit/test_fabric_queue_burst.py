"""The switches' burst allowance through the fabric experiments' options (no root)."""

from __future__ import annotations

import argparse

import pytest

from experiments.mrc_fabric import FabricParams, add_fabric_args, fabric_params
from topologies.emulation.mnfabric import FabricNetError, SwitchOptions, switch_argv
from topologies.model import FabricSpec, build_fabric


def test_switch_gets_the_burst_allowance_only_when_given() -> None:
    from switch.daemon import QUEUE_BURST_US, parse_args

    leaf = build_fabric(FabricSpec()).switch("p0l0")
    assert "--queue-burst-us" not in switch_argv(leaf, SwitchOptions())
    assert parse_args(switch_argv(leaf, SwitchOptions())).queue_burst_us == QUEUE_BURST_US
    argv = switch_argv(leaf, SwitchOptions(queue_burst_us=16000.0))
    assert argv[argv.index("--queue-burst-us") + 1] == "16000"
    assert argv.index("--queue-burst-us") < argv.index("--no-p4")
    assert parse_args(argv).queue_burst_us == 16000.0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (SwitchOptions(queue_burst_us=-1.0), "0..1000000"),
        (SwitchOptions(queue_burst_us=2e6), "0..1000000"),
        (SwitchOptions(target="bmv2", queue_burst_us=1000.0), "tf-switch option"),
    ],
)
def test_bad_burst_allowance_is_refused(options: SwitchOptions, message: str) -> None:
    with pytest.raises(FabricNetError, match=message):
        options.validate()


def _parse(argv: list[str], d: FabricParams) -> FabricParams:
    ap = argparse.ArgumentParser()
    add_fabric_args(ap, d)
    return fabric_params(ap.parse_args(argv))


def test_experiment_option_reaches_fabric_params() -> None:
    assert _parse([], FabricParams()).queue_burst_us is None
    assert _parse([], FabricParams(queue_burst_us=8000.0)).queue_burst_us == 8000.0
    assert _parse(["--queue-burst-us", "250"], FabricParams()).queue_burst_us == 250.0


@pytest.mark.parametrize("bad", ["-5", "2000000", "soon"])
def test_experiment_option_refuses_bad_values(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        _parse(["--queue-burst-us", bad], FabricParams())
    assert e.value.code == 2
    assert "--queue-burst-us" in capsys.readouterr().err


def test_collisions_default_is_20_mbit_with_the_burst_allowance() -> None:
    from experiments import collisions

    p = collisions.CollisionParams()
    assert p.fabric.link_mbps == collisions.DEFAULT_LINK_MBPS == 20.0
    assert p.fabric.queue_burst_us == collisions.DEFAULT_QUEUE_BURST_US
    d = p.fabric
    assert _parse([], d).queue_burst_us == collisions.DEFAULT_QUEUE_BURST_US
    assert _parse(["--link-mbps", "2"], d).link_mbps == 2.0  # LINK_MBPS still overrides
