"""What each of kbgate's precision rules for technical text buys, on every PII set.

The four sets of `bench.pii_eval`, scored the same way (the default policy, span overlap,
false redactions per 1,000 passages), first with every rule on, then with each rule of
`RULES` switched off in turn (the function that decides it patched to say "no"), one
Redactor for all. A rule that holds on one set and costs on another shows it here.

    uv run python -m bench.pii_rules                 # all rules, four sets
    uv run python -m bench.pii_rules --rules acronym heading

Prints a Markdown table (rule x set) for docs/decisions/pii-technical-text.md; writes
`bench/results/pii_rules.json`.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from bench.pii_eval import (
    DATA,
    HERE,
    SETS,
    Passage,
    default_datasets,
    detect_all,
    generated_passages,
    load_labelled,
    read_data,
    score_set,
    set_path,
)
from gateway.safety.redaction import Redactor

RESULTS = HERE / "results" / "pii_rules.json"
_NEVER = re.compile(r"(?!)")


def _no(*_: Any) -> bool:
    return False


def _yes(*_: Any) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class Rule:
    """A rule, what it keeps (an example from the sets), and how to switch it off: each
    `target` (a module attribute) replaced by `off`."""

    name: str
    keeps: str
    targets: tuple[str, ...]
    off: Callable[..., bool] | re.Pattern[str]


RULES = (
    Rule(
        "acronym",
        "`Mac OS X`, `Wing IDE`, `Press CTRL+C`, `An ASGI web server`",
        ("gateway.safety.names.is_acronym", "gateway.safety.people.is_acronym"),
        _no,
    ),
    Rule(
        "line-not-wrapped",
        "`AUTHOR` / `Originally written by` (a man page's section)",
        ("gateway.safety.names._unwrapped",),
        _no,
    ),
    Rule(
        "heading",
        "`Minor Improvements and bugfixes` over `~~~~`",
        ("gateway.safety.names.in_heading",),
        _no,
    ),
    Rule(
        "header-block",
        "`Classifier: License :: OSI Approved :: Apache Software License`",
        ("gateway.safety.technical._FIELD",),
        _NEVER,
    ),
    Rule(
        "made-by-company",
        "`created by Facebook`",
        ("gateway.safety.names._known_or_full",),
        _yes,
    ),
    Rule(
        "past-tense-opening",
        "`Contributed Windows and MS-DOS improvements`",
        ("gateway.safety.people._PAST_TENSE",),
        _NEVER,
    ),
    Rule(
        "company-in-list",
        "`SynaptiCAD, Inc.` in an AUTHORS list",
        ("gateway.safety.names._COMPANY_TAIL",),
        _NEVER,
    ),
    Rule(
        "item-opened-by-name",
        "finds `- Niklas Hambüchen`; keeps `* XML: Mark SVG files`",
        ("gateway.safety.people._opens_with_a_name",),
        _no,
    ),
    Rule(
        "spaced-dash",
        "`* James Strachan -- Kotlin lexer`",
        ("gateway.safety.people._SPACED_DASH",),
        _NEVER,
    ),
    Rule(
        "ssh-algorithm",
        "`sk-ssh-ed25519@openssh.com`",
        ("gateway.safety.recognizers.names_an_algorithm",),
        _no,
    ),
    Rule(
        "second-at",
        "`a@b@c.com`",
        ("gateway.safety.recognizers.follows_an_at_sign",),
        _no,
    ),
    Rule(
        "call-argument",
        "`ipaddress.IPv4Address(3232235521)`",
        ("gateway.safety.redaction.opens_call_arguments",),
        _no,
    ),
)


def load_sets(datasets: Path) -> dict[str, list[Passage]]:
    return {
        name: generated_passages(read_data(DATA))
        if name == "generated"
        else load_labelled(set_path(name, datasets), name)
        for name in SETS
    }


def figures(redactor: Redactor, sets: dict[str, list[Passage]]) -> dict[str, dict[str, Any]]:
    """Per set: false redactions per 1,000 passages (policy types), PERSON P/R, EMAIL R."""
    out: dict[str, dict[str, Any]] = {}
    for name, passages in sets.items():
        found, _ = detect_all(redactor, passages)
        scored = score_set(passages, found)
        person = scored["per_type"].get("PERSON", {})
        email = scored["per_type"].get("EMAIL_ADDRESS", {})
        out[name] = {
            "false_redactions": scored["all_policy_types"]["false_redactions"],
            "false_redactions_per_1k": scored["all_policy_types"]["false_redactions_per_1k"],
            "person_precision": person.get("precision"),
            "person_recall": person.get("recall"),
            "email_recall": email.get("recall"),
        }
    return out


def without(rule: Rule) -> ExitStack:
    """A context in which `rule` is switched off."""
    stack = ExitStack()
    for target in rule.targets:
        stack.enter_context(mock.patch(target, rule.off))
    return stack


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rules", nargs="+", choices=[r.name for r in RULES], default=None)
    parser.add_argument("--datasets", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    sets = load_sets(args.datasets or default_datasets())
    redactor = Redactor.build()
    chosen = [r for r in RULES if args.rules is None or r.name in args.rules]
    report: dict[str, Any] = {"analyzer": redactor.analyzer_version, "all_rules": {}, "without": {}}
    report["all_rules"] = figures(redactor, sets)
    for rule in chosen:
        with without(rule):
            report["without"][rule.name] = {"keeps": rule.keeps, **figures(redactor, sets)}
        print(f"{rule.name}: done", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(markdown_table(report))
    return 0


def markdown_table(report: dict[str, Any]) -> str:
    """Rule x set: false redactions /1k, PERSON P and R (and EMAIL R where it moves)."""
    names = list(report["all_rules"])
    head = "| | " + " | ".join(f"{n}: FR/1k, PERSON P / R" for n in names) + " |"
    lines = [head, "|---" * (len(names) + 1) + "|"]
    rows = [("all rules on", report["all_rules"])]
    rows += [(f"without {rule}", row) for rule, row in report["without"].items()]
    for label, row in rows:
        cells = []
        for n in names:
            s = row[n]
            cell = (
                f"{s['false_redactions_per_1k']:.1f}, "
                f"{_fmt(s['person_precision'])} / {_fmt(s['person_recall'])}"
            )
            if s["email_recall"] != report["all_rules"][n]["email_recall"]:
                cell += f", EMAIL R {_fmt(s['email_recall'])}"
            cells.append(cell)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    raise SystemExit(main())
