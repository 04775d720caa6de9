"""Claude Code hooks: a health line at SessionStart, vault context on UserPromptSubmit.

Claude Code runs a command hook with the event as JSON on stdin (``session_id``, ``cwd``,
``hook_event_name``, plus ``source`` for SessionStart and ``prompt`` for
UserPromptSubmit) and, on exit 0, reads JSON from stdout::

    {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "..."}}

``additionalContext`` is added to the model's context. Hooks here never block or fail a
session: any problem gives exit 0 with a short note (SessionStart) or no output at all
(UserPromptSubmit). Settings::

    "hooks": {
      "SessionStart": [{"hooks": [{"type": "command", "command": "retriever hook session-start"}]}],
      "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "retriever hook prompt"}]}]
    }
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from retriever.hook_state import remember_prompt
from retriever.redact import redact

if TYPE_CHECKING:
    from retriever.app import Retriever

log = logging.getLogger(__name__)

# Claude Code replaces hook output over 10,000 characters with a preview: stay below.
MAX_CONTEXT_CHARS = 9_000
MAX_STDIN_BYTES = 1_000_000
MIN_PROMPT_CHARS = 12
MIN_PROMPT_WORDS = 3
# Unasked-for context must be precise: inject only when the best passage holds at least
# this share of the prompt's search terms (semantic similarity alone is too loose a
# signal for every prompt; the agent can still search semantically itself).
MIN_COVERAGE = 0.5
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_WORD = re.compile(r"\w+", re.UNICODE)
# Conversation glue that never needs the vault ("thanks", "ok go on", "lgtm!").
_SMALL_TALK = re.compile(
    r"^(hi|hello|hey|yo|thanks|thank you|thx|ty|ok|okay|k|yes|yep|yeah|no|nope|sure|"
    r"continue|go on|go ahead|proceed|carry on|keep going|lgtm|looks good|done|great|"
    r"cool|nice|perfect|good|awesome|got it|sounds good|please do|do it)\b",
    re.IGNORECASE,
)
_TOOLS_LINE = (
    "The user's markdown notes vault is searchable with the retriever MCP tools "
    "(search, get_context, read_note, list_notes, links, health); cite passages as "
    "path:start-end."
)


def hook_output(event: str, context: str) -> str:
    """The JSON Claude Code expects from a hook that adds context."""
    payload = {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}
    return json.dumps(payload, ensure_ascii=False)


def read_hook_input(stream: TextIO) -> dict[str, Any]:
    """The hook event from stdin; {} when absent or not JSON (run by hand, say)."""
    try:
        if stream.isatty():
            return {}
        raw = stream.read(MAX_STDIN_BYTES)
        data = json.loads(raw) if raw.strip() else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _cap(text: str, limit: int = MAX_CONTEXT_CHARS) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 40].rsplit("\n", 1)[0]
    return cut + "\n(cut to fit the hook output limit)\n"


# --------------------------------------------------------------------------- SessionStart


def session_context(app: Retriever, *, timeout: float = 2.0) -> str:
    """One short paragraph for the model: can it rely on vault search this session?"""
    from retriever.health import run_health

    try:
        report = run_health(app, timeout=timeout)
    except Exception as exc:  # the check itself broke: say so, do not guess
        log.warning("health check failed: %s", exc)
        return (
            f"{_TOOLS_LINE} Its health check failed ({type(exc).__name__}), so vault search "
            "may not work; if a search fails or returns nothing, do not conclude the notes "
            "lack the answer."
        )
    if report.verdict == "healthy":
        notes = report.facts.get("notes_indexed")
        status = f"Status: healthy, hybrid search over {notes} notes." if notes else ""
        return f"{_TOOLS_LINE} {status}".strip()
    problems = "; ".join(f"{c.name}: {c.detail}" for c in report.problems[:3])
    if report.verdict == "down":
        return (
            f"{_TOOLS_LINE} Status: DOWN, vault search is unavailable ({problems}). Tool "
            "errors or empty answers this session do not mean the notes lack the answer; "
            "tell the user to run `retriever health`."
        )
    mode = {"lexical": "keyword-only", "files": "keyword-only (files scanned, no database)"}
    said = mode.get(report.search_mode, "hybrid")
    return (
        f"{_TOOLS_LINE} Status: degraded, {said} search works but results may be "
        f"incomplete ({problems})."
        + (" Phrase queries with words the notes would use." if said != "hybrid" else "")
    )


def session_start(app: Retriever) -> str:
    """The SessionStart hook's stdout: the health summary as additional context."""
    from retriever.notes import scrub_message  # lazy: the tool hooks import this module

    try:
        context = session_context(app)
    except Exception as exc:  # never break the session start
        context = f"{_TOOLS_LINE} (status unknown: {type(exc).__name__})"
    return hook_output("SessionStart", _cap(redact(scrub_message(app, context))[0]))


# --------------------------------------------------------------------------- UserPromptSubmit


def is_trivial(prompt: str) -> bool:
    """Prompts that never need the vault: slash commands, greetings, acknowledgements."""
    text = prompt.strip()
    if not text or text.startswith(("/", "!")):  # slash command, bash mode
        return True
    words = _WORD.findall(text)
    if len(text) < MIN_PROMPT_CHARS or len(words) < MIN_PROMPT_WORDS:
        return True
    return len(words) <= 5 and bool(_SMALL_TALK.match(text))


def _query(prompt: str) -> str:
    """What to search for: the prose of the prompt (pasted code blocks dropped)."""
    prose = _FENCE.sub(" ", prompt)
    text = " ".join(prose.split()) or " ".join(prompt.split())
    return text[:2_000]


def cited_block(
    app: Retriever,
    query: str,
    header: Callable[[str], str],
    *,
    budget_tokens: int,
    min_coverage: float,
    mode: str | None = None,
    what: str = "hook",
) -> str:
    """A redacted, capped block of cited passages under ``header(search mode)``, or ""
    when search fails or the vault does not clearly cover the query: unasked-for context
    must be precise, and a hook must never stand in the agent's way."""
    try:
        # fresh=False: no re-indexing on the agent's path; the indexer keeps up.
        result = app.search(query, budget_tokens=budget_tokens, mode=mode, fresh=False)
    except Exception as exc:
        log.warning("%s: search failed: %s", what, type(exc).__name__)
        return ""
    if not result.hits or result.likely_absent or result.coverage < min_coverage:
        return ""
    body = result.to_markdown()
    if result.degraded_reason:
        from retriever.notes import scrub_message  # lazy: the tool hooks import this module

        body = body.replace(result.degraded_reason, scrub_message(app, result.degraded_reason))
    return _cap(redact(f"{header(result.mode)}\n\n{body}")[0])


def prompt_context(app: Retriever, prompt: str, budget_tokens: int = 600) -> str:
    """The UserPromptSubmit hook's stdout: a small cited context block, or "" for none.

    Nothing is injected for trivial prompts, when the vault probably does not cover the
    prompt, or when search fails: a hook must never stand between the user and Claude.
    """
    if not isinstance(prompt, str) or is_trivial(prompt):
        return ""

    def header(mode: str) -> str:
        return (
            f"Possibly relevant excerpts from the user's notes (retriever, {mode} search; "
            "cite as path:start-end, open more with read_note; ignore if unrelated):"
        )

    block = cited_block(
        app,
        _query(prompt),
        header,
        budget_tokens=budget_tokens,
        min_coverage=MIN_COVERAGE,
        what="prompt hook",
    )
    return hook_output("UserPromptSubmit", block) if block else ""


# --------------------------------------------------------------------------- CLI glue


def _app(vault: Path | None) -> Retriever:
    from retriever.config import settings_from
    from retriever.db import start_early

    settings = settings_from(vault=vault)
    start_early(settings.database_url, settings.home)  # while the next import runs
    from retriever.app import open_app

    return open_app(settings)


def run_session_start_hook(
    vault: Path | None = None, *, stdin: TextIO | None = None, stdout: TextIO | None = None
) -> int:
    """``retriever hook session-start``: always exit 0, always valid JSON."""
    read_hook_input(stdin or sys.stdin)  # consumed so Claude Code's pipe never blocks
    out = stdout or sys.stdout
    app = None
    try:
        app = _app(vault)
        text = session_start(app)
    except Exception as exc:
        text = hook_output("SessionStart", f"{_TOOLS_LINE} (status unknown: {type(exc).__name__})")
    finally:
        if app is not None:
            app.close()
    out.write(text + "\n")
    out.flush()
    return 0


def run_prompt_hook(
    vault: Path | None = None,
    *,
    budget_tokens: int = 600,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
) -> int:
    """``retriever hook prompt``: prints context JSON or nothing; always exit 0."""
    event = read_hook_input(stdin or sys.stdin)
    prompt = event.get("prompt")
    if not isinstance(prompt, str) or is_trivial(prompt):
        return 0  # decided before opening anything: trivial prompts cost ~nothing
    app = None
    try:
        app = _app(vault)
        remember_prompt(app.settings, event.get("session_id"), prompt)  # for post-tool
        text = prompt_context(app, prompt, budget_tokens=budget_tokens)
    except Exception as exc:
        log.warning("prompt hook failed: %s", type(exc).__name__)
        text = ""
    finally:
        if app is not None:
            app.close()
    if text:
        out = stdout or sys.stdout
        out.write(text + "\n")
        out.flush()
    return 0
