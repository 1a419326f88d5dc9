"""Client health counts garbage collections and their pauses, and adds up the client processes'."""

from __future__ import annotations

import gc

from specportal.loadgen.health import GcMonitor, client_health, merge_health


def test_the_gc_monitor_times_each_collection_by_generation() -> None:
    monitor = GcMonitor()
    monitor.start()
    try:
        gc.collect(2)
        gc.collect(0)
    finally:
        monitor.stop()
    gc.collect()  # not counted: the monitor is off
    figures = monitor.figures()
    assert figures["collections"][2] >= 1
    assert figures["collections"][0] >= 1
    assert len(figures["pauses"]) == sum(figures["collections"])
    assert all(p >= 0 for p in figures["pauses"])


def test_client_health_reports_reconnects_and_gc_pauses_and_merges_processes() -> None:
    parts = [
        {"reconnects": 2, "gc": {"pauses": [0.001, 0.003], "collections": [2, 0, 0]}},
        {"reconnects": 1, "gc": {"pauses": [0.010], "collections": [0, 0, 1]}},
    ]
    health = client_health([], [0.001, 0.002], merge_health(parts))
    assert health["reconnects"] == 3
    assert health["gc"]["collections"] == {"gen0": 2, "gen1": 0, "gen2": 1}
    assert health["gc"]["pause"]["max_ms"] == 10.0
    assert round(health["gc"]["total_pause_ms"], 6) == 14.0
    assert set(health) >= {"send_lateness", "event_loop_lag", "fell_behind", "fell_behind_reasons"}
    empty = client_health([], [])
    assert empty["reconnects"] == 0
    assert empty["gc"]["collections"] == {"gen0": 0, "gen1": 0, "gen2": 0}
    assert empty["gc"]["pause"]["max_ms"] is None
