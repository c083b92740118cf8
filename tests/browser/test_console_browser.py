"""The admin console in a real browser (Chromium via Playwright) against `kbgate serve`."""

from __future__ import annotations

import re

from playwright.sync_api import Dialog, Page, expect

from tests.browser.conftest import HOSTILE_NAME, HOSTILE_TITLE, SCREENSHOTS, Site


def sign_in(page: Page, site: Site, key: str) -> None:
    page.goto(f"{site.url}/console")
    expect(page).to_have_url(f"{site.url}/console/login")
    page.get_by_label("Admin key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{site.url}/console/settings")


def shot(page: Page, name: str) -> None:
    page.screenshot(path=SCREENSHOTS / f"{name}.png", full_page=True)


def test_sign_in_then_toggle_strict_isolation_and_see_it_in_force(page: Page, site: Site) -> None:
    """Signing in with the admin key opens the settings; turning strict isolation off changes
    the effective value and its rule, and the change shows in the history with the key id."""
    page.goto(f"{site.url}/console/login")
    shot(page, "01-sign-in")
    sign_in(page, site, site.home.admin_key)
    assert site.home.admin_key not in page.url
    strict = page.locator("#setting-strict_rag_isolation")
    expect(strict.locator("[data-effective]")).to_have_text("on")
    expect(strict.locator(".rule")).to_contain_text("created on or after 2026-05-25")

    strict.get_by_role("button", name="Turn off").click()
    expect(page.get_by_role("status")).to_contain_text("strict_rag_isolation is now off")
    strict = page.locator("#setting-strict_rag_isolation")
    expect(strict.locator("[data-effective]")).to_have_text("off")
    expect(strict.locator(".rule")).to_have_text("Set by this workspace.")
    shot(page, "02-settings")

    page.get_by_role("link", name="History").click()
    row = page.locator("#history tbody tr").first
    expect(row).to_contain_text("strict_rag_isolation")
    expect(row).to_contain_text("key_")
    expect(row.locator("td").nth(4)).to_have_text("off")
    shot(page, "06-history")

    page.goto(f"{site.url}/console/settings")  # leave the workspace as it was
    page.locator("#setting-strict_rag_isolation").get_by_role("button", name="Use default").click()
    expect(page.locator('[data-effective="strict_rag_isolation"]')).to_have_text("on")


def test_kb_top_k_is_validated_then_saved(page: Page, site: Site) -> None:
    """A top_k of 0 shows the API's rule at the field and stores nothing; 5 is saved, in force."""
    sign_in(page, site, site.home.admin_key)
    page.get_by_role("link", name="Knowledge bases").click()
    handbook = page.locator('section.kb[data-kb="handbook"]')
    expect(handbook.locator('[data-stat="documents"]')).to_have_text("1")
    handbook.get_by_label("top_k").fill("0")
    handbook.get_by_role("button", name="Save").click()

    handbook = page.locator('section.kb[data-kb="handbook"]')
    expect(handbook.locator('[data-error-for="top_k"]')).to_have_text("must be at least 1")
    expect(handbook.get_by_label("top_k")).to_have_attribute("aria-invalid", "true")
    expect(handbook.locator('[data-effective="top_k"]')).to_have_text("8")
    handbook.scroll_into_view_if_needed()
    shot(page, "03-knowledge-bases-invalid")

    handbook.get_by_label("top_k").fill("5")
    handbook.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_contain_text("Saved the settings of handbook")
    handbook = page.locator('section.kb[data-kb="handbook"]')
    expect(handbook.locator('[data-effective="top_k"]')).to_have_text("5")
    expect(handbook.locator('[data-error-for="top_k"]')).to_have_count(0)
    shot(page, "03-knowledge-bases")


def test_agents_show_their_ordered_kbs_and_which_fall_beyond_the_cap(
    page: Page, site: Site
) -> None:
    """With the default cap of 3, the agent's fourth knowledge base is marked as skipped."""
    sign_in(page, site, site.home.admin_key)
    page.get_by_role("link", name="Agents").click()
    attached = page.locator('section.agent[data-agent="helpdesk"] ol.attached li')
    expect(attached).to_have_count(4)
    for index in range(3):
        expect(attached.nth(index)).to_contain_text("queried")
    expect(attached.nth(3)).to_contain_text("archive")
    expect(attached.nth(3)).to_contain_text("beyond cap: skipped")
    shot(page, "04-agents")


def test_try_a_question_shows_passages_scores_redaction_and_settings(
    page: Page, site: Site
) -> None:
    """A question returns passages with fused, dense and keyword scores, redaction placeholders
    visible in the text, and the effective settings of the turn."""
    sign_in(page, site, site.home.admin_key)
    page.get_by_role("link", name="Try a question").click()
    page.get_by_label("Agent").select_option("helpdesk")
    page.get_by_label("Question").fill("Who answers questions about paid leave days?")
    page.get_by_role("button", name="Run").click()

    passages = page.locator("article.passage")
    expect(passages.first).to_be_visible()
    leave = passages.filter(has_text="Leave policy")
    expect(leave).to_have_count(1)
    expect(leave.locator(".scores")).to_contain_text(re.compile(r"fused \d\.\d{4}"))
    expect(leave.locator(".scores")).to_contain_text("dense")
    expect(leave.locator(".scores")).to_contain_text("keyword")
    expect(leave.locator("mark.redacted")).to_have_text("<EMAIL_ADDRESS>")
    expect(leave.locator(".passage-text")).not_to_contain_text("hr-team@example.com")
    expect(page.locator("#redaction-summary")).to_contain_text("<EMAIL_ADDRESS>")
    effective = page.locator("#effective")
    expect(effective).to_contain_text("knowledge_bases_skipped")
    expect(effective).to_contain_text(re.compile(r"knowledge_bases_skipped\s*archive"))
    shot(page, "05-try")


def test_markup_in_kb_names_and_document_titles_is_shown_as_text(page: Page, site: Site) -> None:
    """`<img onerror>` in a KB name and `<script>` in a document title appear literally on every
    page that shows them: no dialog fires and no element is injected."""
    dialogs: list[str] = []

    def on_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    sign_in(page, site, site.home.admin_key)
    for path in ("knowledge-bases", "agents"):
        page.goto(f"{site.url}/console/{path}")
        expect(page.get_by_text(HOSTILE_NAME, exact=False).first).to_be_visible()
        assert page.locator("img").count() == 0
    page.goto(f"{site.url}/console/try")
    page.get_by_label("Agent").select_option("helpdesk")
    page.get_by_label("Question").fill("Who approves paid leave requests?")
    page.get_by_role("button", name="Run").click()
    title = page.locator("article.passage .passage-title", has_text="alert('title')")
    expect(title).to_have_text(HOSTILE_TITLE)
    assert page.evaluate("document.scripts.length") == 1  # console.js only
    assert page.locator("img").count() == 0
    page.wait_for_timeout(200)  # an injected handler would have fired by now
    assert dialogs == []
    shot(page, "07-escaped-markup")


def test_another_workspace_key_sees_only_its_own_workspace(page: Page, site: Site) -> None:
    """The rival workspace's admin sees none of this workspace's KBs or agents, and posting this
    workspace's ids from its session answers 404 alike."""
    sign_in(page, site, site.rival.admin_key)
    expect(page.locator("#workspace-id")).to_have_text("acme-rival")
    for path in ("settings", "knowledge-bases", "agents", "history", "try"):
        page.goto(f"{site.url}/console/{path}")
        text = page.locator("body").inner_text()
        for foreign in ("handbook", "Employee handbook", "helpdesk", "acme-support"):
            assert foreign not in text, (path, foreign)
    page.goto(f"{site.url}/console/knowledge-bases")
    expect(page.locator("section.kb")).to_have_count(1)
    shot(page, "08-other-workspace")

    token = page.locator('input[name="csrf_token"]').first.get_attribute("value")
    assert token
    headers = {"Origin": site.url}
    edit = page.request.post(
        f"{site.url}/console/knowledge-bases",
        form={"kb_id": "handbook", "top_k": "1", "csrf_token": token},
        headers=headers,
    )
    ask = page.request.post(
        f"{site.url}/console/try",
        form={"agent_id": "helpdesk", "question": "leave?", "csrf_token": token},
        headers=headers,
    )
    assert edit.status == 404
    assert "no such knowledge base" in edit.text()
    assert ask.status == 404
    assert "no such agent" in ask.text()
