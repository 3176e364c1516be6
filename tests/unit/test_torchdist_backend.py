"""The ``tailfabric`` torch.distributed backend on loopback: real ranks (processes), real MRC.

Each test runs the ranks of one scenario of :mod:`tests.unit.torchdist_ranks` as separate
processes and checks their reports: every collective against gloo's (or a locally computed)
result, bad arguments, mismatched sizes, a rank that never joins, a rank killed between
collectives, and DDP with the DBLP communication hook.
"""

from __future__ import annotations

import pathlib

from tests.unit.torchdist_ranks import Rank, run_ranks


def _explain(ranks: list[Rank]) -> str:
    return "\n".join(
        f"rank {r.rank}: exit {r.code} report {r.report}\n{r.stderr[-1500:]}" for r in ranks
    )


def test_every_collective_matches_gloo_on_four_ranks(tmp_path: pathlib.Path) -> None:
    ranks = run_ranks("collectives", 4, tmp_path, timeout_s=120)
    assert all(r.code == 0 and r.report.get("ok") for r in ranks), _explain(ranks)
    assert all(r.report["checked"] >= 70 for r in ranks), _explain(ranks)


def test_bad_arguments_mismatched_sizes_and_a_killed_rank_give_clear_errors(
    tmp_path: pathlib.Path,
) -> None:
    ranks = run_ranks("failures", 3, tmp_path, timeout_s=90, env={"TAILFABRIC_PEER_TIMEOUT_S": "2"})
    survivors, victim = ranks[:2], ranks[2]
    assert victim.code == -9, _explain(ranks)
    assert all(r.code == 0 and r.report.get("ok") for r in survivors), _explain(ranks)
    assert all(r.report["mismatch_s"] < 5.0 for r in survivors), _explain(ranks)
    # the peer timeout is 2 s: noticed within it plus a heartbeat or two
    assert all(r.report["killed_s"] < 6.0 for r in survivors), _explain(ranks)


def test_rank_that_never_joins_fails_init_within_the_timeout(tmp_path: pathlib.Path) -> None:
    ranks = run_ranks("absent", 3, tmp_path, start=[1], timeout_s=60)
    assert all(r.code == 0 and r.report.get("ok") for r in ranks), _explain(ranks)
    assert all(2.5 < r.report["took_s"] < 8.0 for r in ranks), _explain(ranks)


def test_ddp_with_the_dblp_hook_averages_gradients(tmp_path: pathlib.Path) -> None:
    ranks = run_ranks("ddp_hook", 2, tmp_path, timeout_s=90)
    assert all(r.code == 0 and r.report.get("ok") for r in ranks), _explain(ranks)
    for r in ranks:
        rounds = r.report["rounds"]
        assert len(rounds) == 4, rounds
        # P_low while in the first (critical) window, and at least 1 - P delivered
        assert rounds[0][1] == 0.008, rounds
        assert all(frac >= 1 - bound for _, bound, frac in rounds), rounds
        assert r.report["checked"] >= 1, r.report
