"""A real `kbgate serve` process and Debian's Chromium driven by Playwright (no browser download).

The gateway runs on its embedded defaults in a temporary data dir on a free loopback
port; two workspaces are provisioned over the JSON API. Screenshots of every page go
to `test-artifacts/screenshots/` (CI artifacts, never committed).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

from tests.support.gateway_process import GatewayProcess
from tests.support.services import missing_service

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PLATFORM_KEY = "browser-test-platform-key-0123456789"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
HOSTILE_NAME = "<img src=x onerror=alert(1)>"
HOSTILE_TITLE = "<script>alert('title')</script>"


@dataclass
class Workspace:
    tenant_id: str
    admin_key: str
    kb_ids: list[str] = field(default_factory=list)


@dataclass
class Site:
    url: str
    home: Workspace
    rival: Workspace


def _ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code in {200, 201}, response.text
    body: dict[str, Any] = response.json()
    return body


def _workspace(client: httpx.Client, org_id: str, tenant_id: str) -> Workspace:
    platform = {"Authorization": f"Bearer {PLATFORM_KEY}"}
    _ok(
        client.post(
            f"/v1/orgs/{org_id}/workspaces", json={"tenant_id": tenant_id}, headers=platform
        )
    )
    key = _ok(
        client.post(
            "/v1/keys",
            json={
                "org_id": org_id,
                "tenant_id": tenant_id,
                "roles": ["admin", "ingest", "retrieve"],
            },
            headers=platform,
        )
    )["key"]
    return Workspace(tenant_id=tenant_id, admin_key=key)


def _provision(client: httpx.Client) -> tuple[Workspace, Workspace]:
    platform = {"Authorization": f"Bearer {PLATFORM_KEY}"}
    _ok(client.post("/v1/orgs", json={"org_id": "acme"}, headers=platform))
    home = _workspace(client, "acme", "acme-support")
    rival = _workspace(client, "acme", "acme-rival")
    headers = {"Authorization": f"Bearer {home.admin_key}"}
    for kb_id, name in [
        ("handbook", "Employee handbook"),
        ("hostile", HOSTILE_NAME),
        ("faq", "Frequent questions"),
        ("archive", "Archive 2019"),
    ]:
        _ok(client.put(f"/v1/knowledge-bases/{kb_id}", json={"name": name}, headers=headers))
        home.kb_ids.append(kb_id)
    documents = [
        (
            "handbook",
            "leave-policy",
            "Leave policy",
            "Employees accrue 25 days of paid leave a year. Unused days carry over until "
            "March. Questions about leave go to hr-team@example.com.",
        ),
        (
            "hostile",
            "note",
            HOSTILE_TITLE,
            "Paid leave requests are approved by your team lead within five days.",
        ),
        ("faq", "parking", "Parking", "Staff parking is on level two of the east garage."),
    ]
    for kb_id, doc_id, title, text in documents:
        _ok(
            client.put(
                f"/v1/knowledge-bases/{kb_id}/documents/{doc_id}",
                json={"title": title, "text": text, "classification": "internal"},
                headers=headers,
            )
        )
    _ok(
        client.put(
            "/v1/agents/helpdesk",
            json={"knowledge_base_ids": ["handbook", "hostile", "faq", "archive"]},
            headers=headers,
        )
    )
    rival_headers = {"Authorization": f"Bearer {rival.admin_key}"}
    _ok(
        client.put(
            "/v1/knowledge-bases/rival-kb", json={"name": "Rival notes"}, headers=rival_headers
        )
    )
    _ok(
        client.put(
            "/v1/agents/rival-agent",
            json={"knowledge_base_ids": ["rival-kb"]},
            headers=rival_headers,
        )
    )
    return home, rival


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """`kbgate serve` on embedded defaults with two provisioned workspaces."""
    data_dir = tmp_path_factory.mktemp("console") / "data"
    with GatewayProcess(data_dir, env={"KBGATE_PLATFORM_KEY": PLATFORM_KEY}) as gateway:
        with gateway.client() as client:
            home, rival = _provision(client)
        yield Site(url=gateway.url, home=home, rival=rival)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless; missing: skipped locally, a failure in CI."""
    if not Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is None:
        missing_service("chromium not installed")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    """A fresh browser profile per test: no cookies carried over."""
    fresh = browser.new_context(viewport={"width": 1280, "height": 900})
    fresh.set_default_timeout(15_000)
    try:
        yield fresh
    finally:
        fresh.close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()
