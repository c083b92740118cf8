"""kbgate_client's pure rules: how long to wait before trying again, and which exception an
error answer raises."""

from __future__ import annotations

import email.utils
import time

import httpx
import pytest
from kbgate_client import (
    NotFoundError,
    ProblemError,
    RateLimitedError,
    Retries,
    UnavailableError,
)
from kbgate_client._http import retry_after_s
from kbgate_client.errors import problem_error


def test_retries_wait_as_asked_within_bounds() -> None:
    """A Retry-After is waited as given; without one the wait doubles from `backoff_s`; past
    `max_wait_s`, or after `attempts` tries in all, there is no further try."""
    policy = Retries(attempts=3, max_wait_s=10.0, backoff_s=0.5)
    assert policy.delay(0, 2.0) == 2.0
    assert [policy.delay(n, None) for n in (0, 1)] == [0.5, 1.0]
    assert policy.delay(2, 1.0) is None
    assert policy.delay(0, 11.0) is None
    assert Retries(attempts=1).delay(0, 0.0) is None


@pytest.mark.parametrize(
    ("header", "expected"),
    [("3", 3.0), ("0", 0.0), ("-4", 0.0), ("soon", None), (None, None)],
)
def test_retry_after_reads_seconds(header: str | None, expected: float | None) -> None:
    """Delta-seconds as given (never negative); an unreadable header is none."""
    headers = {} if header is None else {"Retry-After": header}
    assert retry_after_s(httpx.Response(429, headers=headers)) == expected


def test_retry_after_reads_an_http_date() -> None:
    """An HTTP date is the seconds until then."""
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    waited = retry_after_s(httpx.Response(503, headers={"Retry-After": later}))
    assert waited is not None
    assert 25 <= waited <= 31


def test_error_answers_raise_their_own_class_with_the_problem() -> None:
    """Each status its class, carrying the problem details; 502 and 504 are unavailable
    too; a body that is no problem details keeps its status and a short detail."""
    found = problem_error(
        404, b'{"status": 404, "title": "Not Found", "field": "agent_id"}', "", None
    )
    assert isinstance(found, NotFoundError)
    assert found.field == "agent_id"
    limited = problem_error(429, b'{"status": 429, "title": "Too Many Requests"}', "", 7.0)
    assert isinstance(limited, RateLimitedError)
    assert limited.retry_after_s == 7.0
    proxy = problem_error(502, b"<html>bad gateway</html>", "Bad Gateway", None)
    assert isinstance(proxy, UnavailableError)
    assert proxy.problem.status == 502
    assert proxy.problem.detail == "<html>bad gateway</html>"
    teapot = problem_error(418, b"", "I'm a teapot", None)
    assert type(teapot) is ProblemError
    assert str(teapot) == "HTTP 418: I'm a teapot"
