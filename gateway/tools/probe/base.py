"""The campaign's state and how it sends probes, records them and files findings; the
helpers every part of the catalogue builds probes with."""

from __future__ import annotations

import asyncio
import itertools
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gateway.tools.probe.client import (
    Reply,
    Transport,
    TransportError,
)
from gateway.tools.probe.report import (
    Check,
    Finding,
    Issue,
    Probe,
    Record,
    Report,
    SetupError,
    Turn,
)
from gateway.tools.probe.world import (
    ANONYMOUS,
    OPERATOR,
    PLATFORM,
    RATE_LIMIT_MAX_WAIT_S,
    RATE_LIMIT_RETRIES,
    Doc,
    Kind,
    LegacyWriter,
    LogReader,
    ProbeKey,
    Viewer,
    Workspace,
    World,
)


class CampaignBase:
    """A campaign's state, the sending of probes and the helpers that build them."""

    def __init__(
        self,
        transport: Transport,
        platform_key: str,
        *,
        target: str = "in-process",
        run: str | None = None,
        legacy_writer: LegacyWriter | None = None,
        log_reader: LogReader | None = None,
        concurrency: int = 4,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.transport = transport
        self.run = run or f"probe-{secrets.token_hex(3)}"
        self.world = World(self.run, legacy=legacy_writer is not None)
        self.report = Report(self.run, target)
        self.platform = ProbeKey(PLATFORM, None, frozenset({"platform"}), secret=platform_key)
        self.anonymous = ProbeKey(ANONYMOUS, None, frozenset())
        self.operator = ProbeKey(OPERATOR, None, frozenset())
        self.legacy_writer = legacy_writer
        self.log_reader = log_reader
        self.concurrency = max(1, concurrency)
        self.progress = progress or (lambda _: None)
        self.turns: list[Turn] = []
        self.controls: dict[str, dict[str, Any]] = {}
        self.redact_deployed = True
        self.metrics_exposed = True
        #: who reads /metrics for the scan: anonymous where it is open, else the platform key
        self.metrics_reader = self.anonymous
        self.phase = "provision"
        self._probed = False
        self._rotor = itertools.count()
        self._semaphore = asyncio.Semaphore(self.concurrency)

    # -- running probes

    async def execute(self, probe: Probe) -> Reply | None:
        """Send one probe, record it, and file what is wrong with the answer.

        A 429 (a per-key rate limit) is waited out as its Retry-After says, a few times:
        the probe should be polite to a production deployment, not fail on it.
        """
        async with self._semaphore:
            for attempt in itertools.count(1):
                started = time.perf_counter()
                try:
                    reply = await self.transport.request(
                        probe.method, probe.path, key=probe.principal.secret, body=probe.body
                    )
                except TransportError as error:
                    self._file(probe, Issue("failure", str(error)))
                    return None
                elapsed = (time.perf_counter() - started) * 1000
                if reply.status != 429 or attempt > RATE_LIMIT_RETRIES:
                    break
                self.report.rate_limited += 1
                wait = 1.0 if reply.retry_after is None else reply.retry_after
                await asyncio.sleep(min(wait, RATE_LIMIT_MAX_WAIT_S))
        self.report.records.append(
            Record(probe.endpoint, probe.principal.label, probe.mode, reply.status, elapsed)
        )
        for issue in self.judge(probe, reply):
            self._file(probe, issue)
        return reply

    def judge(self, probe: Probe, reply: Reply) -> list[Issue]:
        issues = [
            Issue("leak", self.world.explain(marker, probe.viewer) + f" [{text[:6]}...]")
            for text, marker in self.world.scan(reply.text, probe.allowed)
        ]
        if reply.status != probe.expect:
            denied = probe.expect in {401, 403, 404, 422}
            kind: Kind = "leak" if denied and 200 <= reply.status < 300 else "failure"
            issues.append(
                Issue(kind, f"answered {reply.status}, expected {probe.expect}: {reply.text[:160]}")
            )
        elif probe.check is not None:
            try:
                issues.extend(probe.check(reply))
            except (KeyError, TypeError, ValueError, AttributeError) as error:
                issues.append(
                    Issue("failure", f"unexpected answer ({error!r}): {reply.text[:160]}")
                )
        return issues

    def _file(self, probe: Probe, issue: Issue) -> None:
        self.report.findings.append(
            Finding(issue.kind, probe.endpoint, probe.principal.label, probe.mode, issue.detail)
        )

    async def run_all(self, probes: Iterable[Probe]) -> None:
        await asyncio.gather(*(self.execute(probe) for probe in probes))

    async def setup_call(self, probe: Probe) -> Any:
        """A provisioning step: it must succeed, or the campaign stops."""
        reply = await self.execute(probe)
        if reply is None or reply.status != probe.expect:
            status = "no answer" if reply is None else f"{reply.status} {reply.text[:200]}"
            raise SetupError(f"{probe.method} {probe.path} as {probe.principal.label}: {status}")
        return reply.json()

    def _doc(self, ws: Workspace, kb_id: str, doc_id: str) -> Doc:
        return next(
            d
            for d in self.world.docs
            if d.workspace == ws.label and d.kb_id == kb_id and d.doc_id == doc_id and d.live
        )

    def _key(self, ws: Workspace, name: str) -> ProbeKey:
        return next(key for key in ws.principals if key.label == f"{ws.label}/{name}")

    # -- the catalogue

    def _probe(
        self,
        endpoint: str,
        principal: ProbeKey,
        path: str,
        body: Any = None,
        expect: int = 200,
        *,
        mode: str = "",
        viewer: Viewer | None = None,
        check: Check | None = None,
        also: Iterable[str] = (),
    ) -> Probe:
        """A probe in the current phase; `also`: markers this answer may carry besides."""
        seen = viewer or Viewer(principal.workspace)
        return Probe(
            endpoint=endpoint,
            principal=principal,
            mode=f"{self.phase}:{mode}" if mode else self.phase,
            method=endpoint.split(maxsplit=1)[0],
            path=path,
            body=body,
            expect=expect,
            viewer=seen,
            allowed=self.world.allowed(seen) | frozenset(also),
            check=check,
        )

    def _viewer(self, key: ProbeKey, agent_id: str) -> Viewer:
        ws = self.world.workspace(str(key.workspace))
        kbs = frozenset(ws.agents.get(agent_id, [])[: ws.kb_cap])
        return Viewer(ws.label, key.clearance, kbs)

    def _retrievers(self) -> list[ProbeKey]:
        return [key for ws in self.world.workspaces for key in ws.principals if key.has("retrieve")]

    def _foreign(self, ws_label: str) -> list[Doc]:
        return [d for d in self.world.docs if d.workspace != ws_label]

    def _pick(self, pool: Sequence[Doc], count: int) -> list[Doc]:
        """`count` documents from `pool`, starting somewhere new every call (a rotation)."""
        if not pool:
            return []
        start = next(self._rotor) * 7
        return [pool[(start + n) % len(pool)] for n in range(min(count, len(pool)))]
