"""`kbgate prepare-model` and `kbgate healthcheck`: the container image's build step and
its health check."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from gateway.cli.output import fail, say
from settings.config import load_config


def add_model_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    health = commands.add_parser(
        "healthcheck",
        help="exit 0 when the local gateway is ready (for container health checks)",
        description="Ask http://127.0.0.1:$KBGATE_PORT/health/ready; exit 0 on 200, else 1.",
    )
    health.add_argument("--url", help="the gateway's base URL (default: this host's port)")
    health.add_argument("--timeout", type=float, default=3.0, help="seconds to wait (3)")
    health.set_defaults(run=run_healthcheck)
    prepare = commands.add_parser(
        "prepare-model",
        help="assemble the bundled embedding model's folder (e.g. at image build time)",
        description=(
            "Build the model folder that `serve` loads, from installed packages only, into "
            "KBGATE_MODEL_CACHE_DIR (default <data dir>/models), so that the gateway can "
            "later start with that folder read-only."
        ),
    )
    prepare.add_argument("--model-dir", type=Path, help="where (KBGATE_MODEL_CACHE_DIR)")
    prepare.set_defaults(run=run_prepare_model)


def run_healthcheck(args: argparse.Namespace) -> int:
    from gateway.runtime.healthcheck import is_ready, local_url

    try:
        return 0 if is_ready(args.url or local_url(os.environ), args.timeout) else 1
    except ValueError as error:
        return fail(str(error))


def run_prepare_model(args: argparse.Namespace) -> int:
    from ingest.embedder.embedding import assemble_minilm

    config = load_config(os.environ, model_cache_dir=args.model_dir)
    if config.embedding_model:
        return fail("prepare-model assembles the bundled model; unset KBGATE_EMBEDDING_MODEL")
    say(str(assemble_minilm(config.model_dir)))
    return 0
