"""`kbgate kbs|agents create|set|list|show|delete|history` and `kbgate ask`: a workspace's
knowledge bases and agents, and a question to one of its agents.

Against a running gateway with a workspace key (`--url`/KBGATE_URL, `--key`/KBGATE_KEY) or
the embedded data dir with `--tenant` (`gateway.cli.target`). `create` refuses an id the
workspace already has unless `--replace` is given (then the whole record is replaced, as
by the API's PUT). `set` changes only the settings it is given (`--reset NAME` returns one
to its default): it reads the record and writes it back with those changes, so of two
admins changing the same record at the same moment, the later write wins.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import textwrap
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.cli.gateway_client import MIGRATION_ACTIONS, Gateway, Refused
from gateway.cli.setting_options import (
    add_reset_argument,
    refuse_set_and_reset,
    settings_given,
    shown,
)
from gateway.cli.target import (
    WORKSPACE_MODES,
    Action,
    Commands,
    add_command,
    add_group,
    add_target_arguments,
    runner,
)

#: how much of each passage `kbgate ask` prints (`--json` has all of it)
_EXCERPT_CHARS = 400
#: how often `kbgate kbs migration --watch` reads the progress
_WATCH_EVERY_S = 2.0


def add_knowledge_commands(commands: Commands) -> None:
    """Register `kbs`, `agents` and `ask` on the `kbgate` parser."""
    _add_kb_commands(commands)
    _add_agent_commands(commands)
    _add_ask_command(commands)


def _add_kb_commands(commands: Commands) -> None:
    kbs = add_group(commands, "kbs", "a workspace's knowledge bases (admin key)")
    create_kb = add_command(kbs, "create", "create a knowledge base", workspace=True)
    create_kb.add_argument("kb_id")
    create_kb.add_argument("--name", default="", help="a name for people")
    create_kb.add_argument(
        "--storage", choices=("org", "shared"), help="its collection: the org's (default)"
    )
    _kb_setting_arguments(create_kb)
    _replace_argument(create_kb)
    create_kb.set_defaults(run=runner(_create_kb, workspace=True))
    set_kb = add_command(
        kbs, "set", "change some settings of a knowledge base, the rest kept", workspace=True
    )
    set_kb.add_argument("kb_id")
    set_kb.add_argument("--name", help="a name for people")
    _kb_setting_arguments(set_kb)
    add_reset_argument(set_kb, _KB_SETTINGS)
    set_kb.set_defaults(run=runner(_set_kb, workspace=True))
    list_kbs = add_command(
        kbs, "list", "the workspace's knowledge bases with their counts", workspace=True
    )
    list_kbs.set_defaults(run=runner(_list_kbs, workspace=True))
    show_kb = add_command(
        kbs, "show", "a knowledge base, its settings in force and its counts", workspace=True
    )
    show_kb.add_argument("kb_id")
    show_kb.set_defaults(run=runner(_show_kb, workspace=True))
    delete_kb = add_command(
        kbs, "delete", "delete a knowledge base with its documents", workspace=True
    )
    delete_kb.add_argument("kb_id")
    delete_kb.set_defaults(run=runner(_delete_kb, workspace=True))
    _add_history_command(kbs, "knowledge base", "kb_id", _kb_history)
    _add_migration_command(kbs)


def _add_migration_command(kbs: Commands) -> None:
    migration = add_command(
        kbs, "migration",
        "move a knowledge base to another embedding model: start, show its progress, "
        "validate on the golden set, switch, roll back, retire, cancel",
        workspace=True,
    )  # fmt: skip
    migration.add_argument("kb_id")
    migration.add_argument("action", nargs="?", default="show", choices=list(MIGRATION_ACTIONS))
    migration.add_argument("--model", help="start: the model to move to")
    migration.add_argument(
        "--switch-when-not-worse-by",
        type=float,
        help="start: once built, validate and switch when nDCG@10 drops by at most this",
    )
    migration.add_argument(
        "--override", action="store_true", help="switch: without a validation on the golden set"
    )
    migration.add_argument(
        "--max-ndcg-drop", type=float, help="switch: refuse when nDCG@10 drops by more"
    )
    migration.add_argument(
        "--watch", action="store_true", help="wait, printing progress, until nothing runs"
    )
    migration.set_defaults(run=runner(_migration, workspace=True))


def _add_agent_commands(commands: Commands) -> None:
    agents = add_group(commands, "agents", "a workspace's agents (admin key)")
    create_agent = add_command(
        agents, "create", "create an agent answering from knowledge bases", workspace=True
    )
    create_agent.add_argument("agent_id")
    create_agent.add_argument(
        "--kb", action="append", default=[], dest="kb_ids", help="a knowledge base, in order"
    )
    _agent_setting_arguments(create_agent)
    _replace_argument(create_agent)
    create_agent.set_defaults(run=runner(_create_agent, workspace=True))
    set_agent = add_command(
        agents, "set", "change an agent's knowledge bases or settings, the rest kept",
        workspace=True,
    )  # fmt: skip
    set_agent.add_argument("agent_id")
    set_agent.add_argument(
        "--kb", action="append", dest="kb_ids", help="its knowledge bases, in order (all of them)"
    )
    set_agent.add_argument(
        "--add-kb", action="append", default=[], help="a knowledge base to add, last"
    )
    set_agent.add_argument(
        "--remove-kb", action="append", default=[], help="a knowledge base to take out"
    )
    _agent_setting_arguments(set_agent)
    add_reset_argument(set_agent, _AGENT_SETTINGS)
    set_agent.set_defaults(run=runner(_set_agent, workspace=True))
    list_agents = add_command(
        agents, "list", "the workspace's agents and their knowledge bases", workspace=True
    )
    list_agents.set_defaults(run=runner(_list_agents, workspace=True))
    show_agent = add_command(
        agents, "show", "an agent and the knowledge bases a turn queries", workspace=True
    )
    show_agent.add_argument("agent_id")
    show_agent.set_defaults(run=runner(_show_agent, workspace=True))
    delete_agent = add_command(
        agents, "delete", "delete an agent (its knowledge bases stay)", workspace=True
    )
    delete_agent.add_argument("agent_id")
    delete_agent.set_defaults(run=runner(_delete_agent, workspace=True))
    _add_history_command(agents, "agent", "agent_id", _agent_history)


def _add_history_command(group: Commands, what: str, id_name: str, action: Action) -> None:
    history = add_command(
        group, "history", f"every change to the {what}s: when, by which key, which fields",
        workspace=True,
    )  # fmt: skip
    history.add_argument(id_name, nargs="?", help=f"only this {what}'s changes")
    history.set_defaults(run=runner(action, workspace=True))


def _add_ask_command(commands: Commands) -> None:
    ask = commands.add_parser(
        "ask",
        help="ask an agent a question: the passages a turn returns (retrieve key)",
        description="One retrieval turn, as POST /v1/retrieve: the passages or an abstention.",
        epilog=WORKSPACE_MODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ask.add_argument("agent_id")
    ask.add_argument("question")
    ask.add_argument(
        "--variation", action="append", default=[], dest="variations", help="another wording"
    )
    ask.add_argument(
        "--filter",
        type=_json_object,
        help='only documents whose fields pass this filter (JSON: \'{"region": "eu", '
        '"year": {"$gte": 2024}}\'; operators $eq $ne $in $nin $gt $gte $lt $lte $exists, '
        "$and $or $not, on fields the KBs declare)",
    )
    ask.add_argument("--as-of", help="answer as of this moment (RFC 3339; default now)")
    budget = ask.add_mutually_exclusive_group()
    budget.add_argument("--budget-tokens", type=int, help="send at most this many tokens")
    budget.add_argument("--budget-chars", type=int, help="send at most this many characters")
    add_target_arguments(ask, workspace=True)
    ask.set_defaults(run=runner(_ask, workspace=True))


#: the settings a KB's record stores, as the API names them
_KB_SETTINGS = (
    "top_k", "score_threshold", "keyword_floor", "grounding_floor", "fusion", "drop_copies",
    "metadata_fields", "language",
)  # fmt: skip
#: the settings an agent's record stores, as the API names them
_AGENT_SETTINGS = ("top_k", "score_threshold", "pii_redaction", "filter")


def _kb_setting_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--top-k", type=int, help="passages per turn (default: the agent's)")
    parser.add_argument(
        "--score-threshold", type=float, help="dense floor: the best passage's cosine, 0..1"
    )
    parser.add_argument(
        "--keyword-floor",
        type=float,
        help=(
            "keyword floor: the share of the attainable BM25 score a hit holding the "
            "question's words must reach, 0..1"
        ),
    )
    parser.add_argument("--grounding-floor", type=float, help="grounding check floor, 0..1")
    parser.add_argument(
        "--fusion",
        type=_fusion_weights,
        metavar="DENSE,KEYWORD",
        help="the channels' weights in the fused ranking, e.g. 1,0.4",
    )
    parser.add_argument(
        "--drop-copies", choices=("on", "off"), help="drop passages that copy a better one"
    )
    parser.add_argument(
        "--fields",
        dest="metadata_fields",
        type=_field_types,
        metavar="NAME=TYPE,...",
        help="the document fields a turn may filter by (all of them), e.g. "
        "region=string,year=number,published=datetime,draft=boolean,tags=string_list",
    )
    parser.add_argument(
        "--language",
        type=_language_rules,
        metavar="RULES",
        help="restrict=CODE[+CODE...] and/or prefer=CODE|question, comma-separated, "
        "e.g. restrict=de+en,prefer=question",
    )


def _field_types(value: str) -> dict[str, str]:
    """`NAME=TYPE,...` as the API's `metadata_fields`; the API checks names and types."""
    fields: dict[str, str] = {}
    for part in filter(None, value.split(",")):
        name, sep, kind = part.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"{part!r}: NAME=TYPE")
        fields[name.strip()] = kind.strip()
    return fields


def _language_rules(value: str) -> dict[str, Any]:
    """`restrict=CODE+CODE,prefer=CODE` as the API's `language`."""
    rules: dict[str, Any] = {}
    for part in filter(None, value.split(",")):
        name, _, given = part.partition("=")
        if name == "restrict":
            rules["restrict"] = [code for code in given.split("+") if code]
        elif name == "prefer":
            rules["prefer"] = given
        else:
            raise argparse.ArgumentTypeError(f"{part!r}: restrict=... or prefer=...")
    return rules


def _agent_setting_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--top-k", type=int, help="passages per turn")
    parser.add_argument(
        "--score-threshold", type=float, help="dense floor: the best passage's cosine, 0..1"
    )
    parser.add_argument("--pii-redaction", choices=("on", "off"), help="the agent's redaction gate")
    parser.add_argument(
        "--filter",
        type=_json_object,
        help="a filter every turn of the agent applies (JSON, as `kbgate ask --filter`)",
    )


def _fusion_weights(value: str) -> dict[str, float]:
    """`DENSE,KEYWORD` as the API's `fusion` object; the API checks the values."""
    parts = value.split(",")
    try:
        dense, keyword = (float(part) for part in parts)
    except ValueError:
        raise argparse.ArgumentTypeError("two numbers, DENSE,KEYWORD (e.g. 1,0.4)") from None
    return {"dense": dense, "keyword": keyword}


def _replace_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--replace", action="store_true", help="replace it if the id exists (else refused)"
    )


def _given(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The options given, by their API field names."""
    return {name: getattr(args, name) for name in names if getattr(args, name) is not None}


async def _refuse_existing(
    read: Callable[[], Awaitable[Any]], what: str, args: argparse.Namespace
) -> None:
    """Refused (409) when `read` finds the id and --replace was not given."""
    if args.replace:
        return
    try:
        await read()
    except Refused as refused:
        if refused.status == 404:
            return
        raise
    raise Refused(409, {"detail": f"this workspace has a {what} with this id; pass --replace"})


async def create_knowledge_base(gateway: Gateway, kb_id: str, body: dict[str, Any]) -> bool:
    """Create the KB unless the workspace has it; True when created. Shared with `ingest`."""
    try:
        await gateway.get_knowledge_base(kb_id)
    except Refused as refused:
        if refused.status != 404:
            raise
        await gateway.put_knowledge_base(kb_id, body)
        return True
    return False


async def attach_to_agent(gateway: Gateway, agent_id: str, kb_id: str) -> str:
    """Attach the KB to the agent (created with it alone when new, appended when not
    listed); what was done, in words. Shared with `ingest`."""
    try:
        agent = await gateway.get_agent(agent_id)
    except Refused as refused:
        if refused.status != 404:
            raise
        await gateway.put_agent(agent_id, {"knowledge_base_ids": [kb_id]})
        return f"created agent {agent_id} answering from {kb_id}"
    kb_ids = list(agent["knowledge_base_ids"])
    if kb_id in kb_ids:
        return f"agent {agent_id} already answers from {kb_id}"
    body = {"knowledge_base_ids": [*kb_ids, kb_id], **agent["settings"]}
    await gateway.put_agent(agent_id, body)
    return f"attached {kb_id} to agent {agent_id}"


async def _create_kb(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    await _refuse_existing(lambda: gateway.get_knowledge_base(args.kb_id), "knowledge base", args)
    body = {"name": args.name, **_given(args, "storage"), **settings_given(args, _KB_SETTINGS)}
    answer = await gateway.put_knowledge_base(args.kb_id, body)
    return answer, (
        f"created knowledge base {answer['kb_id']} (storage {answer['storage']}, "
        f"collection {answer['collection']})"
    )


async def _set_kb(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    kb = await gateway.get_knowledge_base(args.kb_id)
    settings = _changed(kb["settings"], settings_given(args, _KB_SETTINGS), args.reset)
    name = kb["name"] if args.name is None else args.name
    body = {"name": name, "storage": kb["storage"], **settings}
    answer = await gateway.put_knowledge_base(args.kb_id, body)
    lines = [f"updated knowledge base {answer['kb_id']}", *_effective_lines(answer["effective"])]
    return answer, "\n".join(lines)


def _changed(stored: dict[str, Any], given: dict[str, Any], reset: list[str]) -> dict[str, Any]:
    """A record's stored settings with `given` set and `reset` removed (back to default)."""
    refuse_set_and_reset(given, reset)
    kept = {name: value for name, value in stored.items() if value is not None}
    return {name: value for name, value in (kept | given).items() if name not in reset}


async def _list_kbs(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    answer = await gateway.list_knowledge_bases()
    lines = []
    for kb in answer["knowledge_bases"]:
        stats = await gateway.knowledge_base_stats(kb["kb_id"])
        lines.append(
            f"{kb['kb_id']}  {kb['name'] or '(no name)'}  storage {kb['storage']}  "
            f"{stats['documents']} documents, {stats['passages']} passages"
        )
    return answer, "\n".join(lines) or "no knowledge bases yet"


async def _show_kb(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    answer = await gateway.get_knowledge_base(args.kb_id)
    answer["stats"] = stats = await gateway.knowledge_base_stats(args.kb_id)
    lines = [
        f"{answer['kb_id']}  {answer['name'] or '(no name)'}  storage {answer['storage']}",
        f"  {stats['documents']} documents, {stats['passages']} passages, "
        f"{stats['held_back']} held back",
        *_effective_lines(answer["effective"]),
    ]
    return answer, "\n".join(lines)


async def _migration(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    body: dict[str, Any] = {}
    if args.action == "start":
        if not args.model:
            raise Refused(422, {"detail": "start needs --model", "field": "model"})
        body = {"model": args.model}
        if args.switch_when_not_worse_by is not None:
            body["switch_when_not_worse_by"] = args.switch_when_not_worse_by
    elif args.action == "switch":
        body = {"override": args.override}
        if args.max_ndcg_drop is not None:
            body["max_ndcg_drop"] = args.max_ndcg_drop
    answer = await gateway.model_migration(args.kb_id, args.action, body)
    while args.watch and _running(answer):
        print(_progress_line(answer), file=sys.stderr, flush=True)  # noqa: T201 — the CLI's own output
        await asyncio.sleep(_WATCH_EVERY_S)
        answer = await gateway.model_migration(args.kb_id, "show")
    return answer, _migration_lines(answer)


def _running(answer: dict[str, Any]) -> bool:
    validation = answer.get("validation") or {}
    return answer["status"] == "building" or validation.get("status") == "running"


def _progress_line(answer: dict[str, Any]) -> str:
    progress = answer["progress"]
    done, total = progress["done"], progress["total"]
    share = f"{100 * done / total:.0f}%" if total else "-"
    return (
        f"{answer['kb_id']}: {answer['status']} {done}/{total} passages ({share}), "
        f"{progress['rate']:g} a second"
    )


def _migration_lines(answer: dict[str, Any]) -> str:
    lines = [
        f"{answer['kb_id']}: {answer['source_model']} -> {answer['target_model']}",
        f"  {_progress_line(answer)}",
        *(
            f"  {s['model']} ({s['vector']}){'  answering' if s['answering'] else ''}"
            for s in answer["vector_sets"]
        ),
    ]
    validation = answer.get("validation")
    if validation and validation.get("status") == "done":
        for side in ("old", "new"):
            figures = validation[side]
            floors = ", ".join(f"{k} {v:g}" for k, v in figures["recommended"].items())
            lines.append(
                f"  {side}: nDCG@10 {figures['ndcg_10']:.4f}, recall@10 "
                f"{figures['recall_10']:.4f}, abstention answerable "
                f"{figures['abstention']['answerable']:.0%} off-topic "
                f"{figures['abstention']['off_topic']:.0%}; recommended {floors}"
            )
    elif validation:
        lines.append(f"  validation {validation['status']}")
    if answer.get("error"):
        lines.append(f"  error: {answer['error']}")
    return "\n".join(lines)


async def _delete_kb(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    answer = await gateway.delete_knowledge_base(args.kb_id)
    gone = answer["deleted"]
    return answer, (
        f"deleted knowledge base {answer['kb_id']}: {gone['documents']} documents, "
        f"{gone['passages']} passages; taken out of {gone['agents_detached']} agents"
    )


async def _create_agent(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    await _refuse_existing(lambda: gateway.get_agent(args.agent_id), "agent", args)
    body = {"knowledge_base_ids": args.kb_ids, **settings_given(args, _AGENT_SETTINGS)}
    answer = await gateway.put_agent(args.agent_id, body)
    return answer, f"created agent {answer['agent_id']}\n" + _agent_lines(answer)


async def _set_agent(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    agent = await gateway.get_agent(args.agent_id)
    kb_ids = list(agent["knowledge_base_ids"] if args.kb_ids is None else args.kb_ids)
    for kb_id in args.remove_kb:
        if kb_id not in kb_ids:
            raise Refused(404, {"detail": f"agent {args.agent_id} does not answer from {kb_id}"})
        kb_ids.remove(kb_id)
    kb_ids += [kb_id for kb_id in args.add_kb if kb_id not in kb_ids]
    settings = _changed(agent["settings"], settings_given(args, _AGENT_SETTINGS), args.reset)
    answer = await gateway.put_agent(args.agent_id, {"knowledge_base_ids": kb_ids, **settings})
    return answer, f"updated agent {answer['agent_id']}\n" + _agent_lines(answer)


async def _list_agents(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    answer = await gateway.list_agents()
    lines = [
        f"{agent['agent_id']}  answers from {', '.join(agent['knowledge_base_ids']) or 'nothing'}"
        for agent in answer["agents"]
    ]
    return answer, "\n".join(lines) or "no agents yet"


async def _show_agent(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    answer = await gateway.get_agent(args.agent_id)
    return answer, f"{answer['agent_id']}\n" + _agent_lines(answer)


async def _delete_agent(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    answer = await gateway.delete_agent(args.agent_id)
    return answer, f"deleted agent {answer['agent_id']} (its knowledge bases stay)"


async def _kb_history(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    answer = await gateway.workspace_changes("knowledge_base", args.kb_id)
    return answer, _change_lines(answer, "knowledge base")


async def _agent_history(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    answer = await gateway.workspace_changes("agent", args.agent_id)
    return answer, _change_lines(answer, "agent")


def _change_lines(answer: dict[str, Any], what: str) -> str:
    lines = []
    for change in answer["changes"]:
        line = (
            f"{change['at']}  {change['key_id']}  {what} {change['object_id']} {change['action']}"
        )
        if change["fields"]:
            line += ": " + ", ".join(change["fields"])
        if "knowledge_base_ids" in change["fields"]:
            line += f" (knowledge bases now: {shown(change['knowledge_base_ids'])})"
        lines.append(line)
    return "\n".join(lines) or "no changes yet"


def _agent_lines(answer: dict[str, Any]) -> str:
    queried = ", ".join(answer["knowledge_bases_queried"]) or "none"
    lines = [f"  knowledge bases queried: {queried}"]
    if answer["knowledge_bases_skipped"]:
        skipped = ", ".join(answer["knowledge_bases_skipped"])
        lines.append(f"  beyond the cap, skipped: {skipped}")
    return "\n".join([*lines, *_effective_lines(answer["effective"])])


def _effective_lines(effective: dict[str, Any]) -> list[str]:
    return [
        f"  {name}: {shown(value['value'])} (set by {value['source']})"
        for name, value in effective.items()
    ]


async def _ask(gateway: Gateway, args: argparse.Namespace) -> tuple[Any, str]:
    body: dict[str, Any] = {"agent_id": args.agent_id, "question": args.question}
    if args.variations:
        body["variations"] = args.variations
    if args.filter is not None:
        body["filter"] = args.filter
    if args.as_of is not None:
        body["as_of"] = args.as_of
    if args.budget_tokens is not None:
        body["budget"] = {"tokens": args.budget_tokens}
    if args.budget_chars is not None:
        body["budget"] = {"characters": args.budget_chars}
    answer = await gateway.retrieve(body)
    if answer["abstained"]:
        return answer, _abstention(args.agent_id, answer.get("reason"))
    lines = []
    for rank, passage in enumerate(answer["passages"], start=1):
        title = passage["title"] or passage["document_id"]
        lines.append(
            f"{rank}. {title}  [{passage['knowledge_base_id']}/{passage['document_id']}]  "
            f"score {passage['score']:.3f}"
        )
        text = " ".join(passage["text"].split())
        lines.append(textwrap.indent(textwrap.fill(_excerpt(text), width=96), "   "))
    return answer, "\n".join(lines)


def _json_object(text: str) -> dict[str, Any]:
    """A command-line JSON object (a filter)."""
    try:
        found = json.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {error}") from None
    if not isinstance(found, dict):
        raise argparse.ArgumentTypeError("a filter is a JSON object")
    return found


def _abstention(agent_id: str, reason: str | None) -> str:
    """Why a turn abstained, and what an admin can do about it."""
    if reason == "over_budget":
        return "abstained (over_budget): not one passage fits the budget; give a larger one"
    if reason == "no_knowledge_base":
        return (
            f"abstained (no_knowledge_base): agent {agent_id} has no knowledge base to "
            f"search; attach one: kbgate agents set {agent_id} --add-kb KB_ID"
        )
    return (
        f"abstained ({reason}): no passage cleared the floors; the agent's knowledge bases "
        "do not answer this question. If they should: lower a KB's floors (kbgate kbs set "
        "KB_ID --score-threshold 0.35 --keyword-floor 0.35) or calibrate them on a golden "
        "set (kbgate eval --url URL --kb KB_ID --golden-set FILE --apply)"
    )


def _excerpt(text: str) -> str:
    if len(text) <= _EXCERPT_CHARS:
        return text
    return text[:_EXCERPT_CHARS].rsplit(" ", 1)[0] + " …"
