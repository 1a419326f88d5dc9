from __future__ import annotations

import pytest

from experiments.planning import estimated_wall_seconds, plan_runs, rotation

WORKLOADS = {"chat": {"output_len": 64}, "code": {"output_len": 64}}
LOADS = {"c1": {"concurrency": 1, "requests": 4}, "c8": {"concurrency": 8, "requests": 16}}


def test_rotation_is_cyclic_per_repetition() -> None:
    arms = ["A", "B", "C"]
    assert [rotation(arms, r) for r in (1, 2, 3, 4)] == [
        ["A", "B", "C"],
        ["B", "C", "A"],
        ["C", "A", "B"],
        ["A", "B", "C"],
    ]


def test_plan_runs_each_cell_repetition_as_a_back_to_back_rotated_block() -> None:
    # given three arms, a 2 × 2 matrix, three repetitions and two hosts
    planned = plan_runs(
        arms=["A", "B", "C"],
        workloads=WORKLOADS,
        loads=LOADS,
        repetitions=3,
        hosts=["h1", "h2"],
        fresh_server=False,
    )
    # then every (arm, cell, repetition) runs exactly once, in sequence order
    assert len(planned) == 3 * 4 * 3
    assert [p.sequence for p in planned] == list(range(1, 37))
    assert len({(p.arm, p.cell, p.repetition) for p in planned}) == 36
    # and each block of three is one cell's repetition, rotated by the repetition
    for start in range(0, 36, 3):
        block = planned[start : start + 3]
        assert len({(p.cell, p.repetition) for p in block}) == 1
        assert [p.arm for p in block] == rotation(["A", "B", "C"], block[0].repetition)
        assert [p.position for p in block] == [1, 2, 3]
    # and never all of A before all of B
    first_b = min(p.sequence for p in planned if p.arm == "B")
    last_a = max(p.sequence for p in planned if p.arm == "A")
    assert first_b < last_a


def test_all_arms_of_a_cell_share_one_host_and_cells_spread_over_hosts() -> None:
    planned = plan_runs(
        arms=["A", "B"],
        workloads=WORKLOADS,
        loads=LOADS,
        repetitions=2,
        hosts=["h1", "h2"],
        fresh_server=True,
    )
    hosts_per_cell: dict[str, set[str]] = {}
    for p in planned:
        hosts_per_cell.setdefault(p.cell.name, set()).add(p.host)
    assert all(len(h) == 1 for h in hosts_per_cell.values())
    assert {h for hs in hosts_per_cell.values() for h in hs} == {"h1", "h2"}


def test_estimates_grow_with_requests_and_fresh_servers() -> None:
    warm = plan_runs(
        arms=["A"], workloads=WORKLOADS, loads=LOADS, repetitions=1, hosts=["h"], fresh_server=False
    )
    fresh = plan_runs(
        arms=["A"], workloads=WORKLOADS, loads=LOADS, repetitions=1, hosts=["h"], fresh_server=True
    )
    by_load = {p.cell.load: p.estimated_seconds for p in warm}
    # 4 requests one at a time: 4 rounds; 16 requests eight at a time: 2 rounds (estimates round)
    assert by_load["c1"] == pytest.approx(2 * by_load["c8"], abs=0.2)
    assert all(f.estimated_seconds > w.estimated_seconds for f, w in zip(fresh, warm, strict=True))
    assert estimated_wall_seconds(fresh) == sum(p.estimated_seconds for p in fresh)
