"""How tests treat a missing service: skip on a developer machine, fail in CI.

CI sets `KBGATE_REQUIRE_SERVICES=1`; then a required service that cannot be
started is a failure, never a silent skip. Docker is never required: tests that
need a Docker engine (testcontainers) skip cleanly without one.
"""

from __future__ import annotations

import os
import shutil

import docker  # type: ignore[import-untyped]  # pulled in by testcontainers, untyped
import pytest


def services_required() -> bool:
    return os.environ.get("KBGATE_REQUIRE_SERVICES", "") not in {"", "0", "false", "no"}


def missing_service(reason: str) -> None:
    """Skip the test, or fail it when services are required."""
    if services_required():
        pytest.fail(f"required service missing: {reason}")
    pytest.skip(reason)


def docker_available() -> bool:
    """Whether a Docker engine answers (not just a client binary)."""
    if shutil.which("docker") is None:
        return False
    try:
        docker.from_env(timeout=3).ping()
    except docker.errors.DockerException:
        return False
    return True


def require_docker() -> None:
    """Skip cleanly without a Docker engine, whatever KBGATE_REQUIRE_SERVICES says."""
    if not docker_available():
        pytest.skip("no Docker engine on this machine (testcontainers tests need one)")
