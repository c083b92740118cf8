"""The PII allow-list and entity types on the console's settings page, in a real browser."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import Site
from tests.browser.test_console_browser import shot, sign_in


def test_the_allow_list_is_edited_as_lines_and_a_bad_pattern_is_shown_at_its_field(
    page: Page, site: Site
) -> None:
    """A pattern that does not compile is refused at the allow-list's field, and nothing is
    stored; valid lines are saved and shown in force; every entity type has a recognizer."""
    sign_in(page, site, site.home.admin_key)
    card = page.locator("#setting-pii_allow_list")
    expect(card.locator(".rule")).to_contain_text("Not set")
    expect(page.locator("[data-not-loaded]")).to_have_count(0)

    card.get_by_label("Values and patterns to keep").fill("127.0.0.0/8\nre:(unclosed")
    card.get_by_role("button", name="Save").click()
    card = page.locator("#setting-pii_allow_list")
    expect(card.locator(".field-error")).to_contain_text("not a regular expression")
    expect(card.locator("[data-effective]")).to_have_text("none")

    card.get_by_label("Values and patterns to keep").fill("127.0.0.0/8\nsupport@acme.com")
    card.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_contain_text("pii_allow_list is now")
    card = page.locator("#setting-pii_allow_list")
    expect(card.locator("[data-effective]")).to_have_text("127.0.0.0/8, support@acme.com")
    expect(card.locator(".rule")).to_contain_text("Set by this workspace")
    card.scroll_into_view_if_needed()
    shot(page, "02-settings-pii-allow-list")

    card.get_by_role("button", name="Use default").click()  # leave the workspace as it was
    expect(page.locator('[data-effective="pii_allow_list"]')).to_have_text("none")


def test_each_types_operator_is_chosen_from_a_list_and_shown_in_force(
    page: Page, site: Site
) -> None:
    """Every type offers replace, mask and pseudonym, `replace` selected while nothing is
    set; choosing pseudonym for PERSON and mask for EMAIL_ADDRESS saves them and shows them
    in force; "Use default" returns every type to `replace`."""
    sign_in(page, site, site.home.admin_key)
    card = page.locator("#setting-pii_operators")
    expect(card.locator("[data-effective]")).to_have_text("replace for every type")
    expect(card.locator(".rule")).to_contain_text("Not set")
    person = card.locator('select[data-operator="PERSON"]')
    expect(person).to_have_value("replace")
    expect(person.locator("option")).to_have_text(["replace", "mask", "pseudonym"])

    person.select_option("pseudonym")
    card.locator('select[data-operator="EMAIL_ADDRESS"]').select_option("mask")
    card.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_contain_text("pii_operators is now")
    card = page.locator("#setting-pii_operators")
    expect(card.locator("[data-effective]")).to_have_text("EMAIL_ADDRESS: mask, PERSON: pseudonym")
    expect(card.locator('select[data-operator="PERSON"]')).to_have_value("pseudonym")
    expect(card.locator(".rule")).to_contain_text("Set by this workspace")
    card.scroll_into_view_if_needed()
    shot(page, "02-settings-pii-operators")

    card.get_by_role("button", name="Use default").click()  # leave the workspace as it was
    expect(page.locator('[data-effective="pii_operators"]')).to_have_text("replace for every type")


def test_try_shows_why_a_span_was_hidden_and_allows_its_value(page: Page, site: Site) -> None:
    """Under a passage, *Why … hidden* lists the hidden value with its type and recognizer;
    *Allow* puts it on the allow-list, and the same question then shows it in the passage."""
    sign_in(page, site, site.home.admin_key)
    page.get_by_role("link", name="Try a question").click()
    page.get_by_label("Agent").select_option("helpdesk")
    page.get_by_label("Question").fill("Who answers questions about paid leave days?")
    page.get_by_role("button", name="Run").click()
    leave = page.locator("article.passage").filter(has_text="Leave policy")
    why = leave.locator("details.hidden-spans")
    why.locator("summary").click()
    row = why.locator("tr", has_text="hr-team@example.com")
    expect(row).to_contain_text("EMAIL_ADDRESS")
    expect(row).to_contain_text("OfflineEmailRecognizer")
    shot(page, "05-try-why-hidden")

    row.get_by_role("button", name="Allow").click()
    expect(page.get_by_role("status")).to_contain_text("Added to the allow-list")
    page.get_by_label("Agent").select_option("helpdesk")
    page.get_by_label("Question").fill("Who answers questions about paid leave days?")
    page.get_by_role("button", name="Run").click()
    leave = page.locator("article.passage").filter(has_text="Leave policy")
    expect(leave).to_contain_text("hr-team@example.com")

    page.goto(f"{site.url}/console/settings")  # leave the workspace as it was
    card = page.locator("#setting-pii_allow_list")
    card.get_by_role("button", name="Use default").click()
    expect(page.locator('[data-effective="pii_allow_list"]')).to_have_text("none")
