"""The console's calibration pages: a KB's golden set uploaded as a file, an evaluation
run and followed, its figures and curves as plots, and its recommendation applied.

Each form calls the core function the JSON API calls (`gateway.admin.calibration`) as
the signed-in key; an uploaded golden set (JSON lines or CSV, `golden_file`) is read by
`gateway.calibration.golden_file` and checked by the API's own schema. A running
evaluation's page reloads itself every two seconds until it is done. Sessions, CSRF,
headers and error pages are `ConsoleController`'s.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any
from urllib.parse import quote

from litestar import Controller, Response, get, post
from litestar.datastructures import UploadFile
from litestar.di import NamedDependency
from litestar.params import FromQuery
from litestar.response import Redirect, Template

from gateway.admin import calibration as admin_calibration
from gateway.admin import knowledge as admin_knowledge
from gateway.admin import migration as admin_migration
from gateway.admin.calibration import Calibration
from gateway.admin.migration import Migrations
from gateway.admin.migration_figures import validation_of
from gateway.calibration.golden_file import GoldenFileError, golden_set_body
from gateway.errors import ConflictError, InvalidInputError, NotFoundError
from gateway.http.bodies import golden_questions
from gateway.http.calibration_schemas import PutGoldenSet
from gateway.http.console.controller import ConsoleController
from gateway.http.console.forms import FORM, FormErrors, convert, form_errors
from gateway.http.console.guard import ConsoleRequest, SignedIn, _checked_form, _posted_kb, _text
from gateway.http.console.pages import _after_change, _notice, _page
from gateway.http.console.plots import report_plots
from gateway.http.dependencies import Injected
from ingest.embedder.models import BUNDLED_MODELS
from settings.golden import EvaluationStatus
from settings.store import SettingsStore

PAGE = "/console/calibration"
#: seconds between reloads of a running evaluation's page
REFRESH_S = 2


_MIGRATION_STEPS = {
    "validate": admin_migration.start_validation,
    "rollback": admin_migration.roll_back,
    "retire": admin_migration.retire,
    "cancel": admin_migration.cancel_migration,
}


def calibration_path(kb_id: str) -> str:
    return f"{PAGE}?kb_id={quote(kb_id, safe='')}"


def evaluation_path(kb_id: str, evaluation_id: str) -> str:
    return (
        f"{PAGE}/evaluation?kb_id={quote(kb_id, safe='')}"
        f"&evaluation_id={quote(evaluation_id, safe='')}"
    )


class CalibrationConsoleController(Controller):
    path = PAGE
    include_in_schema = False
    middleware = ConsoleController.middleware
    dependencies = ConsoleController.dependencies
    exception_handlers = ConsoleController.exception_handlers

    @get("/")
    async def calibration_page(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        store: Injected[SettingsStore],
        migrations: Injected[Migrations],
        kb_id: FromQuery[str | None] = None,
    ) -> Template:
        notice = await _notice(request, who)
        return await _calibration(who, store, kb_id, notice=notice, migrations=migrations)

    @post("/golden-set", status_code=303)
    async def upload_golden_set(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        calibration: Injected[Calibration],
    ) -> Response[Any]:
        """The uploaded file as a PUT of the KB's golden set."""
        store = calibration.store
        form, kb = await _posted_kb(request, who, store)
        try:
            data = convert(PutGoldenSet, golden_set_body(await _file_text(form.get("golden_file"))))
            stored = await admin_calibration.put_golden_set(
                calibration, who.principal, kb.kb_id, golden_questions(data), data.off_topic
            )
        except GoldenFileError as error:
            return await _calibration(
                who, store, kb.kb_id, status_code=422, errors={"golden_file": str(error)}
            )
        except (FormErrors, InvalidInputError) as error:
            errors = form_errors(error).errors
            return await _calibration(who, store, kb.kb_id, status_code=422, errors=errors)
        off_topic = (
            f"{len(stored.off_topic)} off-topic"
            if stored.off_topic
            else "no off-topic ones (the built-in set serves)"
        )
        return await _after_change(
            request,
            who,
            f"Stored the golden set: {len(stored.questions)} questions, {off_topic}.",
            calibration_path(kb.kb_id),
        )

    @post("/evaluations", status_code=303)
    async def run_evaluation(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        calibration: Injected[Calibration],
    ) -> Response[Any]:
        form = await _checked_form(request, who)
        kb_id = _text(form, "kb_id")
        try:
            started = await admin_calibration.start_evaluation(calibration, who.principal, kb_id)
        except ConflictError as error:
            return await _calibration(
                who, calibration.store, kb_id, status_code=409, errors={FORM: error.message}
            )
        return Redirect(path=evaluation_path(kb_id, started.evaluation_id), status_code=303)

    @get("/evaluation")
    async def evaluation_page(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        store: Injected[SettingsStore],
        kb_id: FromQuery[str],
        evaluation_id: FromQuery[str],
    ) -> Template:
        found = await admin_calibration.evaluation_of(store, who.principal, kb_id, evaluation_id)
        report = admin_calibration.report_of(found)
        running = found.status is EvaluationStatus.RUNNING
        return _page(
            "evaluation.html",
            who,
            active="calibration",
            notice=await _notice(request, who),
            kb_id=kb_id,
            evaluation=found,
            report=report,
            plots=report_plots(report) if report is not None else [],
            refresh_s=REFRESH_S if running else None,
            back=calibration_path(kb_id),
        )

    @post("/migration", status_code=303)
    async def migration(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        migrations: Injected[Migrations],
    ) -> Response[Any]:
        """A step of the KB's model migration, as the API's: start, validate, switch (with
        the override when asked), roll back, retire or cancel."""
        form = await _checked_form(request, who)
        kb_id, action = _text(form, "kb_id"), _text(form, "action")
        principal = who.principal
        if action not in {"start", "switch", *_MIGRATION_STEPS}:
            raise InvalidInputError("no such step", field="action")
        try:
            if action == "start":
                await admin_migration.start_migration(
                    migrations, principal, kb_id, _text(form, "model").strip()
                )
            elif action == "switch":
                override = _text(form, "override") == "on"
                await admin_migration.switch(migrations, principal, kb_id, override=override)
            else:
                await _MIGRATION_STEPS[action](migrations, principal, kb_id)
        except (ConflictError, InvalidInputError) as error:
            field = error.field if error.field in {"model"} else FORM
            return await _calibration(
                who,
                migrations.store,
                kb_id,
                status_code=409 if isinstance(error, ConflictError) else 422,
                errors={field: error.message},
                migrations=migrations,
            )
        notice = f"Model migration of {kb_id}: {action.replace('_', ' ')} done."
        return await _after_change(request, who, notice, calibration_path(kb_id))

    @post("/apply", status_code=303)
    async def apply(
        self,
        request: ConsoleRequest,
        who: NamedDependency[SignedIn],
        calibration: Injected[Calibration],
    ) -> Redirect:
        form = await _checked_form(request, who)
        kb_id, evaluation_id = _text(form, "kb_id"), _text(form, "evaluation_id")
        applied = await admin_calibration.apply(calibration, who.principal, kb_id, evaluation_id)
        changed = ", ".join(f"{change.setting} {_shown(change.new)}" for change in applied.changes)
        notice = (
            f"Applied to {kb_id}: {changed}." if changed else "Nothing to change: applied as is."
        )
        return await _after_change(request, who, notice, evaluation_path(kb_id, evaluation_id))


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return ":".join(f"{item:g}" for item in value.values())
    return f"{value:g}" if isinstance(value, float | int) else str(value)


async def _file_text(upload: object) -> str:
    """The uploaded file's text; GoldenFileError when there is none, or not UTF-8."""
    if not isinstance(upload, UploadFile) or not upload.filename:
        raise GoldenFileError("choose a golden set file")
    try:
        return (await upload.read()).decode("utf-8")
    except UnicodeDecodeError:
        raise GoldenFileError("the file must be UTF-8 text") from None


async def _calibration(
    who: SignedIn,
    store: SettingsStore,
    kb_id: str | None,
    *,
    status_code: int = 200,
    errors: dict[str, str] | None = None,
    notice: str | None = None,
    migrations: Migrations | None = None,
) -> Template:
    """The calibration page of one KB (the first, when none is named), with its model
    migration when `migrations` is given (reloading while it builds or validates)."""
    kbs = await admin_knowledge.knowledge_bases(store, who.principal)
    chosen = next((kb for kb in kbs if kb.kb_id == kb_id), None)
    if chosen is None and kb_id is not None:
        chosen = await admin_knowledge.knowledge_base_of(store, who.principal, kb_id)
    if chosen is None and kbs:
        chosen = kbs[0]
    golden = evaluations = None
    if chosen is not None:
        with suppress(NotFoundError):
            golden = await admin_calibration.golden_set_of(store, who.principal, chosen.kb_id)
        evaluations = await admin_calibration.evaluations(store, who.principal, chosen.kb_id)
    migration = validation = None
    if chosen is not None and migrations is not None:
        migration = await store.get_migration(who.principal.tenant_id, chosen.kb_id)
        validation = validation_of(migration) if migration else None
    running = migration is not None and (
        migration.status.value == "building"
        or (validation is not None and validation.status == "running")
    )
    return _page(
        "calibration.html",
        who,
        active="calibration",
        status_code=status_code,
        notice=notice,
        kbs=kbs,
        kb=chosen,
        golden=golden,
        evaluations=evaluations or [],
        errors=errors or {},
        evaluation_path=evaluation_path,
        calibration_path=calibration_path,
        migration=migration,
        validation=validation,
        answering=(
            migrations.models.named(chosen.embedding_model)
            if chosen is not None and migrations is not None
            else ""
        ),
        models=BUNDLED_MODELS,
        refresh_s=REFRESH_S if running else None,
    )
