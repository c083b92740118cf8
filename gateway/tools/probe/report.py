"""Probes as data, what they find, and the campaign's report."""

from __future__ import annotations

import asyncio
import statistics
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.tools.probe.client import (
    Reply,
)
from gateway.tools.probe.world import (
    Kind,
    ProbeKey,
    Viewer,
)

# ---- probes and findings ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Issue:
    kind: Kind
    detail: str


Check = Callable[[Reply], list[Issue]]


@dataclass(frozen=True, slots=True)
class Probe:
    """One request and what must hold of its answer."""

    endpoint: str
    principal: ProbeKey
    mode: str
    method: str
    path: str
    body: Any = None
    expect: int = 200
    viewer: Viewer = Viewer(None)  # noqa: RUF009 — a frozen dataclass: sharing the default is safe
    allowed: frozenset[str] = frozenset()
    check: Check | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    kind: Kind
    endpoint: str
    principal: str
    mode: str
    detail: str

    def line(self) -> str:
        return f"[{self.kind}] {self.endpoint} as {self.principal} ({self.mode}): {self.detail}"


@dataclass(frozen=True, slots=True)
class Record:
    endpoint: str
    principal: str
    mode: str
    status: int
    ms: float


@dataclass
class Report:
    """Everything a campaign ran and found."""

    run: str
    target: str
    records: list[Record] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    left_behind: list[str] = field(default_factory=list)
    #: what the cleanup deleted with the planted organizations, by kind (counts)
    removed: dict[str, int] = field(default_factory=dict)
    phases: list[tuple[str, int, float]] = field(default_factory=list)
    setup_error: str | None = None
    rate_limited: int = 0
    provision_s: float = 0.0
    cleanup_s: float = 0.0
    total_s: float = 0.0

    @property
    def leaks(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "leak"]

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "failure"]

    @property
    def distinct(self) -> set[tuple[str, str, str]]:
        return {(r.endpoint, r.principal, r.mode) for r in self.records}

    @property
    def exit_code(self) -> int:
        """0 clean, 1 a leak, 2 setup failed, 3 no leak but some probes could not vouch."""
        if self.leaks:
            return 1
        if self.setup_error is not None:
            return 2
        return 3 if self.failures else 0

    def by_endpoint(self) -> dict[str, list[float]]:
        timings: dict[str, list[float]] = defaultdict(list)
        for record in self.records:
            timings[record.endpoint].append(record.ms)
        return dict(sorted(timings.items()))

    def summary(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "target": self.target,
            "requests": len(self.records),
            "distinct_probes": len(self.distinct),
            "endpoints": len({r.endpoint for r in self.records}),
            "principals": len({r.principal for r in self.records}),
            "modes": len({r.mode for r in self.records}),
            "leaks": len(self.leaks),
            "failures": len(self.failures),
            "rate_limited": self.rate_limited,
            "exit_code": self.exit_code,
            "provision_s": round(self.provision_s, 2),
            "cleanup_s": round(self.cleanup_s, 2),
            "total_s": round(self.total_s, 2),
            "phases": [
                {"phase": name, "requests": count, "seconds": round(seconds, 2)}
                for name, count, seconds in self.phases
            ],
            "by_endpoint": {
                endpoint: {
                    "requests": len(ms),
                    "median_ms": round(statistics.median(ms), 1),
                    "p95_ms": round(_percentile(ms, 0.95), 1),
                }
                for endpoint, ms in self.by_endpoint().items()
            },
        }

    def to_json(self) -> dict[str, Any]:
        return {
            **self.summary(),
            "findings": [
                {
                    "kind": f.kind,
                    "endpoint": f.endpoint,
                    "principal": f.principal,
                    "mode": f.mode,
                    "detail": f.detail,
                }
                for f in self.findings
            ],
            "notes": self.notes,
            "removed": self.removed,
            "left_behind": self.left_behind,
            "setup_error": self.setup_error,
        }

    def render(self, *, limit: int = 40) -> str:
        lines = [f"kbgate probe {self.run} against {self.target}"]
        if self.setup_error:
            lines.append(f"setup failed: {self.setup_error}")
        lines.append(f"provisioned in {self.provision_s:.1f} s")
        lines.extend(
            f"  phase {name:<11} {count:5d} requests  {seconds:6.1f} s"
            for name, count, seconds in self.phases
        )
        lines.append(
            f"probes: {len(self.records)} requests, {len(self.distinct)} distinct "
            f"(endpoint x principal x mode) over {len({r.endpoint for r in self.records})} "
            f"endpoints and {len({r.principal for r in self.records})} principals"
        )
        for endpoint, ms in self.by_endpoint().items():
            lines.append(
                f"  {endpoint:<52} {len(ms):5d}  median {statistics.median(ms):7.1f} ms"
                f"  p95 {_percentile(ms, 0.95):7.1f} ms"
            )
        if self.rate_limited:
            lines.append(f"rate limited {self.rate_limited} times (waited out, then retried)")
        lines.append(f"leaks: {len(self.leaks)}")
        lines.extend("  " + f.line() for f in self.leaks[:limit])
        lines.append(f"failures (not leaks, but the probe cannot vouch): {len(self.failures)}")
        lines.extend("  " + f.line() for f in self.failures[:limit])
        lines.extend(f"note: {note}" for note in self.notes)
        if self.removed:
            counts = ", ".join(f"{count} {kind}" for kind, count in self.removed.items())
            lines.append(f"cleaned up: {counts}")
        if self.left_behind:
            lines.append("left behind:")
            lines.extend(f"  {item}" for item in self.left_behind)
        elif self.removed:
            lines.append("left behind: nothing")
        lines.append(f"cleanup {self.cleanup_s:.1f} s, total {self.total_s:.1f} s")
        verdict = {0: "PASS", 1: "LEAK", 2: "SETUP FAILED", 3: "INCONCLUSIVE"}[self.exit_code]
        lines.append(f"result: {verdict} (exit {self.exit_code})")
        return "\n".join(lines) + "\n"


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class SetupError(RuntimeError):
    """Provisioning the probe world failed; nothing was probed."""


async def _all(steps: Iterable[Awaitable[Any]]) -> None:
    """Run setup steps concurrently; when one fails, let the others finish, then raise."""
    results = await asyncio.gather(*steps, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result


# ---- checks (what must hold of a body) -------------------------------------------------


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


@dataclass(frozen=True, slots=True)
class Turn:
    turn_id: str
    workspace: str
    principal: str
    agent_id: str
    phase: str
    passages: tuple[tuple[str, str], ...]  # (passage id, document token)
