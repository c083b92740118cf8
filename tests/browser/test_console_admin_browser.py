"""Administering through the console in a real browser (Chromium via Playwright) against
`kbgate serve`: from sign-in to an answered question with nothing but the console."""

from __future__ import annotations

import re

from playwright.sync_api import FilePayload, Page, expect

from tests.browser.conftest import Site
from tests.browser.test_console_browser import shot, sign_in

TRAVEL_HTML = (
    '<html><head><meta charset="iso-8859-1"><title>Travel policy</title></head><body>'
    "<h1>Travel policy</h1><p>Employees fly business class on flights longer than six hours; "
    "the café voucher covers one meal a day.</p></body></html>"
).encode("latin-1")
EXPENSES_MD = (
    b"# Expenses\n\nReceipts are submitted within thirty days through the finance portal.\n"
)


def create_kb(page: Page, site: Site, kb_id: str, name: str) -> None:
    page.get_by_role("link", name="Knowledge bases").click()
    create = page.locator("#create-kb")
    create.get_by_label("Id").fill(kb_id)
    create.get_by_label("Name").fill(name)
    create.get_by_role("button", name="Create").click()
    expect(page).to_have_url(f"{site.url}/console/documents?kb_id={kb_id}")
    expect(page.get_by_role("status").first).to_contain_text(f"Created the knowledge base {kb_id}")


def upload_two_files(page: Page) -> None:
    """Upload the two files at once; each gets its outcome, the progress line the totals."""
    files: list[FilePayload] = [
        {"name": "travel policy.html", "mimeType": "text/html", "buffer": TRAVEL_HTML},
        {"name": "expenses.md", "mimeType": "text/markdown", "buffer": EXPENSES_MD},
    ]
    page.get_by_label("Files").set_input_files(files)
    page.get_by_role("button", name="Upload").click()
    progress = page.locator("#upload-progress")
    expect(progress).to_contain_text("Done, 2 files: 2 indexed, 0 unchanged, 0 held back, 0 failed")
    results = page.locator("#upload-results li")
    expect(results).to_have_count(2)
    expect(results.nth(0)).to_contain_text("travel policy.html")
    expect(results.nth(0)).to_contain_text("indexed")
    expect(results.nth(0)).to_contain_text("travel-policy.html")
    shot(page, "09-upload")
    progress.get_by_role("link", name="Show the updated document list").click()
    expect(page.locator("#documents tbody tr")).to_have_count(2)


def create_agent(page: Page, agent_id: str, kb_name: str) -> None:
    page.get_by_role("link", name="Agents").click()
    agent = page.locator("#create-agent")
    agent.get_by_role("textbox", name=re.compile("^Id")).fill(agent_id)
    agent.get_by_label(re.compile(kb_name)).check()
    agent.get_by_role("button", name="Create").click()
    expect(page.get_by_role("status").first).to_contain_text(f"Created the agent {agent_id}")


def ask(page: Page, agent_id: str, question: str) -> None:
    page.get_by_role("link", name="Try a question").click()
    page.get_by_label("Agent").select_option(agent_id)
    page.get_by_label("Question").fill(question)
    page.get_by_role("button", name="Run").click()


def test_sign_in_create_a_kb_upload_two_files_and_ask_a_question(page: Page, site: Site) -> None:
    """An admin creates a knowledge base, uploads two files at once (a latin-1 HTML page and
    a Markdown file) and sees each file's outcome and a progress line, creates an agent on
    it, asks a question and sees the passage; an off-topic question is shown as an
    abstention (not a success); a document is deleted after a confirmation; History lists
    each change with the key id."""
    sign_in(page, site, site.home.admin_key)
    create_kb(page, site, "guide", "Travel guide")
    upload_two_files(page)
    create_agent(page, "travel", "Travel guide")

    ask(page, "travel", "Which class do employees fly on long flights?")
    passage = page.locator("article.passage").first
    expect(passage.locator(".passage-title")).to_have_text("Travel policy")
    expect(passage).to_contain_text("business class on flights longer than six hours")
    expect(passage).to_contain_text("café voucher")
    shot(page, "10-try-new-kb")

    ask(page, "travel", "What is the boiling point of mercury in kelvin?")
    expect(page.locator("#abstention")).to_contain_text("Abstained:")
    expect(page.locator("#result h2")).to_have_text("Abstained")
    expect(page.locator("p.notice")).to_have_count(0)
    # the amber outcome box, not the green notice; retried until the stylesheet has applied
    expect(page.locator("#abstention")).to_have_css("background-color", "rgb(253, 240, 220)")
    shot(page, "11-abstained")

    page.once("dialog", lambda dialog: dialog.accept())
    page.goto(f"{site.url}/console/documents?kb_id=guide")
    page.locator('tr[data-document="expenses.md"]').get_by_role("button", name="Delete").click()
    expect(page.get_by_role("status").first).to_contain_text("Deleted expenses.md")
    expect(page.locator("#documents tbody tr")).to_have_count(1)

    page.get_by_role("link", name="History").click()
    rows = page.locator("#admin-history tbody tr")
    expect(rows.first).to_contain_text("agent travel")
    expect(rows.first).to_contain_text("created")
    expect(rows.first).to_contain_text("key_")
    expect(page.locator('#admin-history tr[data-object="guide"]')).to_contain_text("created")
    shot(page, "12-history")


def test_bad_input_is_explained_in_plain_words_and_stays_typed(page: Page, site: Site) -> None:
    """A knowledge base id with a space and a cap of "lots" are refused with a sentence at the
    field (no decoder message) and the typed value is still in the field."""
    sign_in(page, site, site.home.admin_key)
    page.get_by_role("link", name="Knowledge bases").click()
    create = page.locator("#create-kb")
    create.get_by_label("Id").fill("travel guide")
    create.get_by_role("button", name="Create").click()
    create = page.locator("#create-kb")
    expect(create.locator('[data-error-for="kb_id"]')).to_contain_text(
        "must be 1-256 characters of letters, digits"
    )
    expect(create.get_by_label("Id")).to_have_value("travel guide")

    page.get_by_role("link", name="Settings").click()
    cap = page.locator("#setting-max_knowledge_bases_per_agent")
    cap.get_by_label("Value").fill("lots")
    cap.get_by_role("button", name="Save").click()
    cap = page.locator("#setting-max_knowledge_bases_per_agent")
    expect(cap.locator(".field-error")).to_have_text(
        "must be a whole number, such as 5, or left empty"
    )
    expect(cap.get_by_label("Value")).to_have_value("lots")
    expect(page.locator("body")).not_to_contain_text("Expected")
    shot(page, "13-plain-validation")


def test_toggles_offer_the_change_the_current_state_allows(page: Page, site: Site) -> None:
    """The redaction gate, on by default, offers only "Turn off"; once off it offers "Turn
    on" and "Use default", and the default brings it back on."""
    sign_in(page, site, site.home.admin_key)
    gate = page.locator("#setting-rag_pii_redaction")
    expect(gate.locator(".toggle")).to_have_attribute("data-state", "on")
    expect(gate.get_by_role("button")).to_have_text(["Turn off"])
    gate.get_by_role("button", name="Turn off").click()
    gate = page.locator("#setting-rag_pii_redaction")
    expect(gate.locator(".toggle")).to_have_attribute("data-state", "off")
    expect(gate.get_by_role("button")).to_have_text(["Turn on", "Use default"])
    shot(page, "14-toggle-off")
    gate.get_by_role("button", name="Use default").click()
    gate = page.locator("#setting-rag_pii_redaction")
    expect(gate.get_by_role("button")).to_have_text(["Turn off"])
