"""An evaluation in the background: started under the workspace's evaluation lease, its
progress written to the store (at most once a second, which renews the lease), its
report or its failure recorded when it ends.

One evaluation runs per workspace at a time, across replicas: the store's lease says
which. A replica that dies mid-run leaves its evaluation `running` with a lease that runs
out; `shown` then reports it failed, and the next evaluation may start.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import msgspec

from gateway.access.auth import Principal
from gateway.background import BackgroundTasks
from gateway.calibration.evaluation import Evaluator, evaluate
from gateway.calibration.report import EvaluationReport
from gateway.errors import ConflictError, DependencyUnavailableError
from gateway.telemetry import Telemetry
from ingest.index import IndexUnavailableError
from settings.golden import Evaluation, EvaluationStatus, GoldenSet
from settings.records import KnowledgeBase
from settings.store import SettingsStore, StoreUnavailableError

#: how long a running evaluation holds the workspace's lease without writing progress
LEASE_S = 120.0
_PROGRESS_EVERY_S = 1.0
_TASK = "evaluation"


@dataclass(frozen=True, slots=True)
class Evaluations:
    """What running evaluations uses: their records (and the workspace's lease) in the
    store, the process's background tasks, counts, and the evaluator each one runs."""

    store: SettingsStore
    background: BackgroundTasks
    telemetry: Telemetry
    evaluator: Evaluator


def _now() -> str:
    return datetime.now(UTC).isoformat()


def task_key(evaluation: Evaluation) -> tuple[str, str, str, str]:
    return (_TASK, evaluation.tenant_id, evaluation.kb_id, evaluation.evaluation_id)


def of_workspace(tenant_id: str, kb_id: str | None = None) -> Callable[[Hashable], bool]:
    """A predicate picking the workspace's (or one KB's) evaluation tasks."""

    def chosen(key: Hashable) -> bool:
        return (
            isinstance(key, tuple)
            and key[:2] == (_TASK, tenant_id)
            and (kb_id is None or key[2] == kb_id)
        )

    return chosen


class _Gone(Exception):
    """The evaluation's record was deleted (with its KB or workspace) while it ran."""


class _Tracker:
    """The running evaluation's record, written as it progresses."""

    def __init__(self, store: SettingsStore, telemetry: Telemetry, evaluation: Evaluation) -> None:
        self.store = store
        self.telemetry = telemetry
        self.evaluation = evaluation
        self._written = time.monotonic()

    async def progress(self, stage: str, done: int, total: int) -> None:
        self.evaluation = msgspec.structs.replace(
            self.evaluation, stage=stage, done=done, total=total, updated_at=_now()
        )
        if time.monotonic() - self._written >= _PROGRESS_EVERY_S or done == total:
            await self._write()

    async def _write(self) -> None:
        self._written = time.monotonic()
        if not await self.store.update_evaluation(self.evaluation, lease_s=LEASE_S):
            raise _Gone

    async def finish(self, report: EvaluationReport) -> None:
        self.evaluation = msgspec.structs.replace(
            self.evaluation,
            status=EvaluationStatus.DONE,
            stage="done",
            done=self.evaluation.total,
            updated_at=_now(),
            report=msgspec.to_builtins(report),
        )
        await self.store.update_evaluation(self.evaluation, lease_s=LEASE_S)

    async def fail(self, reason: str) -> None:
        self.evaluation = msgspec.structs.replace(
            self.evaluation, status=EvaluationStatus.FAILED, error=reason, updated_at=_now()
        )
        try:
            await self.store.update_evaluation(self.evaluation, lease_s=LEASE_S)
        except StoreUnavailableError:
            # Its lease runs out on its own; `shown` then reports it failed.
            self.telemetry.count("evaluation_record_failed")


async def start(
    evaluations: Evaluations, principal: Principal, kb: KnowledgeBase, golden: GoldenSet
) -> Evaluation:
    """Record a new running evaluation and start it; ConflictError while another
    evaluation of the workspace runs."""
    now = _now()
    evaluation = Evaluation(
        evaluation_id="eval_" + secrets.token_urlsafe(12),
        tenant_id=principal.tenant_id,
        kb_id=kb.kb_id,
        key_id=principal.key_id,
        created_at=now,
        updated_at=now,
        stage="queued",
    )
    holder = await evaluations.store.start_evaluation(evaluation, lease_s=LEASE_S)
    if holder is not None:
        raise ConflictError(
            f"evaluation {holder} is running in this workspace; one runs at a time",
            field="evaluation",
        )
    evaluations.background.start(
        task_key(evaluation), _run(evaluations, principal, kb, golden, evaluation)
    )
    evaluations.telemetry.count("evaluations_started")
    return evaluation


async def _run(
    evaluations: Evaluations,
    principal: Principal,
    kb: KnowledgeBase,
    golden: GoldenSet,
    evaluation: Evaluation,
) -> None:
    telemetry = evaluations.telemetry
    tracker = _Tracker(evaluations.store, telemetry, evaluation)
    started = time.perf_counter()
    try:
        report = await evaluate(evaluations.evaluator, principal, kb, golden, tracker.progress)
        await tracker.finish(report)
    except _Gone:
        telemetry.count("evaluations_dropped")
        return
    except asyncio.CancelledError:
        await asyncio.shield(tracker.fail("stopped: the gateway shut down or the KB went"))
        raise
    except (DependencyUnavailableError, IndexUnavailableError, StoreUnavailableError):
        telemetry.count("evaluations_failed")
        await tracker.fail("a dependency was unavailable; run it again")
        return
    except Exception as error:
        # The type only: messages of unexpected errors may quote workspace content.
        telemetry.log.error(  # noqa: TRY400 — a traceback would carry the message
            "evaluation_failed", error_type=type(error).__name__
        )
        telemetry.count("evaluations_failed")
        await tracker.fail("internal error")
        return
    telemetry.count("evaluations_done")
    telemetry.observe_stage("evaluation", time.perf_counter() - started)


def shown(evaluation: Evaluation) -> Evaluation:
    """The evaluation as callers see it: one left `running` past its lease by a process
    that stopped is failed."""
    if evaluation.status is not EvaluationStatus.RUNNING:
        return evaluation
    try:
        updated = datetime.fromisoformat(evaluation.updated_at)
    except ValueError:
        return evaluation
    if datetime.now(UTC) - updated <= timedelta(seconds=LEASE_S):
        return evaluation
    return msgspec.structs.replace(
        evaluation,
        status=EvaluationStatus.FAILED,
        error="interrupted: the gateway running it stopped",
    )
