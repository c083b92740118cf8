"""Copies of one text in different documents fill one place of a turn, over HTTP on Qdrant
Edge and qdrant-client local mode (the real model)."""

from __future__ import annotations

import pytest

from tests.api.conftest import Gateway
from tests.api.tenants import provision

pytestmark = pytest.mark.anyio

POLICY = (
    "Annual leave. Every member of staff accrues twenty-five days of paid annual leave a "
    "year, and may carry up to five unused days into the first quarter of the next year. "
    "Leave is requested through the staff portal at least two weeks ahead and approved by "
    "the line manager. Public holidays come on top of the annual allowance."
)
OTHERS = {
    "sick": "Sick leave. Staff who are ill tell their manager before ten in the morning and "
    "send a doctor's note after three days away.",
    "parental": "Parental leave. Parents may take up to eighteen weeks of unpaid parental "
    "leave for each child before the child's fifth birthday.",
    "travel": "Travel. Train tickets are booked through the travel desk; flights need the "
    "approval of a director.",
}


def _shouted(text: str) -> str:
    """The same words in capitals, every sentence on a line of its own."""
    return text.upper().replace(". ", ".\n\n")


def _edited(text: str) -> str:
    """Front matter added and one word dropped: a near-copy."""
    return "Copied from the staff handbook. " + text.replace(" paid", "", 1)


COPIES = {
    "policy": POLICY,
    "policy-mirror": POLICY,
    "policy-shouted": _shouted(POLICY),
    "policy-edited": _edited(POLICY),
}
QUESTION = "How many days of annual leave do staff get?"


async def test_planted_copies_fill_one_place_and_the_next_documents_take_the_rest(
    engine_gateway: Gateway,
) -> None:
    """A policy stored four times under other ids (as is, in other case and spacing, and
    edited) comes back once, as its best-ranked copy; the three places the copies would
    have taken go to the other documents, so a top_k 4 turn still returns 4 passages. A KB
    that turns `drop_copies` off gets every copy back."""
    tenant = await provision(engine_gateway, "acme", "support")
    kb = await tenant.kb("kb", score_threshold=0.0, keyword_floor=0.0, top_k=4)
    assert kb["effective"]["drop_copies"] == {"value": True, "source": "platform",
                                              "clamped": False}  # fmt: skip
    for doc_id, text in {**COPIES, **OTHERS}.items():
        await tenant.doc("kb", doc_id, text)
    await tenant.agent("bot", ["kb"])
    body = (await tenant.retrieve("bot", QUESTION)).json()
    returned = [p["document_id"] for p in body["passages"]]
    assert len(returned) == 4
    assert len([doc for doc in returned if doc in COPIES]) == 1
    assert returned[0] in COPIES
    assert set(returned[1:]) == set(OTHERS)

    await tenant.kb("kb", score_threshold=0.0, keyword_floor=0.0, top_k=4, drop_copies=False)
    body = (await tenant.retrieve("bot", QUESTION)).json()
    assert {p["document_id"] for p in body["passages"]} == set(COPIES)
    assert body["effective"]["per_knowledge_base"]["kb"]["drop_copies"] is False


async def test_documents_that_only_look_alike_are_all_returned(engine_gateway: Gateway) -> None:
    """Documents written from one template but stating different facts are not copies:
    a turn returns each of them."""
    tenant = await provision(engine_gateway, "acme", "support")
    await tenant.kb("kb", score_threshold=0.0, keyword_floor=0.0, top_k=5)
    template = (
        "The {year} harbour regatta was held on the first weekend of {month}. {boats} boats "
        "started the long race around the lighthouse, and the {winner} crew won it in "
        "{hours} hours after a {weather} day on the water."
    )
    seasons = {
        "regatta-2021": template.format(year=2021, month="June", boats=31, winner="Heron",
                                        hours=5, weather="calm"),
        "regatta-2022": template.format(year=2022, month="July", boats=44, winner="Osprey",
                                        hours=7, weather="stormy"),
        "regatta-2023": template.format(year=2023, month="May", boats=27, winner="Tern",
                                        hours=4, weather="windy"),
    }  # fmt: skip
    for doc_id, text in seasons.items():
        await tenant.doc("kb", doc_id, text)
    await tenant.agent("bot", ["kb"])
    body = (await tenant.retrieve("bot", "Who won the harbour regatta?")).json()
    assert {p["document_id"] for p in body["passages"]} == set(seasons)
