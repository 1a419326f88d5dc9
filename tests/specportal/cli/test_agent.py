"""``specportal agent``: the broker connection it builds (no portal needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specportal.agent import DEFAULT_VISIBILITY_TIMEOUT_SECONDS
from specportal.agent.executor import AgentSettings
from specportal.agent.worker import make_app
from specportal.cli.agent import broker_connection

REDIS_URL = os.environ.get("SPECPORTAL_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def test_a_redis_agent_opens_its_channel_with_the_shared_visibility_timeout(tmp_path: Path) -> None:
    # given the agent's broker settings for Redis with a 2-hour visibility timeout
    url, transport, options = broker_connection(REDIS_URL, tmp_path / "unused", 7200)
    assert transport is None
    assert url == REDIS_URL
    app, _ = make_app(
        AgentSettings(host="gpu-x", portal_url="http://127.0.0.1:9", token="t"),
        broker_url=url,
        transport_options=options,
    )
    # then the Redis channel kombu opens uses it (Redis restores unacked messages after it)
    with app.connection_for_read() as connection:
        assert connection.default_channel.visibility_timeout == 7200
    assert not (tmp_path / "unused").exists()


def test_without_a_broker_url_the_agent_shares_the_embedded_broker_folder(tmp_path: Path) -> None:
    url, transport, options = broker_connection(
        "", tmp_path / "broker", DEFAULT_VISIBILITY_TIMEOUT_SECONDS
    )
    assert url == "filesystem://"
    assert transport == "specportal.embedded_broker:Transport"
    assert options["data_folder_in"] == options["data_folder_out"] == str(tmp_path / "broker/queue")
    assert (tmp_path / "broker" / "queue").is_dir()
    assert "visibility_timeout" not in options


@pytest.mark.parametrize(("env", "expected"), [(None, 6 * 3600), ("900", 900)])
def test_the_agent_takes_the_portals_visibility_timeout_variable(
    monkeypatch: pytest.MonkeyPatch, env: str | None, expected: int
) -> None:
    import argparse

    from specportal.cli import agent

    if env is None:
        monkeypatch.delenv("CELERY_VISIBILITY_TIMEOUT", raising=False)
    else:
        monkeypatch.setenv("CELERY_VISIBILITY_TIMEOUT", env)
    parser = argparse.ArgumentParser()
    agent.add_arguments(parser)
    assert parser.parse_args(["--host", "gpu-x"]).visibility_timeout == expected


def test_the_endpoint_health_timeout_is_an_agent_option_short_by_default() -> None:
    import argparse

    from specportal.cli import agent

    parser = argparse.ArgumentParser()
    agent.add_arguments(parser)
    defaults = parser.parse_args(["--host", "gpu-x"])
    # a dead endpoint fails after a minute; a loading one may take the 15-minute health timeout
    assert (defaults.endpoint_health_timeout, defaults.health_timeout) == (60.0, 900.0)
    given = parser.parse_args(["--host", "gpu-x", "--endpoint-health-timeout", "300"])
    assert given.endpoint_health_timeout == 300.0
    assert "--endpoint-health-timeout" in parser.format_help()


@pytest.mark.parametrize(("env", "expected"), [(None, 600.0), ("45", 45.0), ("0", 0.0)])
def test_the_stall_bound_comes_from_the_environment_or_the_option(
    monkeypatch: pytest.MonkeyPatch, env: str | None, expected: float
) -> None:
    import argparse

    from specportal.cli import agent

    if env is None:
        monkeypatch.delenv("SPECPORTAL_STALL_SECONDS", raising=False)
    else:
        monkeypatch.setenv("SPECPORTAL_STALL_SECONDS", env)
    parser = argparse.ArgumentParser()
    agent.add_arguments(parser)
    assert parser.parse_args(["--host", "gpu-x"]).stall_seconds == expected
    assert parser.parse_args(["--host", "gpu-x", "--stall-seconds", "30"]).stall_seconds == 30.0


@pytest.mark.parametrize("bad", ["-1", "soon", "inf", "nan"])
def test_a_stall_bound_that_is_no_duration_is_refused(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from specportal.cli import agent

    parser = argparse.ArgumentParser(prog="specportal agent")
    agent.add_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--host", "gpu-x", "--stall-seconds", bad])
    assert "argument --stall-seconds:" in capsys.readouterr().err
