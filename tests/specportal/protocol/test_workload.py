"""Workloads and load levels: the textbook documents, and every refusal with its field path."""

from __future__ import annotations

from typing import Any

import pytest

from specportal.protocol import LoadLevel, ProtocolError, Workload, limits


def refusal(read: Any, data: Any, **kw: Any) -> dict[str, list[str]]:
    with pytest.raises(ProtocolError) as caught:
        read(data, **kw)
    return caught.value.fields


def test_a_workload_reads_with_the_load_generators_defaults_left_as_none() -> None:
    workload = Workload.from_dict({"name": "chat", "input_len": 512, "output_len": 128})
    assert workload == Workload(name="chat", input_len=512, output_len=128)
    assert workload.to_dict() == {
        "schema_version": 1,
        "name": "chat",
        "dataset_name": "random",
        "dataset_path": None,
        "input_len": 512,
        "output_len": 128,
        "range_ratio": None,
        "category": None,
        "ignore_eos": False,
        "endpoint_kind": None,
        "runner": "specportal",
    }
    assert Workload.from_dict(workload.to_dict()) == workload


def test_every_field_of_a_workload_round_trips() -> None:
    workload = Workload(
        name="code-file",
        dataset_name="jsonl",
        dataset_path="/data/code.jsonl",
        input_len=2048,
        output_len=256,
        range_ratio=0.25,
        category="code",
        ignore_eos=True,
        endpoint_kind="openai-chat",
    )
    assert Workload.from_dict(workload.to_dict()) == workload


def test_an_integral_float_is_read_as_an_integer() -> None:
    assert Workload.from_dict({"name": "w", "output_len": 64.0}).output_len == 64


@pytest.mark.parametrize(
    ("data", "path", "message"),
    [
        ({"name": "w", "output_len": "abc"}, "workloads.0.output_len", "must be an integer"),
        ({"name": "w", "output_len": -5}, "workloads.0.output_len", "from 1 to 10000000"),
        ({"name": "w", "output_len": True}, "workloads.0.output_len", "not a boolean"),
        ({"name": "w", "input_len": 10**30}, "workloads.0.input_len", "from 1 to 10000000"),
        ({"name": "w", "input_len": 2.5}, "workloads.0.input_len", "must be an integer"),
        ({"name": "w", "endpoint_kind": "bogus"}, "workloads.0.endpoint_kind", "openai-chat"),
        ({"name": "w", "dataset_name": "imagenet"}, "workloads.0.dataset_name", "sharegpt"),
        ({"name": "w", "category": "poetry"}, "workloads.0.category", "summarization"),
        ({"name": "w", "runner": "guidellm"}, "workloads.0.runner", "vllm-bench-serve"),
        ({"name": "w", "range_ratio": 1.0}, "workloads.0.range_ratio", "< 1"),
        ({"name": "w", "range_ratio": float("nan")}, "workloads.0.range_ratio", "finite"),
        ({"name": "w", "ignore_eos": "yes"}, "workloads.0.ignore_eos", "true or false"),
        ({"name": "w", "dataset_name": "jsonl"}, "workloads.0.dataset_path", "required"),
        (
            {"name": "w", "dataset_path": "/x.jsonl"},
            "workloads.0.dataset_path",
            "only for the file datasets",
        ),
        (
            {"name": "w", "dataset_name": "jsonl", "dataset_path": "/a\x00b"},
            "workloads.0.dataset_path",
            "NUL",
        ),
        (
            {"name": "w", "dataset_name": "jsonl", "dataset_path": "/a\ud800"},
            "workloads.0.dataset_path",
            "surrogate",
        ),
        (
            {"name": "w", "runner": "vllm-bench-serve", "dataset_name": "bundled"},
            "workloads.0.dataset_name",
            "random dataset only",
        ),
        (
            {"name": "w", "runner": "vllm-bench-serve", "endpoint_kind": "openai-chat"},
            "workloads.0.endpoint_kind",
            "chooses its own",
        ),
        ({"name": "w", "input_length": 5}, "workloads.0.input_length", "unknown key"),
        ({"name": "w", "schema_version": 9}, "workloads.0.schema_version", "must be 1"),
        ({"name": "no spaces"}, "workloads.0.name", "letters, digits"),
        ({"name": "x" * 101}, "workloads.0.name", "at most 100"),
        ({}, "workloads.0.name", "required"),
    ],
)
def test_a_bad_workload_is_refused_at_its_field(data: Any, path: str, message: str) -> None:
    fields = refusal(Workload.from_dict, data, path="workloads.0")
    assert path in fields, fields
    assert any(message in m for m in fields[path]), fields


def test_the_enum_refusal_names_the_allowed_values() -> None:
    fields = refusal(Workload.from_dict, {"name": "w", "endpoint_kind": "bogus"})
    assert fields == {
        "endpoint_kind": [
            "must be one of openai-completions, openai-chat, llamacpp-openai-completions, "
            "llamacpp-openai-chat, sglang-generate, llamacpp-completion (not 'bogus')"
        ]
    }


def test_a_workload_list_reports_every_problem_of_every_item() -> None:
    fields = refusal(
        Workload.list_from_dicts,
        [{"name": "a", "output_len": "abc"}, {"name": "a"}, "chat", {"name": "b", "x": 1}],
    )
    assert set(fields) == {
        "workloads.0.output_len",
        "workloads.1.name",
        "workloads.2",
        "workloads.3.x",
    }
    assert fields["workloads.1.name"] == ["'a' is used twice"]


@pytest.mark.parametrize("items", [[], {}, None, "chat"])
def test_a_workload_list_must_be_a_non_empty_list(items: Any) -> None:
    assert refusal(Workload.list_from_dicts, items) == {"workloads": ["must be a non-empty list"]}


def test_a_workload_list_is_capped() -> None:
    items = [{"name": f"w{i}"} for i in range(limits.MAX_WORKLOADS + 1)]
    assert refusal(Workload.list_from_dicts, items) == {
        "workloads": [f"at most {limits.MAX_WORKLOADS} items"]
    }


def test_load_levels_read_closed_and_open_loops() -> None:
    loads = LoadLevel.list_from_dicts(
        [
            {"name": "c1", "concurrency": 1, "requests": 50},
            {"name": "r4", "request_rate": 4, "burstiness": 0.5, "duration_s": 60},
        ]
    )
    assert loads == [
        LoadLevel(name="c1", concurrency=1, requests=50),
        LoadLevel(name="r4", request_rate=4.0, burstiness=0.5, duration_s=60.0),
    ]
    assert loads[0].is_quiet
    assert not loads[1].is_quiet
    assert [LoadLevel.from_dict(x.to_dict()) for x in loads] == loads
    assert loads[1].to_dict() == {
        "schema_version": 1,
        "name": "r4",
        "concurrency": None,
        "request_rate": 4.0,
        "burstiness": 0.5,
        "requests": None,
        "duration_s": 60.0,
    }


@pytest.mark.parametrize(
    ("data", "path", "message"),
    [
        ({"name": "l", "duration_s": -1, "concurrency": 1}, "loads.0.duration_s", "> 0"),
        ({"name": "l", "duration_s": 1e9, "concurrency": 1}, "loads.0.duration_s", "<= 86400"),
        ({"name": "l", "request_rate": -2, "requests": 5}, "loads.0.request_rate", "> 0"),
        ({"name": "l", "request_rate": 0, "requests": 5}, "loads.0.request_rate", "> 0"),
        (
            {"name": "l", "request_rate": float("inf"), "requests": 5},
            "loads.0.request_rate",
            "finite",
        ),
        ({"name": "l", "requests": 10**30}, "loads.0.requests", "from 1 to 1000000"),
        ({"name": "l", "requests": 0}, "loads.0.requests", "from 1 to 1000000"),
        ({"name": "l", "requests": "ten"}, "loads.0.requests", "not a string"),
        ({"name": "l", "requests": 5, "concurrency": 0}, "loads.0.concurrency", "from 1"),
        ({"name": "l", "requests": 5, "concurrency": 2**31}, "loads.0.concurrency", "to 100000"),
        ({"name": "l", "requests": 5, "burstiness": 0}, "loads.0.burstiness", "> 0"),
        ({"name": "l"}, "loads.0", "needs 'requests' or 'duration_s'"),
        ({"name": "l", "duration_s": 30}, "loads.0.duration_s", "a request_rate or a concurrency"),
        ({"name": "l", "requests": 5, "warmup": 3}, "loads.0.warmup", "unknown key"),
    ],
)
def test_a_bad_load_level_is_refused_at_its_field(data: Any, path: str, message: str) -> None:
    fields = refusal(LoadLevel.from_dict, data, path="loads.0")
    assert path in fields, fields
    assert any(message in m for m in fields[path]), fields


def test_problems_past_the_listing_cap_are_counted_not_listed() -> None:
    fields = refusal(
        LoadLevel.list_from_dicts, [{"name": f"l{i}", "requests": -1} for i in range(30)]
    )
    assert len(fields) == 21
    assert fields[""] == ["10 more problems not listed"]


def test_a_load_level_described_after_the_fact_needs_no_extent() -> None:
    loads = LoadLevel.list_from_dicts([{"name": "c8", "concurrency": 8}], measured=False)
    assert loads == [LoadLevel(name="c8", concurrency=8)]
    with pytest.raises(ProtocolError):
        LoadLevel.list_from_dicts([{"name": "c8", "concurrency": 8}])
