"""``tf-switch --yield-when-full``: on by default, off by option or ``$TF_YIELD_WHEN_FULL``, and
anything else refused with the valid values named."""

from __future__ import annotations

import pytest

from switch.daemon import UsageError, parse_args

BASE = ["-i", "1@veth0", "--no-p4"]


def test_on_by_default_and_off_by_option(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TF_YIELD_WHEN_FULL", raising=False)
    assert parse_args(BASE).yield_when_full == "on"
    assert parse_args([*BASE, "--yield-when-full", "off"]).yield_when_full == "off"


def test_the_environment_sets_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_YIELD_WHEN_FULL", "off")
    assert parse_args(BASE).yield_when_full == "off"
    assert parse_args([*BASE, "--yield-when-full", "on"]).yield_when_full == "on"
    monkeypatch.setenv("TF_YIELD_WHEN_FULL", "sometimes")
    with pytest.raises(UsageError, match="use on or off"):
        parse_args(BASE)
