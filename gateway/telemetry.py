"""Logs and metrics: counts and timings only.

Never a question, answer, passage, title, key, nor a tenant-chosen id: requests
are logged by route template, not by path. Each app owns its own Prometheus
registry and logger, so two apps in one process (tests) do not share state.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from gateway.tracing import Tracing

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40}


def build_logger(level: str = "INFO", stream: TextIO | None = None) -> Any:
    """A JSON logger for one app; not installed globally."""
    return structlog.wrap_logger(
        structlog.PrintLogger(file=stream or sys.stderr),
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        cache_logger_on_first_use=False,
    )


class Telemetry:
    """The metrics of one gateway process, and its logger."""

    def __init__(self, logger: Any, tracing: Tracing | None = None) -> None:
        self.log = logger
        #: spans for an OpenTelemetry collector (off unless configured)
        self.tracing = tracing or Tracing.off()
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "kbgate_http_requests",
            "HTTP requests by route template, method and status.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.request_seconds = Histogram(
            "kbgate_http_request_seconds",
            "HTTP request latency by route template.",
            ["route"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.stage_seconds = Histogram(
            "kbgate_stage_seconds",
            "Latency of internal stages (embed, search, fuse, redact, record).",
            ["stage"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.events = Counter(
            "kbgate_events",
            "Counted events (auth failures, held-back documents, abstentions, ...).",
            ["event"],
            registry=self.registry,
        )
        self.expensive_wait_seconds = Histogram(
            "kbgate_expensive_wait_seconds",
            "Time expensive work waited, per job: by kind of work, and queue (own: behind "
            "its own workspace's work; shared: for a run slot, over all its slices).",
            ["kind", "queue"],
            buckets=(0.001, *_LATENCY_BUCKETS),
            registry=self.registry,
        )
        self.dependency_up = Gauge(
            "kbgate_dependency_up",
            "1 when the dependency answered its last readiness check.",
            ["dependency"],
            registry=self.registry,
        )
        # Every turn counts about ten events and times seven stages: looking a child up
        # by its label values each time (validation, a lock) cost as much as using it.
        # Label values are names from this code base, so these stay small.
        self._event_children: dict[str, Any] = {}
        self._stage_children: dict[str, Any] = {}
        self._request_children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def count(self, event: str, amount: float = 1) -> None:
        child = self._event_children.get(event)
        if child is None:
            child = self._event_children[event] = self.events.labels(event=event)
        child.inc(amount)

    def observe_stage(self, name: str, seconds: float) -> None:
        """One timing into `kbgate_stage_seconds`."""
        child = self._stage_children.get(name)
        if child is None:
            child = self._stage_children[name] = self.stage_seconds.labels(stage=name)
        child.observe(seconds)

    def observe_expensive_wait(self, kind: str, queue: str, seconds: float) -> None:
        """One job's wait into `kbgate_expensive_wait_seconds` (kind and queue are names
        from this code base, never a workspace's)."""
        self.expensive_wait_seconds.labels(kind=kind, queue=queue).observe(seconds)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a stage into `kbgate_stage_seconds` (and a span when tracing)."""
        started = time.perf_counter()
        try:
            with self.tracing.span(name):
                yield
        finally:
            self.observe_stage(name, time.perf_counter() - started)

    def observe_request(self, *, route: str, method: str, status: int, seconds: float) -> None:
        key = (route, method, status)
        children = self._request_children.get(key)
        if children is None:
            children = self._request_children[key] = (
                self.requests.labels(route=route, method=method, status=str(status)),
                self.request_seconds.labels(route=route),
            )
        count, latency = children
        count.inc()
        latency.observe(seconds)
        self.log.info(
            "request",
            route=route,
            method=method,
            status=status,
            duration_ms=round(seconds * 1000, 2),
        )

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric."""
        return generate_latest(self.registry)
