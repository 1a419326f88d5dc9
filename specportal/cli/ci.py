"""``specportal ci``: run an experiment from a CI job and gate on its verdict (Django-free).

``run EXPERIMENT.json --portal URL`` submits the document (one ``Idempotency-Key`` for every
retry of the submission, one for the start), waits with a progress bar on a terminal or one line
per finished run in a log, prints the verdict table and exits 0 keep, 1 drop, 3 inconclusive,
2 bad input, 4 undecided for reasons outside the verdict (runs failed beyond the failure policy,
timeout, portal unreachable after retries) with the reason on one line. ``status|verdict|cancel
ID`` do one thing each. The token comes from ``SPECPORTAL_TOKEN`` only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from specportal.cli import CliError
from specportal.cli import ci_reports as reports

HELP = "run an experiment from CI and gate on its verdict"
FINISHED = ("done", "stopped", "cancelled")
RUN_ENDED = ("done", "failed", "incomplete", "cancelled")
# The run states a portal verdict reads (verdicts.selectors.INPUT_STATES).
VERDICT_INPUTS = ("done", "failed")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    run = sub.add_parser("run", help="submit, start, wait, print the verdict")
    run.add_argument("document", metavar="EXPERIMENT.json")
    run.add_argument("--timeout", type=float, default=6 * 3600, help="seconds (default 6 h)")
    run.add_argument("--poll", type=float, default=5.0, help="seconds between status reads")
    run.add_argument("--keep-running", action="store_true",
                     help="on SIGTERM or timeout leave the experiment running on the portal")  # fmt: skip
    run.add_argument("--junit", metavar="FILE", help="write JUnit XML (GitLab, Jenkins)")
    run.add_argument("--markdown", metavar="FILE", help="write a pull-request comment")
    run.add_argument("--open-change-request", metavar="DEPLOYMENT",
                     help="after a KEEP, open a change request moving DEPLOYMENT to the "
                     "candidate's configuration, the experiment as its evidence "
                     "(one candidate only)")  # fmt: skip
    for name in ("status", "verdict", "cancel"):
        one = sub.add_parser(name, help=f"{name} of experiment ID")
        one.add_argument("experiment", type=int, metavar="ID")
    for p in [run, *(sub.choices[n] for n in ("status", "verdict", "cancel"))]:
        p.add_argument("--portal", required=True, help="the portal's URL")
        if p is not run:
            p.add_argument("--junit", metavar="FILE", default=None, help=argparse.SUPPRESS)
            p.add_argument("--markdown", metavar="FILE", default=None, help=argparse.SUPPRESS)


def _portal(url: str) -> Any:
    from specportal.cli.portal import Portal, PortalError, token_from_environment

    try:
        return Portal(url, token_from_environment())
    except PortalError as exc:
        raise CliError(str(exc)) from None


class Undecided(Exception):
    """Exit 4 with this one-line reason."""


def run(args: argparse.Namespace) -> int:
    from specportal.cli.portal import PortalError, PortalUnreachable

    portal = _portal(args.portal)
    try:
        if args.action == "run":
            return _run(portal, args)
        if args.action == "status":
            experiment = portal.request("GET", f"/api/v1/experiments/{args.experiment}/")
            runs = portal.request("GET", "/api/v1/runs/", params={"experiment": args.experiment})
            done, total = reports.progress_line(runs)
            print(f"experiment {experiment['id']} {experiment['name']!r}: {experiment['status']}, "
                  f"{done}/{total} runs finished")  # fmt: skip
            return 0
        if args.action == "cancel":
            answer = portal.request("POST", f"/api/v1/experiments/{args.experiment}/cancel/")
            print(f"experiment {args.experiment}: {answer.get('status', 'cancelled')}")
            return 0
        return _report_verdict(portal, args, args.experiment, {})
    except PortalError as exc:
        if exc.code == "token_scope":
            # Every write `ci` makes (submit, start, cancel, a change request) is open to a
            # submit-scoped token: a read-only one is the wrong token, not a portal fault.
            raise CliError(f"SPECPORTAL_TOKEN: token lacks the submit scope ({exc})") from None
        raise CliError(
            str(exc), exit_code=2 if 400 <= exc.status < 500 or not exc.status else 4
        ) from None
    except PortalUnreachable as exc:
        raise CliError(str(exc), exit_code=4) from None
    except Undecided as exc:
        raise CliError(str(exc), exit_code=4) from None
    finally:
        portal.close()


def _key(document: bytes, action: str) -> str:
    """The same job retrying the same document reuses the key; another job gets another one."""
    job = os.environ.get("CI_JOB_ID") or os.environ.get("GITHUB_RUN_ID", "") + os.environ.get(
        "GITHUB_RUN_ATTEMPT", ""
    )
    nonce = job or str(os.getpid()) + str(time.time_ns())
    return hashlib.sha256(document + action.encode() + nonce.encode()).hexdigest()[:48]


def _run(portal: Any, args: argparse.Namespace) -> int:
    """SIGTERM (a CI system cancelling the job) is caught from the first request on: one that
    lands while the experiment is being created or started cancels it as soon as it exists,
    instead of killing the command and leaving it running on the hosts."""
    stop: dict[str, int | None] = {"signal": None}

    def on_term(signum: int, frame: FrameType | None) -> None:
        stop["signal"] = signum

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        return _submit_and_gate(portal, args, stop)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _submit_and_gate(portal: Any, args: argparse.Namespace, stop: dict[str, int | None]) -> int:
    try:
        raw = Path(args.document).read_bytes()
        document = json.loads(raw)
    except OSError as exc:
        raise CliError(f"cannot read {args.document}: {exc.strerror}") from None
    except ValueError as exc:
        raise CliError(f"{args.document}: not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise CliError(f"{args.document}: the experiment document must be a JSON object")
    if args.open_change_request:
        _check_change_request_target(portal, args.open_change_request, document)
    start_options = {k: document.pop(k) for k in ("lint_override_reason",) if k in document}
    created = portal.request("POST", "/api/v1/experiments/", json=document, key=_key(raw, "create"))
    experiment_id = int(created["id"])
    print(f"experiment {experiment_id} created: {portal.url}/experiments/{experiment_id}/",
          flush=True)  # fmt: skip
    portal.request("POST", f"/api/v1/experiments/{experiment_id}/start/", json=start_options,
                   key=_key(raw, "start"))  # fmt: skip
    deadline = time.monotonic() + args.timeout
    state, runs = _wait(portal, experiment_id, args, deadline, stop)
    if state["status"] == "stopped":
        raise Undecided(
            f"experiment {experiment_id} stopped: runs failed beyond its failure policy"
        )
    if state["status"] == "cancelled":
        raise Undecided(f"experiment {experiment_id} was cancelled")
    verdict = _verdict_of_every_run(portal, experiment_id, runs, args, deadline)
    change = None
    if args.open_change_request and reports.exit_status(verdict)[0] == reports.KEEP:
        change = _open_change_request(portal, args.open_change_request, created, raw)
    return _report_verdict(
        portal, args, experiment_id, document.get("context") or {}, verdict, change
    )


def _check_change_request_target(portal: Any, deployment: str, document: dict[str, Any]) -> None:
    """Refuse before anything runs: hours of GPU time should not end in "no such deployment"."""
    from specportal.cli.portal import PortalError

    candidates = document.get("candidates")
    if not isinstance(candidates, list) or len(candidates) != 1:
        count = len(candidates) if isinstance(candidates, list) else 0
        raise CliError(
            f"--open-change-request needs an experiment of one candidate (this one has {count}):"
            " with more, which configuration the deployment should move to is not the verdict's"
            " to say"
        )
    try:
        portal.request("GET", f"/api/v1/deployments/{deployment}/")
    except PortalError as exc:
        if exc.status == 404:
            raise CliError(
                f"--open-change-request: no deployment named {deployment!r} on {portal.url}"
            ) from None
        raise


def _open_change_request(
    portal: Any, deployment: str, experiment: dict[str, Any], raw: bytes
) -> dict[str, Any]:
    """The change request "DEPLOYMENT moves to the candidate's configuration", opened at once
    with the experiment as its evidence (the portal checks the evidence rules as it opens)."""
    from specportal.cli.portal import PortalError

    [candidate] = [arm for arm in experiment["arms"] if arm["position"] > 0]
    context = experiment.get("context") or {}
    where = ", ".join(f"{k} {context[k]}" for k in ("pull_request", "commit", "job_url")
                      if context.get(k))  # fmt: skip
    body = {
        "deployment": deployment,
        "to_configuration": candidate["configuration"],
        "reason": f"{candidate['label']} keeps every objective in experiment {experiment['id']}"
        + (f" ({where})" if where else ""),
        "evidence": [experiment["id"]],
        "open": True,
    }
    try:
        change: dict[str, Any] = portal.request(
            "POST", "/api/v1/change-requests/", json=body, key=_key(raw, "change-request")
        )
    except PortalError as exc:
        raise CliError(
            f"KEEP, but the change request to {deployment} was not opened: {exc}"
        ) from None
    check = change.get("evidence_check") or {}
    # rules: {"lines": [{"rule", "passed", "message", ...}], "cells": [...]} (approvals.services)
    lines = (check.get("rules") or {}).get("lines") or []
    failed = [line for line in lines if not line.get("passed")]
    print(f"change request {change['id']} {change['state']} on {deployment}: "
          f"{portal.url}/change-requests/{change['id']}/ (evidence rules "
          + ("pass)" if check.get("passed") else
             f"fail: {'; '.join(str(line.get('message') or line.get('rule')) for line in failed)})"),
          flush=True)  # fmt: skip
    return change


def _verdict_of_every_run(
    portal: Any,
    experiment_id: int,
    runs: list[dict[str, Any]],
    args: argparse.Namespace,
    deadline: float,
) -> dict[str, Any]:
    """The verdict whose inputs include every run that ended done or failed.

    The portal worker recomputes the verdict after the transaction that ended the last run
    commits, so right after the experiment reads as done the stored verdict may still be the one
    before the last run: gating on it would be gating on fewer runs than were measured.
    """
    from specportal.cli.portal import PortalError

    ended = {int(r["id"]) for r in runs if r["status"] in VERDICT_INPUTS}
    if not ended:
        raise Undecided(f"experiment {experiment_id} finished without a measured run")
    while True:
        try:
            verdict: dict[str, Any] = portal.request(
                "GET", f"/api/v1/experiments/{experiment_id}/verdict/"
            )
        except PortalError as exc:
            if exc.status != 404:
                raise
        else:
            if ended <= {int(i) for i in verdict.get("inputs") or [] if str(i).isdigit()}:
                return verdict
        if time.monotonic() > deadline:
            raise Undecided(
                f"timed out after {args.timeout:.0f} s: experiment {experiment_id} finished but "
                "its verdict of every run was not computed yet"
            )
        time.sleep(min(args.poll, 1.0))


def _wait(
    portal: Any,
    experiment_id: int,
    args: argparse.Namespace,
    deadline: float,
    stop: dict[str, int | None],
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Poll until the experiment finishes (its state and its runs then); SIGTERM (``stop``)
    cancels it unless --keep-running; Ctrl-C on a terminal asks first."""
    tty = sys.stdout.isatty()
    seen: set[int] = set()
    while True:
        try:
            experiment = portal.request("GET", f"/api/v1/experiments/{experiment_id}/")
            runs = portal.request("GET", "/api/v1/runs/", params={"experiment": experiment_id})
            _show(runs, seen, tty)
            if experiment["status"] in FINISHED:
                if tty:
                    print(flush=True)
                return dict(experiment), list(runs)
            if stop["signal"] is not None:
                _interrupted(portal, experiment_id, args, "SIGTERM")
            if time.monotonic() > deadline:
                if not args.keep_running:
                    portal.request("POST", f"/api/v1/experiments/{experiment_id}/cancel/")
                raise Undecided(f"timed out after {args.timeout:.0f} s; experiment "
                                f"{experiment_id} {'left running' if args.keep_running else 'cancelled'}")  # fmt: skip
            time.sleep(args.poll)
        except KeyboardInterrupt:
            if tty:
                answer = input(f"\nCancel experiment {experiment_id} on the portal? [y/N] ")
                if answer.strip().lower() not in ("y", "yes"):
                    raise Undecided(
                        f"interrupted; experiment {experiment_id} left running"
                    ) from None
                portal.request("POST", f"/api/v1/experiments/{experiment_id}/cancel/")
                raise Undecided(f"interrupted; experiment {experiment_id} cancelled") from None
            _interrupted(portal, experiment_id, args, "interrupt")


def _interrupted(portal: Any, experiment_id: int, args: argparse.Namespace, what: str) -> None:
    if args.keep_running:
        raise Undecided(f"{what}: experiment {experiment_id} left running (--keep-running)")
    portal.request("POST", f"/api/v1/experiments/{experiment_id}/cancel/")
    raise Undecided(f"{what}: experiment {experiment_id} cancelled")


def _show(runs: list[dict[str, Any]], seen: set[int], tty: bool) -> None:
    done, total = reports.progress_line(runs)
    if tty:
        width = 30
        filled = int(width * done / total) if total else 0
        print(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} runs", end="", flush=True)
        return
    for row in runs:
        if row["status"] in RUN_ENDED and row["id"] not in seen:
            seen.add(row["id"])
            print(f"run {row['id']} {row['arm']} {row['workload']}/{row['load']} repetition "
                  f"{row['repetition']}: {row['status']} ({len(seen)}/{total})", flush=True)  # fmt: skip


def _report_verdict(portal: Any, args: argparse.Namespace, experiment_id: int,
                    context: dict[str, Any], verdict: dict[str, Any] | None = None,
                    change: dict[str, Any] | None = None) -> int:  # fmt: skip
    from specportal.cli.portal import PortalError

    if verdict is None:
        try:
            verdict = portal.request("GET", f"/api/v1/experiments/{experiment_id}/verdict/")
        except PortalError as exc:
            if exc.status == 404:
                raise Undecided(
                    f"experiment {experiment_id} has no verdict on this portal"
                ) from None
            raise
    assert verdict is not None
    print(reports.table(verdict))
    code, reason = reports.exit_status(verdict)
    url = f"{portal.url}/experiments/{experiment_id}/"
    if args.junit:
        Path(args.junit).write_text(
            reports.junit_xml(verdict, experiment_url=url), encoding="utf-8"
        )
    text = reports.markdown(verdict, portal_url=portal.url, experiment_id=experiment_id,
                            context=context, change_request=change)  # fmt: skip
    if args.markdown:
        Path(args.markdown).write_text(text, encoding="utf-8")
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as handle:
            handle.write(text)
    if code == reports.UNDECIDED:
        raise Undecided(reason)
    print(reason, file=sys.stderr)
    return code
