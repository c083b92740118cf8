"""The admin console over HTTP (no browser): headers, session cookie, CSRF, scoping, escaping."""

from __future__ import annotations

import html
import re

import httpx
import pytest

from tests.api.conftest import Gateway
from tests.api.tenants import Tenant, provision

pytestmark = pytest.mark.anyio

HOSTILE_NAME = "<img src=x onerror=alert(1)>"
HOSTILE_TITLE = "<script>alert('title')</script>"
PAGES = ("settings", "knowledge-bases", "agents", "history", "try")
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


async def sign_in(gw: Gateway, key: str) -> httpx.Response:
    gw.client.cookies.clear()
    return await gw.client.post("/console/login", data={"key": key}, follow_redirects=False)


async def csrf_token(gw: Gateway) -> str:
    page = await gw.client.get("/console/settings")
    assert page.status_code == 200, page.text
    found = _CSRF.search(page.text)
    assert found is not None
    return found.group(1)


async def admin(gw: Gateway, tenant_id: str = "ws") -> Tenant:
    tenant = await provision(gw, "acme", tenant_id)
    signed = await sign_in(gw, tenant.keys["all"])
    assert signed.status_code == 303, signed.text
    return tenant


async def test_pages_carry_strict_security_headers_and_no_store(gateway: Gateway) -> None:
    """Every console response (sign-in, pages, errors) has a strict CSP, nosniff, no-referrer
    and no-store."""
    await admin(gateway)
    responses = [
        await gateway.client.get(f"/console/{page}", follow_redirects=False) for page in PAGES
    ]
    responses.append(await gateway.client.get("/console/login"))
    responses.append(await gateway.client.post("/console/settings", data={"setting": "x"}))
    for response in responses:
        headers = response.headers
        csp = headers["content-security-policy"]
        assert "default-src 'self'" in csp
        assert "frame-ancestors 'none'" in csp
        assert "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "no-referrer"
        assert headers["cache-control"] == "no-store"
    assert [r.status_code for r in responses] == [200] * 6 + [403]


async def test_sign_in_sets_a_strict_session_cookie_and_keeps_the_key_out_of_urls_and_logs(
    gateway: Gateway,
) -> None:
    """The cookie is HttpOnly, SameSite=Strict, /console-scoped, session-only and not the key.

    The redirect after sign-in, every link and form action carry no key, and the key
    appears in no log line. Over https the cookie is also Secure.
    """
    tenant = await provision(gateway, "acme", "ws")
    key = tenant.keys["all"]
    response = await sign_in(gateway, key)
    assert response.status_code == 303
    assert response.headers["location"] == "/console/settings"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith("kbgate_console=")
    flags = [part.strip().lower() for part in cookie.split(";")]
    assert "httponly" in flags
    assert "samesite=strict" in flags
    assert "path=/console" in flags
    assert "secure" not in flags  # plain http here
    assert not any(flag.startswith(("max-age", "expires")) for flag in flags)
    assert key not in cookie
    for page in PAGES:
        html = (await gateway.client.get(f"/console/{page}")).text
        assert key not in html
        for url in re.findall(r'(?:href|action|src)="([^"]*)"', html):
            assert key not in url
            assert "key=" not in url
    assert key not in gateway.logs.getvalue()

    gateway.client.base_url = httpx.URL("https://testserver.local")
    secure = await sign_in(gateway, key)
    assert "secure" in [part.strip().lower() for part in secure.headers["set-cookie"].split(";")]


async def test_a_new_session_id_at_every_sign_in_and_sign_out_ends_it(gateway: Gateway) -> None:
    """Signing in again issues a fresh session id; after sign-out the old cookie opens nothing."""
    tenant = await provision(gateway, "acme", "ws")
    first = (await sign_in(gateway, tenant.keys["all"])).cookies["kbgate_console"]
    second = await gateway.client.post(
        "/console/login", data={"key": tenant.keys["all"]}, follow_redirects=False
    )
    assert second.cookies["kbgate_console"] != first
    token = await csrf_token(gateway)
    out = await gateway.client.post(
        "/console/logout", data={"csrf_token": token}, follow_redirects=False
    )
    assert out.status_code == 303
    assert out.headers["location"] == "/console/login"
    gateway.client.cookies.set("kbgate_console", second.cookies["kbgate_console"], path="/console")
    after = await gateway.client.get("/console/settings", follow_redirects=False)
    assert after.status_code == 303
    assert after.headers["location"] == "/console/login"


async def test_form_posts_without_the_csrf_token_or_from_another_site_are_refused(
    gateway: Gateway,
) -> None:
    """A change without this session's token (missing or wrong) or sent cross-site is a 403
    and changes nothing; the same form with the token and same-origin works."""
    tenant = await admin(gateway)
    form = {"setting": "strict_rag_isolation", "value": "false"}
    missing = await gateway.client.post("/console/settings", data=form)
    wrong = await gateway.client.post("/console/settings", data={**form, "csrf_token": "forged"})
    token = await csrf_token(gateway)
    cross_site = await gateway.client.post(
        "/console/settings",
        data={**form, "csrf_token": token},
        headers={"Sec-Fetch-Site": "cross-site"},
    )
    foreign_origin = await gateway.client.post(
        "/console/settings",
        data={**form, "csrf_token": token},
        headers={"Origin": "https://evil.example"},
    )
    assert [r.status_code for r in (missing, wrong, cross_site, foreign_origin)] == [403] * 4
    settings = await gateway.client.get("/v1/workspace/settings", headers=tenant.headers())
    assert settings.json()["settings"] == {}

    ok = await gateway.client.post(
        "/console/settings",
        data={**form, "csrf_token": token},
        headers={"Sec-Fetch-Site": "same-origin"},
        follow_redirects=False,
    )
    assert ok.status_code == 303
    settings = await gateway.client.get("/v1/workspace/settings", headers=tenant.headers())
    assert settings.json()["settings"] == {"strict_rag_isolation": False}


async def test_signed_out_visitors_are_sent_to_sign_in_and_the_cookie_opens_no_api(
    gateway: Gateway,
) -> None:
    """Without a session every page redirects to sign-in; a console session is no API credential."""
    for page in PAGES:
        response = await gateway.client.get(f"/console/{page}", follow_redirects=False)
        assert response.status_code == 303
        assert response.headers["location"] == "/console/login"
    await admin(gateway)
    api = await gateway.client.get("/v1/workspace/settings")
    assert api.status_code == 401


async def test_only_workspace_admin_keys_can_sign_in(gateway: Gateway) -> None:
    """Keys without the admin role, the platform key and unknown keys are refused; no cookie."""
    tenant = await provision(gateway, "acme", "ws")
    ingest = await tenant.issue("ingest", ["ingest", "retrieve"])
    refused = [
        await sign_in(gateway, ingest),
        await sign_in(gateway, "test-platform-key-0123456789"),
        await sign_in(gateway, "kbg_not-a-key"),
    ]
    assert [r.status_code for r in refused] == [403, 403, 401]
    assert all("set-cookie" not in r.headers for r in refused)


async def test_hostile_names_and_titles_are_escaped(gateway: Gateway) -> None:
    """A KB name and a document title full of markup reach the page as text, never as markup."""
    tenant = await admin(gateway)
    await tenant.kb("kb1", name=HOSTILE_NAME)
    await tenant.doc("kb1", "doc1", "Employees accrue 25 days of paid leave.", title=HOSTILE_TITLE)
    await tenant.agent("helper", ["kb1"])
    kb_page = (await gateway.client.get("/console/knowledge-bases")).text
    assert HOSTILE_NAME not in kb_page
    assert "&lt;img src=x onerror=alert(1)&gt;" in kb_page
    agents_page = (await gateway.client.get("/console/agents")).text
    assert HOSTILE_NAME not in agents_page
    answer = await gateway.client.post(
        "/console/try",
        data={
            "agent_id": "helper",
            "question": "How many days of leave?",
            "csrf_token": await csrf_token(gateway),
        },
    )
    assert answer.status_code == 200, answer.text
    assert HOSTILE_TITLE not in answer.text
    assert "&lt;script&gt;alert(&#39;title&#39;)&lt;/script&gt;" in answer.text
    assert "<script>" not in answer.text.replace(
        '<script src="/console/static/console.js" defer></script>', ""
    )


async def test_console_validation_gives_the_api_rules_in_plain_words(gateway: Gateway) -> None:
    """A bad top_k is refused by the console as by the API, with the rule in plain words at
    the field (not the decoder's message), the typed value kept, and nothing stored."""
    tenant = await admin(gateway)
    await tenant.kb("kb1", top_k=4)
    api = await gateway.client.put(
        "/v1/knowledge-bases/kb1", json={"top_k": 0}, headers=tenant.headers()
    )
    console = await gateway.client.post(
        "/console/knowledge-bases",
        data={"kb_id": "kb1", "top_k": "0", "csrf_token": await csrf_token(gateway)},
    )
    assert api.status_code == console.status_code == 422
    assert api.json()["field"] == "top_k"
    error = re.search(r'data-error-for="top_k" role="alert">([^<]*)<', console.text)
    assert error is not None
    assert html.unescape(error.group(1)) == "must be at least 1"
    assert re.search(r'name="top_k" type="text" inputmode="decimal"\s+value="0"', console.text)
    words = await gateway.client.post(
        "/console/knowledge-bases",
        data={"kb_id": "kb1", "top_k": "five", "csrf_token": await csrf_token(gateway)},
    )
    error = re.search(r'data-error-for="top_k" role="alert">([^<]*)<', words.text)
    assert error is not None
    assert html.unescape(error.group(1)) == "must be a whole number, such as 5, or left empty"
    assert "Expected" not in words.text
    assert 'value="five"' in words.text
    stored = await gateway.client.get("/v1/knowledge-bases/kb1", headers=tenant.headers())
    assert stored.json()["settings"] == {"top_k": 4}


async def test_another_workspace_admin_sees_and_changes_nothing_here(gateway: Gateway) -> None:
    """A second workspace's admin sees only their own workspace; this one's ids answer 404."""
    owner = await provision(gateway, "acme", "owner")
    await owner.kb("secret-kb", name="Owner handbook")
    await owner.agent("owner-agent", ["secret-kb"])
    await admin(gateway, "intruder")
    pages = [(await gateway.client.get(f"/console/{page}")).text for page in PAGES]
    assert not any("secret-kb" in page or "Owner handbook" in page for page in pages)
    assert "owner-agent" not in pages[2]
    token = await csrf_token(gateway)
    edit = await gateway.client.post(
        "/console/knowledge-bases",
        data={"kb_id": "secret-kb", "top_k": "1", "csrf_token": token},
    )
    ask = await gateway.client.post(
        "/console/try", data={"agent_id": "owner-agent", "question": "hi", "csrf_token": token}
    )
    assert edit.status_code == 404
    assert ask.status_code == 404
    kb = await gateway.client.get("/v1/knowledge-bases/secret-kb", headers=owner.headers())
    assert kb.json()["settings"] == {}


async def test_try_explains_each_hidden_span_and_allow_lists_a_value(gateway: Gateway) -> None:
    """*Try a question* shows, under a passage, each hidden value with its type, recognizer
    and score; *Allow* puts the value on the allow-list, and the next turn keeps it."""
    tenant = await admin(gateway, "explain")
    await tenant.kb("kb1", score_threshold=0.0)
    await tenant.doc(
        "kb1",
        "release",
        "Release 4.2 adds the export command. Thanks to Priya Raghunathan for the patch; "
        "questions go to releases@example.org.",
    )
    await tenant.agent("helper", ["kb1"])
    form = {"agent_id": "helper", "question": "Which release adds the export command?"}
    answer = await gateway.client.post(
        "/console/try", data={**form, "csrf_token": await csrf_token(gateway)}
    )
    assert answer.status_code == 200, answer.text
    page = html.unescape(answer.text)
    assert (
        "<code>Priya Raghunathan</code></td><td>PERSON</td><td><code>CreditNameRecognizer" in page
    )
    assert "<code>releases@example.org</code></td><td>EMAIL_ADDRESS</td>" in page

    allowed = await gateway.client.post(
        "/console/try/allow",
        data={"value": "releases@example.org", "csrf_token": await csrf_token(gateway)},
        follow_redirects=False,
    )
    assert allowed.status_code == 303, allowed.text
    settings = await gateway.client.get("/v1/workspace/settings", headers=tenant.headers())
    assert settings.json()["settings"]["pii_allow_list"] == ["releases@example.org"]
    body = (await tenant.retrieve("helper", form["question"])).json()
    text = body["passages"][0]["text"]
    assert "releases@example.org" in text
    assert "Priya Raghunathan" not in text
