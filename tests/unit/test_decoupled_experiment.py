"""``make exp-decoupled`` without a network: the plan (every run's job built and checked before
anything starts; the chaos schedule of a failure rate spread over the members), the summaries
from synthetic rows (goodput over elastic DP's per seed, the loss gap to DiLoCo at equal
tokens, the targets met or missed), the CSVs, the plot (from the CSVs only), the command line's
refusals, and the fabric driver's tables (every chaos action has a row; the hub alone on its
host)."""

from __future__ import annotations

import math
import pathlib

import pytest

from experiments import decoupled as exp
from experiments.decoupled_fabric import ALWAYS, PROCESS_ACTIONS, JobsError, placement
from experiments.decoupled_figures import (
    CURVE_COLUMNS,
    RUN_COLUMNS,
    Outputs,
    loss_at,
    plot,
    report,
    target_lines,
    with_comparisons,
    write_summary,
)
from experiments.outputs import read_rows, write_csv
from host.train.decoupled.chaos import EVENT_ACTIONS, Action
from host.train.decoupled.config import ChaosKind, ConfigError, Weighting


def test_the_plan_builds_every_run_seed_major_with_the_reference_without_failures() -> None:
    s = exp.Settings(seeds=2)
    plan = exp.check_plan(s, "fabric")
    assert len(plan) == 2 * (3 * 4 + 1)  # elastic DP, M = 2, 4, 8 at 3 rates; DiLoCo calm
    assert [p.key.seed for p in plan] == [0] * 13 + [1] * 13
    keys = {(p.key.method, p.key.learners, p.key.rate) for p in plan}
    assert ("diloco", 4, "none") in keys and ("diloco", 4, "heavy") not in keys
    assert {(m, n) for m, n, _r in keys} == {
        ("elastic_dp", 4),
        ("decoupled", 2),
        ("decoupled", 4),
        ("decoupled", 8),
        ("diloco", 4),
    }
    ref = next(p.job for p in plan if p.key.method == "diloco")
    assert isinstance(ref, exp.DecoupledConfig)
    assert (ref.fragments, ref.overlap_steps, ref.syncer.quorum) == (1, 0, 4)
    assert ref.syncer.weighting is Weighting.EQUAL and ref.outer.momentum == 0.9
    dd = next(p.job for p in plan if p.key.method == "decoupled" and p.key.learners == 2)
    assert isinstance(dd, exp.DecoupledConfig)
    assert dd.syncer.quorum == 1 and dd.syncer.anchor is s.anchor and dd.max_wall_s == s.wall_s


def test_a_failure_rate_is_a_cluster_mtbf_spread_over_the_members() -> None:
    s = exp.Settings()
    plan = exp.check_plan(s, "emu")
    none = next(p for p in plan if p.key.rate == "none")
    assert exp.chaos_for(s, none, 4) is None
    heavy = [p for p in plan if p.key.rate == "heavy" and p.key.seed == 0]
    for p in heavy:
        m = exp._members(p.job)
        sched = exp.chaos_for(s, p, m)
        assert sched is not None and sched.targets == m
        assert sched.config.mtbi_s == m * exp.RATES["heavy"].mtbf_s
        assert all(s.chaos_after_s <= e.at_s <= s.wall_s for e in sched.events)
        assert sched == exp.chaos_for(s, p, m)  # seeded: the same schedule every time
    kinds = {e.kind for p in plan if p.key.rate != "none" for e in exp.chaos_for(s, p, 4).events}  # type: ignore[union-attr]
    assert {ChaosKind.KILL, ChaosKind.PAUSE, ChaosKind.SLOW} <= kinds


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--rates", "none,stormy"], "unknown failure rates"),
        (["--learners", "two"], "--learners: integers"),
        (["--learners", "0"], "learners must be >= 1"),
        (["--wall-s", "0"], "wall_s must be positive"),
        (["--task", "chess"], "unknown task 'chess'"),
        (["--seeds", "0"], "seeds must be >= 1"),
        (["--quorum", "0"], "quorum must be >= 1"),
        (["--outer-momentum", "1.5"], "momentum must be in"),
        (["--network", "fabric", "--learners", "2,13"], "13 members need 13 process slots"),
    ],
)
def test_the_command_line_refuses_bad_options_before_anything_runs(
    argv: list[str], match: str, capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    if "--network" not in argv:
        argv = [*argv, "--network", "emu"]
    assert exp.main([*argv, "--results", str(tmp_path)]) == 2
    assert match in capsys.readouterr().err
    assert not (tmp_path / "decoupled.csv").exists()


def test_plot_only_needs_the_csvs(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    assert exp.main(["--plot-only", "--results", str(tmp_path)]) == 1
    assert "run the experiment first" in capsys.readouterr().err


def test_quick_is_one_short_chaos_run_of_each_method() -> None:
    plan = exp.check_plan(exp.QUICK, "fabric")
    assert [(p.key.method, p.key.learners, p.key.rate) for p in plan] == [
        ("elastic_dp", 2, "heavy"),
        ("decoupled", 2, "heavy"),
    ]


# -- summaries from synthetic rows ---------------------------------------------------------------


def _row(
    method: str, m: int, rate: str, seed: int, goodput: float, **kw: object
) -> dict[str, object]:
    base: dict[str, object] = {c: "" for c in RUN_COLUMNS}
    base.update(
        network="emu",
        method=method,
        learners=m,
        failure_rate=rate,
        cluster_mtbf_s=math.inf if rate == "none" else 4.0,
        seed=seed,
        goodput=goodput,
        uptime=kw.pop("uptime", 0.999),
        longest_stall_s=0.1,
        final_loss_nats=0.3,
        status="finished",
    )
    base.update(kw)
    return base


def _curve(
    method: str, m: int, rate: str, seed: int, pts: list[tuple[float, float]]
) -> list[dict[str, object]]:
    return [
        {
            "network": "emu",
            "method": method,
            "learners": m,
            "failure_rate": rate,
            "seed": seed,
            "at_s": t / 100,
            "tokens": t,
            "val_loss_nats": loss,
        }
        for t, loss in pts
    ]


def _synthetic() -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    rows, curve = [], []
    for seed in (0, 1, 2):
        for rate, e, d2, d4 in (("none", 0.9, 0.9, 0.9), ("heavy", 0.5, 0.72, 0.8 + 0.01 * seed)):
            rows.append(_row("elastic_dp", 4, rate, seed, e))
            rows.append(_row("decoupled", 2, rate, seed, d2))
            rows.append(_row("decoupled", 4, rate, seed, d4))
            curve += _curve("decoupled", 4, rate, seed, [(0, 2.0), (1000, 1.0), (2000, 0.51)])
            curve += _curve("elastic_dp", 4, rate, seed, [(0, 2.0), (1500, 0.7)])
        rows.append(_row("diloco", 4, "none", seed, 0.85))
        # DiLoCo took in fewer tokens: compared at its 1,500 (DD's 0.755 vs its 0.75)
        curve += _curve("diloco", 4, "none", seed, [(0, 2.0), (1500, 0.75)])
    return rows, curve


def test_comparisons_pair_runs_of_the_same_seed_and_read_losses_at_equal_tokens() -> None:
    rows, curve = _synthetic()
    out = with_comparisons(rows, curve)
    dd4 = [r for r in out if r["method"] == "decoupled" and r["learners"] == 4]
    heavy = [r["goodput_vs_elastic"] for r in dd4 if r["failure_rate"] == "heavy"]
    assert heavy == pytest.approx([0.8 / 0.5, 0.81 / 0.5, 0.82 / 0.5])
    gaps = [r["loss_gap_to_diloco_pct"] for r in dd4 if r["failure_rate"] == "none"]
    assert gaps == pytest.approx([100 * (0.755 - 0.75) / 0.75] * 3)
    others = [r for r in out if r["method"] != "decoupled" or r["failure_rate"] != "none"]
    assert all(math.isnan(float(str(r["loss_gap_to_diloco_pct"]))) for r in others)
    assert loss_at([(0, 2.0), (10, 1.0)], 5) == 1.5 and math.isnan(loss_at([(0, 2.0)], 5))
    # what failures cost each method: its goodput over its own without failures, same seed
    kept = {
        (r["method"], r["learners"], r["failure_rate"], r["seed"]): r["goodput_kept"] for r in out
    }
    assert kept[("elastic_dp", 4, "heavy", 1)] == pytest.approx(0.5 / 0.9)
    assert kept[("decoupled", 4, "heavy", 2)] == pytest.approx(0.82 / 0.9)
    assert kept[("decoupled", 2, "none", 0)] == pytest.approx(1.0)


def test_the_targets_say_met_or_missed_with_what_was_measured() -> None:
    rows, curve = _synthetic()
    lines = target_lines(with_comparisons(rows, curve))
    text = "\n".join(lines)
    assert "[met] rate 'heavy': Decoupled DiLoCo M=4 goodput >= 1.4x elastic DP's" in text
    assert "[met] rate 'heavy': Decoupled DiLoCo M=2 goodput >= 1.4x" in text  # 0.72/0.5
    assert "[met] rate 'heavy': uptime 100 % for M=4" in text
    assert "[met] rate 'heavy': goodput rising with M: M=2 72.0%, M=4 81.0%" in text
    assert (
        "[met] no failures: final loss within 3 % of DiLoCo's (M=4, equal tokens): +0.67 %" in text
    )
    assert "[met] every run ended with every process stopped: 21 of 21" in text
    worse = [
        {**r, "goodput": 0.6} if r["method"] == "decoupled" and r["failure_rate"] == "heavy" else r
        for r in rows
    ]
    worse[0] = {**worse[0], "status": "learner 1 exited on its own (-9)"}
    text = "\n".join(target_lines(with_comparisons(worse, curve)))
    assert "[MISSED] rate 'heavy': Decoupled DiLoCo M=4 goodput >= 1.4x" in text
    assert "[MISSED] every run ended with every process stopped: 20 of 21" in text


def test_the_report_puts_the_papers_figures_beside_the_measured(tmp_path: pathlib.Path) -> None:
    rows, curve = _synthetic()
    text = report(rows, curve, "header line")
    assert text.splitlines()[1] == "header line"
    assert "failure rate 'heavy' (cluster MTBF 4 s)" in text and "(no failures)" in text
    heavy = text[text.index("failure rate 'heavy'") :]
    assert "elastic DP (4 workers)" in heavy and "goodput 58%" in heavy
    assert "Decoupled DiLoCo M=2" in heavy and "goodput 70%" in heavy
    assert "uptime 100 %" in heavy and "88 %" in text


def test_csvs_summary_and_plot_are_written_from_rows(tmp_path: pathlib.Path) -> None:
    rows, curve = _synthetic()
    where = Outputs(tmp_path / "decoupled.csv")
    write_csv(where.out, RUN_COLUMNS, rows)
    write_csv(where.curve, CURVE_COLUMNS, curve)
    assert read_rows(where.out)[0].keys() == set(RUN_COLUMNS)
    write_summary(read_rows(where.out), read_rows(where.curve), where.summary)
    summary = read_rows(where.summary)
    ratio = next(
        r
        for r in summary
        if (r["method"], r["learners"], r["failure_rate"], r["figure"])
        == ("decoupled", "4", "heavy", "goodput_vs_elastic")
    )
    assert int(ratio["n"]) == 3 and float(ratio["mean"]) == pytest.approx(1.62)
    assert float(ratio["ci95_low"]) < 1.62 < float(ratio["ci95_high"])
    png = plot(where)
    assert png == tmp_path / "decoupled.png" and png.stat().st_size > 10_000
    assert exp.main(["--plot-only", "--results", str(tmp_path)]) == 0


# -- the fabric driver's tables ---------------------------------------------------------------


def test_every_chaos_action_has_a_row_and_every_end_is_applied_at_the_end() -> None:
    assert set(PROCESS_ACTIONS) == set(Action)
    ends = {end for _begin, end in EVENT_ACTIONS.values()}
    assert ALWAYS == ends - {Action.START}  # a kill is not undone after the end


def test_the_hub_is_alone_on_the_last_host_and_members_share_the_others() -> None:
    hosts = ["h1", "h2", "h3", "h4"]
    p = placement(hosts, 8)
    assert p.hub == ("h4", 0)
    assert p.members[:4] == (("h1", 0), ("h2", 0), ("h3", 0), ("h1", 1))
    assert len(set(p.slots)) == 9 and all(h != "h4" for h, _s in p.members)
    with pytest.raises(JobsError, match="two hosts"):
        placement(["h1"], 2)


def test_elastic_dp_re_forms_in_the_configured_number_of_steps() -> None:
    s = exp.Settings(elastic_reconfigure_steps=20, min_step_s=0.05)
    cfg = exp.elastic_config(s, 0)
    assert (
        cfg.reconfigure_s == pytest.approx(1.0)
        and cfg.join_timeout_s > 2 * cfg.reconfigure_s + cfg.rendezvous_timeout_s
    )
    assert exp.elastic_config(exp.Settings(elastic_reconfigure_steps=0), 0).reconfigure_s == 0
    args = exp.build_parser().parse_args(["--elastic-reconfigure-steps", "5"])
    assert exp.settings_from(args).elastic_reconfigure_steps == 5
    with pytest.raises(ConfigError, match="elastic_reconfigure_steps"):
        exp.Settings(elastic_reconfigure_steps=-1)


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="chaos_after_s"):
        exp.Settings(wall_s=1.0)
    with pytest.raises(ConfigError, match="unknown failure rates"):
        exp.Settings(rates=())
