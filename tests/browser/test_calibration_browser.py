"""The console's calibration flow in a real browser (Chromium via Playwright) against
`kbgate serve`: upload a golden set file, run an evaluation, see its plots, apply it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import PLATFORM_KEY, SCREENSHOTS, Site

TENANT = "acme-calibration"
DOCUMENTS = {
    "leave-policy": "Employees accrue 25 days of paid annual leave each year. Unused leave "
    "days carry over until the end of March. Requests for leave are approved by the team lead.",
    "parking": "Staff parking is on level two of the east garage. Visitors park on level one "
    "and register at the front desk. Bicycle racks stand next to the main entrance.",
    "expenses": "Travel expenses are reimbursed within thirty days of submitting receipts. "
    "Hotel costs above 150 euros a night need approval from finance.",
    "security": "Laptops must use full-disk encryption and lock the screen after five minutes. "
    "Report lost devices to the security team within one hour.",
}
QUESTIONS = [
    ("How many days of paid annual leave do employees get?", ["leave-policy"]),
    ("Where is staff parking in the garage?", ["parking"]),
    ("When are travel expenses reimbursed?", ["expenses"]),
    ("Who do I report lost devices to?", ["security"]),
]
OFF_TOPIC = ["Who won the 2014 World Cup?", "How do I bake bread?", "What is a black hole?"]


@pytest.fixture(scope="module")
def admin_key(site: Site) -> str:
    """A workspace of its own with a policies KB of four documents; its admin key."""
    platform = {"Authorization": f"Bearer {PLATFORM_KEY}"}
    with httpx.Client(base_url=site.url, timeout=30.0) as client:
        created = client.post(
            "/v1/orgs/acme/workspaces", json={"tenant_id": TENANT}, headers=platform
        )
        assert created.status_code == 201, created.text
        issued = client.post(
            "/v1/keys",
            json={"org_id": "acme", "tenant_id": TENANT, "roles": ["admin", "ingest"]},
            headers=platform,
        )
        assert issued.status_code == 201, issued.text
        key = str(issued.json()["key"])
        headers = {"Authorization": f"Bearer {key}"}
        kb = client.put("/v1/knowledge-bases/policies", json={"name": "Policies"}, headers=headers)
        assert kb.status_code == 201, kb.text
        for doc_id, text in DOCUMENTS.items():
            written = client.put(
                f"/v1/knowledge-bases/policies/documents/{doc_id}",
                json={"text": text, "classification": "internal"},
                headers=headers,
            )
            assert written.status_code == 200, written.text
    return key


def test_upload_a_golden_set_run_it_see_the_plots_and_apply(
    page: Page, site: Site, admin_key: str, tmp_path: Path
) -> None:
    """A JSON lines golden set uploads through the file field; running it shows progress,
    then the figures, four plots (abstention against each floor, nDCG per channel,
    grounding flags) and the caution that three off-topic questions are few; applying
    writes the recommended floors, which the knowledge bases page then shows as set by the
    KB."""
    golden = tmp_path / "golden.jsonl"
    golden.write_text(
        "".join(
            json.dumps({"question": question, "document_ids": ids}) + "\n"
            for question, ids in QUESTIONS
        )
        + "".join(json.dumps({"question": q}) + "\n" for q in OFF_TOPIC)
    )
    page.goto(f"{site.url}/console/login")
    page.get_by_label("Admin key").fill(admin_key)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("link", name="Calibration").click()
    expect(page.locator("#golden-set [data-golden=none]")).to_be_visible()

    page.get_by_label("Golden set file").set_input_files(golden)
    page.get_by_role("button", name="Upload").click()
    expect(page.get_by_role("status")).to_contain_text("Stored the golden set: 4 questions")
    expect(page.locator("#golden-set [data-golden=summary]")).to_contain_text("4 questions")
    page.screenshot(path=SCREENSHOTS / "20-calibration.png", full_page=True)

    page.get_by_role("button", name="Run evaluation").click()
    expect(page.locator("#evaluation")).to_have_attribute("data-status", "done", timeout=120_000)
    plots = page.locator("figure.plot > svg")
    expect(plots).to_have_count(4)
    for key, lines in (("score_threshold", 2), ("keyword_floor", 2), ("grounding_floor", 3)):
        series = page.locator(f'figure.plot[data-plot="{key}"] polyline.series')
        expect(series).to_have_count(lines)
        expect(series.first).to_have_attribute("points", re.compile(r"^(\d+\.\d,\d+\.\d ?){20,}$"))
    expect(page.locator('figure.plot[data-plot="ndcg"] rect.bar')).to_have_count(8)
    expect(page.locator('#channels [data-channel="dense"]')).to_contain_text("1.000")
    expect(page.locator("#cautions")).to_contain_text("3 off-topic questions")
    recommended = page.locator('#outcomes [data-outcome="recommended"]')
    threshold = recommended.locator('[data-setting="score_threshold"]').inner_text()
    page.screenshot(path=SCREENSHOTS / "21-evaluation.png", full_page=True)

    page.get_by_role("button", name="Apply to policies").click()
    expect(page.get_by_role("status")).to_contain_text("Applied to policies")
    expect(page.locator("[data-applied=yes]")).to_be_visible()
    page.get_by_role("link", name="Knowledge bases").click()
    policies = page.locator('section.kb[data-kb="policies"]')
    expect(policies.locator('[data-effective="score_threshold"]')).to_have_text(threshold)
    page.screenshot(path=SCREENSHOTS / "22-applied.png", full_page=True)
