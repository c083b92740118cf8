"""Retrieval in technical text: identifiers, entries under headings, bug numbers."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from gateway.retrieval.answering import UNKNOWN_WORDS_MARGIN
from ingest.embedder.embedding import Embedder
from tests.api.conftest import Gateway
from tests.api.tenants import Tenant, provision

pytestmark = pytest.mark.anyio

RELEASE_NOTES = {
    "gc-now": "Release 2.40: running git gc --prune=now removes every unreachable loose "
    "object at once.",
    "prune-date": "Release 2.38: the --prune option of git gc accepts a date; objects are now "
    "kept for two weeks by default.",
    "prune-count": "Release 2.35: git prune learned to say how many objects it removed; "
    "prune now runs faster.",
    "cache": "Release 2.31: the core.untrackedCache setting speeds up git status in large "
    "working trees.",
    "index": "Release 2.30: the index file is written less often, which keeps its cache warm.",
}


async def test_an_option_matches_whole_and_a_key_by_its_parts(engine_gateway: Gateway) -> None:
    """The keyword channel reads `--prune=now` as one identifier, so the note holding it
    leads notes holding `prune` and `now` apart; and it finds `core.untrackedCache` from
    the words "untracked cache"."""
    tenant = await provision(engine_gateway, "acme", "support")
    await tenant.kb("kb", fusion={"dense": 0, "keyword": 1}, keyword_floor=0)
    for doc_id, text in RELEASE_NOTES.items():
        await tenant.doc("kb", doc_id, text)
    await tenant.agent("bot", ["kb"])
    option = (await tenant.retrieve("bot", "--prune=now")).json()
    assert option["passages"][0]["document_id"] == "gc-now"
    key = (await tenant.retrieve("bot", "untracked cache")).json()
    assert key["passages"][0]["document_id"] == "cache"


CHANGELOG = """\
frobnicate (2.1-1) unstable; urgency=medium

  * New upstream release.
  * Update the Vcs fields.

 -- Ann Example <ann@example.org>  Mon, 04 Mar 2024 10:00:00 +0100

frobnicate (2.0-1) unstable; urgency=medium

  * New upstream release.
{items}
  * The frobnicator now writes its journal to /var/lib/frobnicate/journal
    instead of keeping it in memory (Closes: #1061234).

 -- Ann Example <ann@example.org>  Mon, 05 Feb 2024 10:00:00 +0100

frobnicate (1.9-2) unstable; urgency=medium

  * Rebuild against libwidget 3.

 -- Ann Example <ann@example.org>  Mon, 08 Jan 2024 10:00:00 +0100
"""


async def test_a_passage_deep_in_an_entry_carries_the_entry_header(
    engine_gateway: Gateway,
) -> None:
    """A long upload's later passages still say which upload they belong to: the passage
    answering a question about the journal starts with `frobnicate (2.0-1)`'s header, and
    holds nothing of the neighbouring uploads."""
    items = "\n".join(
        f"  * Refresh patch {n:02d} for the widget toolkit and drop its obsolete hunk."
        for n in range(30)
    )
    tenant = await provision(engine_gateway, "acme", "support")
    await tenant.kb("kb")
    await tenant.doc("kb", "frobnicate", CHANGELOG.format(items=items), title="frobnicate")
    await tenant.agent("bot", ["kb"])
    body = (await tenant.retrieve("bot", "Where does frobnicate keep its journal?")).json()
    passage = body["passages"][0]["text"]
    assert "/var/lib/frobnicate/journal" in passage
    assert passage.startswith("frobnicate (2.0-1) unstable; urgency=medium\n")
    assert "2.1-1" not in passage
    assert "1.9-2" not in passage


REVERTED = [
    "Rework the X509_LOOKUP by-store API so lookups can be cached per context",
    "Let the certificate store loader skip unreadable directories quietly",
    "Move the store's URI scheme table into the provider configuration",
    "Report a missing trust anchor as a verification error, not a warning",
]


async def test_a_bug_number_finds_the_one_entry_that_holds_it(engine_gateway: Gateway) -> None:
    """A bug number is a word one entry holds: the keyword leg finds that entry alone, and
    the fusion ranks it first among uploads the dense channel cannot tell apart, with no
    floor dropping the dense hits (documents the exhaustive keyword leg did not return
    score nothing on it)."""
    tenant = await provision(engine_gateway, "acme", "support")
    await tenant.kb("kb", score_threshold=0.0, keyword_floor=0.0)
    for version in (1, 2, 3, 5, 6, 7, 8, 9):  # bug numbers one digit away from #1110254
        await tenant.doc(
            "kb",
            f"openssl-3.0.{version}",
            f"openssl (3.0.{version}-1) bookworm; urgency=medium\n\n"
            f"  * Fix a crash (Closes: #111025{version}).\n",
            title=f"openssl 3.0.{version}-1",
        )
    reverted = "\n".join(
        f"    - {change} (upstream commit {n:x}a{n:x}f)" for n, change in enumerate(REVERTED)
    )
    await tenant.doc(
        "kb",
        "openssl-3.0.17",
        "openssl (3.0.17-1~deb12u2) bookworm; urgency=medium\n\n"
        "  * Revert the following upstream changes to avoid crashes in downstream\n"
        f"    software:\n{reverted}\n    Closes: #1110254\n",
        title="openssl 3.0.17-1~deb12u2",
    )
    await tenant.agent("bot", ["kb"])
    body = (await tenant.retrieve("bot", "#1110254")).json()
    assert body["passages"][0]["document_id"] == "openssl-3.0.17"


PROXY_CHANGELOG = {
    "haproxy-2.6": "haproxy (2.6.12-1) bookworm; urgency=medium\n\n"
    "  * New upstream release: TLS session resumption fixed for backends behind a proxy.\n",
    "haproxy-2.4": "haproxy (2.4.22-1) bullseye; urgency=medium\n\n"
    "  * Terminate TLS on the frontend and forward plain HTTP to the backend servers.\n",
    "curl-7.88": "curl (7.88.1-10) bookworm; urgency=medium\n\n"
    "  * Fix a crash when a proxy closes the TLS connection early.\n",
    "openssl-3.0": "openssl (3.0.11-1) bookworm; urgency=medium\n\n"
    "  * New upstream release with fixes for TLS 1.3 session tickets.\n",
}


async def test_a_question_about_a_product_the_kb_never_names_abstains(
    gateway: Gateway, embedder: Embedder
) -> None:
    """Under measured lines, a question whose best passage passes the dense line by a
    little answers only if the KB holds its words: "nginx", which no passage holds, is
    over a quarter of the question's weight; the same question about haproxy is answered."""
    tenant = await provision(gateway, "acme", "support")
    await tenant.kb("kb", keyword_floor=0.3)  # the platform's (the fixture's is 0)
    for doc_id, text in PROXY_CHANGELOG.items():
        await tenant.doc("kb", doc_id, text)
    await tenant.agent("bot", ["kb"])
    passages = np.array([e.dense for e in embedder.embed_documents(list(PROXY_CHANGELOG.values()))])
    for product, abstains in (("nginx", True), ("haproxy", False)):
        question = f"How can {product} resume TLS sessions?"
        cosine = float((passages @ np.array(embedder.embed_queries([question])[0].dense)).max())
        body = await _settled(tenant, question)
        line = body["effective"]["per_knowledge_base"]["kb"]["score_threshold"]
        assert line <= cosine
        assert body["abstained"] is abstains
        if abstains:
            assert cosine < line + UNKNOWN_WORDS_MARGIN


async def _settled(tenant: Tenant, question: str) -> dict[str, Any]:
    """The turn's body once the KB's off-topic line is measured."""
    for _ in range(200):
        body: dict[str, Any] = (await tenant.retrieve("bot", question)).json()
        if body["effective"]["per_knowledge_base"]["kb"]["sources"]["score_threshold"] != (
            "platform"
        ):
            return body
        await asyncio.sleep(0.05)
    raise AssertionError("the KB's line was never measured")
