"""The admin console: server-rendered pages for workspace admins at `/console`.

`create_app` registers `ConsoleController` and `console_template_config()`, and builds
the `ConsoleSessions` store in its lifespan (on the process's Redis client, if any).
Pages read and write only through the core functions the JSON admin API uses.
"""

from __future__ import annotations

from jinja2 import Environment, PackageLoader, StrictUndefined
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.template.config import TemplateConfig

from gateway.http.console.calibration import CalibrationConsoleController
from gateway.http.console.controller import ConsoleController
from gateway.http.console.knowledge_admin import KnowledgeAdminController
from gateway.http.console.sessions import ConsoleSessions

__all__ = [
    "CalibrationConsoleController",
    "ConsoleController",
    "ConsoleSessions",
    "KnowledgeAdminController",
    "console_template_config",
]


def console_template_config() -> TemplateConfig[JinjaTemplateEngine]:
    """Jinja2 with autoescaping on for every template: tenant data is untrusted."""
    environment = Environment(
        loader=PackageLoader("gateway.http.console", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return TemplateConfig(instance=JinjaTemplateEngine.from_environment(environment))
