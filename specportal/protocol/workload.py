"""``Workload`` and ``LoadLevel`` (DESIGN §3): what is sent, and how hard.

An experiment lists them (``workloads``, ``loads``); every run's spec carries one of each. The
portal reads them with :meth:`Workload.list_from_dicts` and :meth:`LoadLevel.list_from_dicts`
when an experiment is created, so a workload the load generator would refuse on the GPU host is
refused there instead, with the path of the field. Unknown keys are refused: these documents are
written by people, and a misspelt key would otherwise be a silently ignored setting.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from specportal.loadgen.config import DatasetName
from specportal.loadgen.endpoints import ENDPOINT_KINDS, EndpointKind
from specportal.protocol import checks, limits
from specportal.protocol.errors import Problems, join
from specportal.workload.categories import CATEGORIES, Category

WORKLOAD_SCHEMA_VERSION: Final = 1
LOAD_SCHEMA_VERSION: Final = 1

DATASET_NAMES: Final[tuple[DatasetName, ...]] = get_args(DatasetName)
# Datasets read from a file on the GPU host (``dataset_path``).
FILE_DATASETS: Final = frozenset({"jsonl", "sharegpt", "mt-bench"})
Runner = Literal["specportal", "vllm-bench-serve"]
RUNNERS: Final[tuple[Runner, ...]] = get_args(Runner)
NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9._-]+")
WORKLOAD_KEYS: Final = (
    "name",
    "dataset_name",
    "dataset_path",
    "input_len",
    "output_len",
    "range_ratio",
    "category",
    "ignore_eos",
    "endpoint_kind",
    "runner",
)
LOAD_KEYS: Final = ("name", "concurrency", "request_rate", "burstiness", "requests", "duration_s")


def _name(problems: Problems, path: str, value: Any) -> str:
    name = checks.text(problems, path, value, max_length=limits.NAME_MAX_LENGTH, required=True)
    if name is not None and not NAME_PATTERN.fullmatch(name):
        problems.add(path, "required: letters, digits, '-', '_' or '.'")
    return name or ""


def _version(problems: Problems, path: str, data: Mapping[str, Any], current: int) -> None:
    version = data.get("schema_version", current)
    if version != current or isinstance(version, bool):
        problems.add(join(path, "schema_version"), f"must be {current} (this reader's version)")


def _list(items: Any, path: str, maximum: int, problems: Problems) -> list[tuple[str, Any]]:
    """The items of a named list, each with its path, after the list's own checks."""
    if not isinstance(items, list) or not items:
        problems.add(path, "must be a non-empty list")
        return []
    if len(items) > maximum:
        problems.add(path, f"at most {maximum} items")
        return []
    return [(join(path, index), item) for index, item in enumerate(items)]


def _unique_names(items: list[tuple[str, Any]], problems: Problems) -> None:
    seen: set[str] = set()
    for path, item in items:
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name:
            continue
        if name in seen:
            problems.add(join(path, "name"), f"{name!r} is used twice")
        seen.add(name)


@dataclass(frozen=True)
class Workload:
    """Prompts and what is asked of each: the load generator's ``WorkloadSpec`` plus the
    endpoint, ``ignore_eos`` and the runner. ``None`` is the load generator's own default (input
    length 1024, output length 128 for synthetic prompts and the file's own otherwise, range
    ratio 0)."""

    name: str
    dataset_name: DatasetName = "random"
    dataset_path: str | None = None  # jsonl, sharegpt, mt-bench: a file on the GPU host
    input_len: int | None = None
    output_len: int | None = None
    range_ratio: float | None = None
    category: Category | None = None  # bundled: the set to use; synthetic: the tag to send
    ignore_eos: bool = False
    endpoint_kind: EndpointKind | None = None  # None: the engine's default endpoint
    runner: Runner = "specportal"

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": WORKLOAD_SCHEMA_VERSION,
            **{key: getattr(self, key) for key in WORKLOAD_KEYS},
        }

    @classmethod
    def from_dict(cls, data: Any, *, path: str = "") -> Workload:
        problems = Problems()
        workload = cls.read(data, path, problems)
        problems.raise_if_any("The workload")
        assert workload is not None
        return workload

    @classmethod
    def list_from_dicts(cls, items: Any, *, path: str = "workloads") -> list[Workload]:
        """A non-empty list of workloads with distinct names; every problem of every item."""
        problems = Problems()
        listed = _list(items, path, limits.MAX_WORKLOADS, problems)
        read = [cls.read(item, item_path, problems) for item_path, item in listed]
        _unique_names(listed, problems)
        problems.raise_if_any("The workloads")
        return [w for w in read if w is not None]

    @staticmethod
    def upgrade(data: Mapping[str, Any]) -> dict[str, Any]:
        """A workload in this version's keys. Version 1 is the first; documents stored before
        workloads were versioned have no ``schema_version`` and are version 1."""
        return dict(data)

    @classmethod
    def read(cls, data: Any, path: str, into: Problems) -> Workload | None:
        problems = into.child()
        if not isinstance(data, dict):
            problems.add(path, "must be an object")
            return None
        data = cls.upgrade(data)
        _version(problems, path, data, WORKLOAD_SCHEMA_VERSION)
        checks.unknown_keys(problems, path, data, {*WORKLOAD_KEYS, "schema_version"})

        def at(key: str) -> str:
            return join(path, key)

        name = _name(problems, at("name"), data.get("name"))
        dataset = checks.choice(
            problems, at("dataset_name"), data.get("dataset_name"), DATASET_NAMES, default="random"
        )
        dataset_path = checks.text(
            problems,
            at("dataset_path"),
            data.get("dataset_path"),
            max_length=limits.PATH_MAX_LENGTH,
        )
        if dataset in FILE_DATASETS and not dataset_path:
            problems.add(at("dataset_path"), f"required: the {dataset} file on the GPU host")
        elif dataset not in FILE_DATASETS and dataset_path is not None and dataset is not None:
            problems.add(
                at("dataset_path"),
                f"only for the file datasets ({', '.join(sorted(FILE_DATASETS))})",
            )
        input_len, output_len = (
            checks.integer(problems, at(key), data.get(key), minimum=1, maximum=limits.MAX_TOKENS)
            for key in ("input_len", "output_len")
        )
        range_ratio = checks.number(
            problems,
            at("range_ratio"),
            data.get("range_ratio"),
            minimum=0.0,
            maximum=1.0,
            exclusive_maximum=True,
        )
        category = checks.choice(problems, at("category"), data.get("category"), CATEGORIES)
        ignore_eos = checks.boolean(
            problems, at("ignore_eos"), data.get("ignore_eos"), default=False
        )
        endpoint_kind = checks.choice(
            problems, at("endpoint_kind"), data.get("endpoint_kind"), ENDPOINT_KINDS
        )
        runner = checks.choice(
            problems, at("runner"), data.get("runner"), RUNNERS, default="specportal"
        )
        if runner == "vllm-bench-serve":
            # The agent runs vLLM's own client with its random dataset (it knows nothing of
            # SpecPortal's prompt sets or endpoint kinds): anything else would be ignored.
            if dataset is not None and dataset != "random":
                problems.add(
                    at("dataset_name"), "vllm-bench-serve measures the random dataset only"
                )
            if endpoint_kind is not None:
                problems.add(at("endpoint_kind"), "vllm-bench-serve chooses its own endpoint")
        if problems:
            return None
        assert dataset is not None
        assert runner is not None
        return cls(
            name=name,
            dataset_name=dataset,
            dataset_path=dataset_path,
            input_len=input_len,
            output_len=output_len,
            range_ratio=range_ratio,
            category=category,
            ignore_eos=ignore_eos,
            endpoint_kind=endpoint_kind,
            runner=runner,
        )


@dataclass(frozen=True)
class LoadLevel:
    """How requests arrive: a closed loop (``request_rate`` null: as fast as ``concurrency``
    slots free, or all at once without a cap) or an open loop at ``request_rate`` per second
    (Poisson at ``burstiness`` 1, gamma otherwise), for ``requests`` requests or ``duration_s``
    seconds (with both, whichever ends first)."""

    name: str
    concurrency: int | None = None  # None: no cap
    request_rate: float | None = None  # None: closed loop
    burstiness: float = 1.0
    requests: int | None = None
    duration_s: float | None = None

    @property
    def is_quiet(self) -> bool:
        """One request at a time, closed loop: what a single user feels."""
        return self.concurrency == 1 and self.request_rate is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": LOAD_SCHEMA_VERSION,
            **{key: getattr(self, key) for key in LOAD_KEYS},
        }

    @classmethod
    def from_dict(cls, data: Any, *, path: str = "") -> LoadLevel:
        problems = Problems()
        load = cls.read(data, path, problems)
        problems.raise_if_any("The load level")
        assert load is not None
        return load

    @classmethod
    def list_from_dicts(
        cls,
        items: Any,
        *,
        path: str = "loads",
        measured: bool = True,
        max_requests: int = limits.MAX_REQUESTS_PER_RUN,
    ) -> list[LoadLevel]:
        """``measured=False``: levels described after the fact (an imported file's), which need
        no ``requests`` or ``duration_s``. ``max_requests``: a stricter cap than the protocol's
        (the portal's setting)."""
        problems = Problems()
        listed = _list(items, path, limits.MAX_LOADS, problems)
        read = [
            cls.read(item, item_path, problems, measured=measured, max_requests=max_requests)
            for item_path, item in listed
        ]
        _unique_names(listed, problems)
        problems.raise_if_any("The load levels")
        return [x for x in read if x is not None]

    @staticmethod
    def upgrade(data: Mapping[str, Any]) -> dict[str, Any]:
        """A load level in this version's keys (version 1 is the first; see ``Workload``)."""
        return dict(data)

    @classmethod
    def read(
        cls,
        data: Any,
        path: str,
        into: Problems,
        *,
        measured: bool = True,
        max_requests: int = limits.MAX_REQUESTS_PER_RUN,
    ) -> LoadLevel | None:
        problems = into.child()
        if not isinstance(data, dict):
            problems.add(path, "must be an object")
            return None
        data = cls.upgrade(data)
        _version(problems, path, data, LOAD_SCHEMA_VERSION)
        checks.unknown_keys(problems, path, data, {*LOAD_KEYS, "schema_version"})

        def at(key: str) -> str:
            return join(path, key)

        name = _name(problems, at("name"), data.get("name"))
        concurrency = checks.integer(
            problems,
            at("concurrency"),
            data.get("concurrency"),
            minimum=1,
            maximum=limits.MAX_CONCURRENCY,
        )
        rate = checks.number(
            problems,
            at("request_rate"),
            data.get("request_rate"),
            minimum=0.0,
            exclusive_minimum=True,
            maximum=limits.MAX_REQUEST_RATE,
        )
        burstiness = checks.number(
            problems,
            at("burstiness"),
            data.get("burstiness"),
            minimum=0.0,
            exclusive_minimum=True,
            maximum=limits.MAX_BURSTINESS,
            default=1.0,
        )
        requests = checks.integer(
            problems,
            at("requests"),
            data.get("requests"),
            minimum=1,
            maximum=min(max_requests, limits.MAX_REQUESTS_PER_RUN),
        )
        duration = checks.number(
            problems,
            at("duration_s"),
            data.get("duration_s"),
            minimum=0.0,
            exclusive_minimum=True,
            maximum=limits.MAX_DURATION_SECONDS,
        )
        if measured and data.get("requests") is None and data.get("duration_s") is None:
            problems.add(path, "needs 'requests' or 'duration_s'")
        if (
            data.get("duration_s") is not None
            and data.get("request_rate") is None
            and data.get("concurrency") is None
        ):
            # The load generator's rule: with neither, a duration run would send without bound.
            problems.add(
                join(path, "duration_s"), "a duration needs a request_rate or a concurrency cap"
            )
        if problems:
            return None
        assert burstiness is not None
        return cls(
            name=name,
            concurrency=concurrency,
            request_rate=rate,
            burstiness=burstiness,
            requests=requests,
            duration_s=duration,
        )
