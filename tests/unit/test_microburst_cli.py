"""The DBLP experiments' command lines: the link rate they bring a fabric up at by default
(issue 18: 10× the 20 Mbit/s of before the switches' C data path) and clear errors for bad
options, before any fabric or job starts."""

from __future__ import annotations

import pytest

from experiments import demo, microburst


def test_both_experiments_default_to_the_same_tenfold_link_rate() -> None:
    assert microburst.LINK_MBPS >= 10 * 20.0
    assert microburst.build_parser().parse_args([]).link_mbps == microburst.LINK_MBPS
    assert demo.LINK_MBPS is microburst.LINK_MBPS


@pytest.mark.parametrize("rate", ["0", "-5", "nan"])
def test_a_link_rate_that_is_not_positive_is_refused_with_a_message(
    rate: str, capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    for main in (microburst.main, demo.main):
        code = main(["--network", "emu", "--link-mbps", rate, "--results", str(tmp_path)])
        err = capsys.readouterr().err
        assert code == 2
        assert "--link-mbps must be positive" in err and "Traceback" not in err


@pytest.mark.parametrize("opt", ["--bursts", "--bursts-per-run"])
def test_burst_options_that_are_not_numbers_are_refused_with_a_message(
    opt: str, capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    code = microburst.main(["--network", "emu", opt, "90,lots", "--results", str(tmp_path)])
    assert code == 2
    assert opt in capsys.readouterr().err
