"""What ``specportal ci`` makes of a verdict document (``analysis/VERDICT.md``): the exit status,
the terminal table, JUnit XML for GitLab/Jenkins and the Markdown of a pull-request comment.

Pure functions of the document (and links): nothing here talks to the portal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlsplit
from xml.etree import ElementTree as ET

# Exit statuses, as ``specportal compare``: 0 keep, 1 drop, 3 inconclusive, 2 bad input; and 4
# when the experiment could not be decided for reasons outside the verdict.
KEEP, DROP, BAD_INPUT, INCONCLUSIVE, UNDECIDED = 0, 1, 2, 3, 4


def exit_status(verdict: Mapping[str, Any]) -> tuple[int, str]:
    """(status, one-line reason) from the candidates' overall states."""
    states = {c["arm"]: c.get("state") for c in verdict.get("candidates", [])}
    decided = {arm: s for arm, s in states.items() if s is not None}
    if not decided:
        return UNDECIDED, "no candidate has an objective in scope: nothing was decided"
    drops = sorted(a for a, s in decided.items() if s == "DROP")
    if drops:
        return DROP, f"DROP: {', '.join(drops)}"
    unsure = sorted(a for a, s in decided.items() if s == "INCONCLUSIVE")
    if unsure:
        return INCONCLUSIVE, f"INCONCLUSIVE: {', '.join(unsure)} (more runs needed)"
    return KEEP, f"KEEP: {', '.join(sorted(decided))}"


def _cells(verdict: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    return [(c["workload"], c["load"], cand) for c in verdict.get("cells", [])
            for cand in c.get("candidates", [])]  # fmt: skip


def _needed(entry: Mapping[str, Any]) -> str:
    """``runs_needed`` is the size of a new experiment that would likely decide (power 0.8), in
    repetitions per arm: never runs added to this one (analysis/VERDICT.md)."""
    if entry.get("runs_needed") is not None:
        return f"a new experiment of {entry['runs_needed']} repetitions per arm would likely decide"
    if entry.get("runs_needed_at_least") is not None:
        return (f"a new experiment needs at least {entry['runs_needed_at_least']} repetitions "
                "per arm to decide")  # fmt: skip
    return "repetitions needed unknown"


def table(verdict: Mapping[str, Any]) -> str:
    rows = [("candidate", "cell", "state", "note")]
    for workload, load, entry in _cells(verdict):
        state = entry.get("state") or "out of scope"
        note = _needed(entry) if state == "INCONCLUSIVE" else (entry.get("reasons") or [""])[0]
        rows.append((entry["arm"], f"{workload}/{load}", state, note[:100]))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(r[i].ljust(widths[i]) for i in range(3)) + "  " + r[3] for r in rows]
    overall = [
        f"{c['arm']}: {c.get('state') or 'no verdict'}" for c in verdict.get("candidates", [])
    ]
    lines.append("overall: " + "; ".join(overall))
    if verdict.get("emulated"):
        lines.append(str(verdict.get("emulated_label") or "emulated"))
    if verdict.get("imported"):
        lines.append("some runs were imported from other tools' files: not measured by SpecPortal")
    return "\n".join(lines)


def junit_xml(verdict: Mapping[str, Any], *, experiment_url: str | None = None) -> str:
    """One test case per candidate × cell: DROP a failure with its reasons, INCONCLUSIVE skipped
    with the repetitions needed, KEEP passed; out-of-scope cells are skipped (no verdict).

    Valid for both schemas CI servers' JUnit readers follow (tests/specportal/cli/fixtures/junit):
    the strict Ant "JUnit.xsd" (an attribute-less aggregate; each suite with its package, id,
    zone-less timestamp, hostname, properties, system-out and system-err; at most one outcome
    and nothing else inside a test case) and Jenkins xUnit's junit-10.xsd. So every case's
    reasons go in the suite's system-out, and a case's own outcome carries its reasons as text.
    """
    cases = _cells(verdict)
    failures = sum(1 for _, _, e in cases if e.get("state") == "DROP")
    skipped = sum(1 for _, _, e in cases if e.get("state") != "DROP" and e.get("state") != "KEEP")
    host = urlsplit(experiment_url).hostname if experiment_url else None
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"specportal experiment {verdict.get('experiment_id')}",
        package="specportal",
        id="0",
        timestamp=_junit_timestamp(verdict.get("computed_at")),
        hostname=host or "localhost",
        tests=str(len(cases)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
        time="0",
    )
    props = ET.SubElement(suite, "properties")
    facts = {
        "experiment_url": experiment_url,
        "experiment_id": verdict.get("experiment_id"),
        "verdict_id": verdict.get("verdict_id"),
        "analysis_version": verdict.get("analysis_version"),
        "objectives_sha256": verdict.get("objectives_sha256"),
        "emulated": verdict.get("emulated_label") if verdict.get("emulated") else None,
    }
    for key, value in facts.items():
        if value is not None:
            ET.SubElement(props, "property", name=key, value=str(value))
    out: list[str] = []
    for workload, load, entry in cases:
        name = f"{entry['arm']} {workload}/{load}"
        case = ET.SubElement(suite, "testcase", classname=f"specportal.{entry['arm']}",
                             name=name, time="0")  # fmt: skip
        reasons = "\n".join(entry.get("reasons") or [])
        state = entry.get("state")
        if state == "DROP":
            first = (entry.get("reasons") or ["DROP"])[0]
            ET.SubElement(case, "failure", message=first[:500], type="DROP").text = reasons
        elif state == "INCONCLUSIVE":
            outcome = ET.SubElement(case, "skipped", message=f"INCONCLUSIVE: {_needed(entry)}")
            outcome.text = reasons or None
        elif state is None:
            outcome = ET.SubElement(case, "skipped", message="out of scope: no objective applies")
            outcome.text = reasons or None
        out.append(f"{name}: {state or 'out of scope'}\n{reasons}".rstrip())
    ET.SubElement(suite, "system-out").text = "\n\n".join(out)
    ET.SubElement(suite, "system-err")
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )


def _junit_timestamp(computed_at: object) -> str:
    """The verdict's time in UTC to the second, without a zone (the Ant schema's pattern)."""
    try:
        moment = datetime.fromisoformat(str(computed_at))
    except ValueError:
        moment = datetime.now(UTC)
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S")


def markdown(
    verdict: Mapping[str, Any], *, portal_url: str, experiment_id: int | None,
    context: Mapping[str, Any] | None = None, change_request: Mapping[str, Any] | None = None,
) -> str:  # fmt: skip
    base = portal_url.rstrip("/")
    link = f"{base}/experiments/{experiment_id}/" if experiment_id is not None else base
    code, reason = exit_status(verdict)
    lines = [f"### SpecPortal: {reason}", ""]
    if context:
        lines += [" · ".join(f"{k} `{v}`" for k, v in context.items()), ""]
    lines += [f"Experiment [{experiment_id}]({link})"
              + (f" · **{verdict['emulated_label']}**" if verdict.get("emulated") else ""), ""]  # fmt: skip
    lines += ["| candidate | cell | state | why |", "|---|---|---|---|"]
    for workload, load, entry in _cells(verdict):
        state = entry.get("state") or "out of scope"
        why = _needed(entry) if state == "INCONCLUSIVE" else (entry.get("reasons") or [""])[0]
        # the cell's own page (experiments/<id>/cells/<workload>/<load>/): figures, runs
        cell_link = f"{link}cells/{quote(workload, safe='')}/{quote(load, safe='')}/"
        lines.append(f"| {entry['arm']} | [{workload}/{load}]({cell_link}) | **{state}** | "
                     f"{_md(why)} |")  # fmt: skip
    details = [(w, ld, e) for w, ld, e in _cells(verdict) if e.get("reasons")]
    if details:
        lines += ["", "<details><summary>Reasons, rule by rule</summary>", ""]
        for workload, load, entry in details:
            lines.append(f"**{entry['arm']} {workload}/{load}: {entry.get('state')}**")
            lines += [f"- {_md(r)}" for r in entry["reasons"]]
            lines.append("")
        lines.append("</details>")
    if change_request:
        check = change_request.get("evidence_check") or {}
        lines += ["", f"Change request [{change_request['id']}]"
                  f"({base}/change-requests/{change_request['id']}/) {change_request['state']} "
                  f"on deployment `{change_request['deployment']}`: the evidence rules "
                  + ("pass." if check.get("passed") else "fail (see the request).")]  # fmt: skip
    if verdict.get("imported"):
        lines += [
            "",
            "Some runs were imported from other tools' files: not measured by SpecPortal.",
        ]
    del code
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def progress_line(runs: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    done = sum(1 for r in runs if r.get("status") in ("done", "failed", "incomplete", "cancelled"))
    return done, len(runs)
