"""The approvals walk in Debian's Chromium over a live server on PostgreSQL, after an experiment
really ran on an emulated host: an experimenter opens a change request from the experiment's page,
a manager finds it in the inbox and approves it, marks it applied, and the deployment page shows
the new configuration and its history. Screenshots go to ``$SPECPORTAL_TEST_OUTPUT``
(default ``var/test-output/pages``): ``approvals-*.png``.

The deployment is a demo deployment (the host is emulated). The verdict is the real one the
portal worker computed and stored (``verdicts``): one repetition cannot decide, so the evidence
rules fail and the manager approves *against the evidence*, with a written justification, which
every page then says.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Browser, Page

from accounts import roles
from approvals import services
from approvals.models import ChangeRequest, Deployment
from tests.approvals.helpers import person
from tests.experiments.test_pages import (
    LOADS,
    OUTPUT,
    PASSWORD,
    WORKLOAD,
    Watch,
    browser,
    login,
    site,
)
from tests.fixtures import OBJECTIVES, Setup
from tests.harness import process_logs, wait_for
from verdicts.selectors import verdict_document, verdict_final_document

__all__ = ["browser", "site"]
pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.timeout(600)]


def _login(browser: Browser, url: str, username: str) -> tuple[Page, Watch]:
    return login(browser, url, username, height=1000)


def _shot(page: Page, name: str) -> None:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(OUTPUT / f"approvals-{name}.png"), full_page=True)


def test_an_experimenter_proposes_a_manager_approves_and_the_deployment_moves(
    setup: Setup, site: dict[str, Any], browser: Browser
) -> None:
    experiment, url = site["experiment"], site["url"]
    manager: User = person("mia", roles.MANAGER)
    manager.set_password(PASSWORD)
    manager.save()
    services.deployment_create(
        user=manager,
        name="chat-demo",
        owner_team="serving",
        configuration=setup.baseline,
        workloads=[copy.deepcopy(WORKLOAD)],
        loads=copy.deepcopy(LOADS),
        objectives=copy.deepcopy(OBJECTIVES),
        is_demo=True,
        description="demo: evidence from emulated hosts",
    )
    wait_for(
        lambda: verdict_final_document(experiment_id=experiment.pk) is not None,
        120,
        "the experiment's stored verdict",
        process_logs(site["processes"]),
    )
    verdict = verdict_document(experiment_id=experiment.pk)
    assert verdict is not None
    states = {
        (cell["workload"], cell["load"]): cell["candidates"][0]["state"]
        for cell in verdict["cells"]
    }
    # the experimenter, on the experiment's page, proposes the change
    page, watch = _login(browser, url, setup.experimenter.username)
    page.goto(f"{url}/experiments/{experiment.pk}/")
    page.click("#propose-change")
    page.wait_for_selector("#change-request-form")
    assert "measured 2 of its 2 workload × load cells" in page.inner_text("select[name=deployment]")
    page.fill("textarea[name=reason]", "n-gram keeps every objective at c1 and c4 on chat")
    _shot(page, "propose")
    page.click("#propose-button")
    page.wait_for_selector("#change-request-title")
    cr = ChangeRequest.objects.get()
    assert page.url == f"{url}/change-requests/{cr.pk}/"
    assert page.inner_text("#change-request-state").startswith("open")
    rules = page.locator("#rules li").evaluate_all(
        "items => items.map(i => [i.dataset.rule, i.className])"
    )
    passed = {rule for rule, state in rules if state == "pass"}
    failed = [rule for rule, state in rules if state == "fail"]
    # the measurement itself is sound evidence ...
    assert passed >= {"finished", "baseline_is_a", "candidate_is_b", "objectives",
                      "lock_before_first_run", "not_emulated", "verdict"}, rules  # fmt: skip
    # ... but one repetition cannot decide: B's verdict is not KEEP in its cells
    assert states
    assert all(state != "KEEP" for state in states.values()), states
    assert failed == ["keep", "keep"], rules
    assert "demo deployment" in page.inner_text("#rules")
    shown = page.locator("#evidence-cells tr[data-cell]").evaluate_all(
        "rows => rows.map(r => [r.dataset.cell, r.querySelector('[data-state]').dataset.state])"
    )
    assert sorted(shown) == sorted([f"{w}/{lo}", s or "pending"] for (w, lo), s in states.items())
    assert "the evidence does not support this change" in page.inner_text("#check-summary")
    assert "/proposal/method" in page.inner_text("#diff")
    # the author has no decision controls, only withdraw
    assert page.locator("#approve-button").count() == 0
    assert page.locator("#withdraw-button").count() == 1
    watch.check("change request page (author)")
    page.close()

    # the manager finds it in the inbox and approves it
    page, watch = _login(browser, url, "mia")
    page.click("#nav-inbox")
    page.wait_for_selector("#inbox")
    row = page.locator(f'#inbox tr[data-request="{cr.pk}"]')
    assert "fail: needs a justification" in row.inner_text()
    _shot(page, "inbox")
    row.locator("a", has_text="decide").click()
    page.wait_for_selector("#approve-button")
    _shot(page, "change-request-open")
    # approving without a justification is refused, and says why
    page.click("#approve-button")
    page.wait_for_selector("#action-error")
    assert page.get_attribute("#action-error", "data-code") == "evidence_insufficient"
    assert ChangeRequest.objects.get().state == ChangeRequest.State.OPEN
    page.fill("textarea[name=justification]", "demo: one repetition shows the walk, not a decision")
    page.click("#approve-button")
    page.wait_for_selector("#apply-button")
    assert page.inner_text("#change-request-state").startswith("approved")
    assert "approved against the evidence" in page.inner_text("#change-request-state")
    assert "approved by mia" in page.inner_text("#change-request-state")
    assert "one repetition shows the walk" in page.inner_text("#against-evidence")
    page.click("#apply-button")
    page.wait_for_selector("#no-controls")
    assert page.inner_text("#change-request-state").startswith("applied")
    _shot(page, "change-request-applied")
    watch.check("change request page (manager)", expected="409 (Conflict)")  # the refusal above

    # the deployment page: the new configuration, its launch command, and the history
    page.click("text=chat-demo")
    page.wait_for_selector("#deployment-name")
    deployment = Deployment.objects.get(name="chat-demo")
    assert deployment.configuration == setup.ngram
    assert setup.ngram.config_hash in page.inner_text("#current-configuration")
    assert "--speculative-config" in page.inner_text("#launch-command")
    history = page.locator("#history li").evaluate_all(
        "items => items.map(i => [i.dataset.configHash, i.className, i.innerText])"
    )
    assert [h[0] for h in history] == [setup.ngram.config_hash, setup.baseline.config_hash]
    assert history[0][1] == "current"
    assert "serving now" in history[0][2]
    assert f"change request #{cr.pk}" in history[0][2]
    assert "approved by mia, applied by mia" in history[0][2]
    assert "approved against the evidence" in history[0][2]
    assert "registered with this configuration" in history[1][2]
    assert (
        page.locator(".audit-events tr[data-action='deployment.configuration_change']").count() == 1
    )
    _shot(page, "deployment")
    # the site-wide audit view, filtered, and its CSV
    page.click("#nav-audit")
    page.select_option("select[name=action]", "change_request.approve")
    page.click("#audit-filters button")
    page.wait_for_selector(".audit-events")
    assert "action=change_request.approve" in page.url
    actions = page.locator(".audit-events tr[data-action]").evaluate_all(
        "rows => rows.map(r => r.dataset.action)"
    )
    assert actions == ["change_request.approve"]
    _shot(page, "audit")
    href = page.locator("#audit-csv").get_attribute("href")
    assert href == "?action=change_request.approve&format=csv"
    csv = page.request.get(f"{url}/audit/{href}")
    lines = csv.text().strip().splitlines()
    assert lines[0].startswith("seq,occurred_at,actor_kind,actor_name")
    assert len(lines) == 2
    assert ",user,mia," in lines[1]
    watch.check("deployment and audit pages")
