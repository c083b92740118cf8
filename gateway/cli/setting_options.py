"""What the `set` commands share: `--reset`, on/off options, and how a setting reads."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from gateway.cli.gateway_client import Refused


def add_reset_argument(parser: argparse.ArgumentParser, settings: Sequence[str]) -> None:
    """`--reset SETTING`, repeatable, one of `settings` (by their API names)."""
    parser.add_argument(
        "--reset",
        action="append",
        default=[],
        choices=settings,
        metavar="SETTING",
        help=f"return a setting to its default: {', '.join(settings)}",
    )


def settings_given(args: argparse.Namespace, names: Sequence[str]) -> dict[str, Any]:
    """The settings among `names` given as options, by their API names; on/off as booleans."""
    given = {name: getattr(args, name, None) for name in names}
    return {
        name: value == "on" if value in ("on", "off") else value
        for name, value in given.items()
        if value is not None
    }


def refuse_set_and_reset(given: dict[str, Any], reset: Sequence[str]) -> None:
    """Refused (422) when a setting is both given a value and reset."""
    both = sorted(set(given) & set(reset))
    if both:
        raise Refused(422, {"detail": "both set and reset", "field": ", ".join(both)})


def shown(value: Any) -> str:
    """A setting's value as people read it: on/off, lists and weights spelled out."""
    if value is None:
        return "default"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        return ", ".join(str(item) for item in value) or "none"
    if isinstance(value, dict):
        return ", ".join(f"{name} {item}" for name, item in value.items())
    return str(value)
