"""Pairbot's comment commands: one pure grammar shared by the GitHub App and the Action.

`parse_commands(body)` finds every command in an issue or PR comment and returns, in order, a
`Command` or a `CommandError` (what was wrong, what is allowed, and the usage to reply with).
The caller acts on the *first* result only and replies about the rest (a `CommandError` first
means: reply with its usage, run nothing). `may_act` is the shared "who may act" decision.
Nothing here does I/O (docs/cycle.md, "Commands"; docs/security.md).

Grammar (decisions written down so the App, the Action and the help text agree):

- A command is one line that starts, after at most three spaces, with `/<trigger>`,
  `@<trigger>` or `@<app-slug>[bot]`, followed by whitespace or the end of the line
  (`/pairing`, `@pairbot`, `/pair-x` are not the trigger `pair`), then a verb. Trigger, slug,
  verb and argument keys are case-insensitive. `/pair` with no verb, or an unknown verb, is a
  `CommandError` whose usage is the whole help.
- The comment is read the way a reader sees it (`app.domain.text.sanitize.visible_lines`: one
  Markdown/HTML parse, linear, after a size cap): HTML comments, attributes, hidden elements,
  image alt text, zero-width characters and whole bidi runs are gone, line numbers are kept,
  so a command inside an HTML comment never runs and `/pa<U+200B>ir approve` runs as the
  `/pair approve` a reader sees. A command stands only on a line of a top-level paragraph (or
  of raw HTML at the top level, outside quotes, code and hidden elements): never in a list
  item, a heading, a table, a quote or code. A line whose original text held a bidi
  embedding/override/isolate control and reads as a command once the controls are removed is
  a `CommandError` (it displays differently from how it reads), never a command. Before any
  of that, a cheap search for the trigger (`may_be_addressed`: in the raw text, with format
  characters removed, and in the reading's own normalisation) returns nothing for the
  comments that address no one (most of them) — exactly those no reading finds a command
  in — and a comment over the cap is read up to its last line break before the cap.
- Never a command, also read on the raw lines as a second, conservative check: lines inside
  fenced code (``` or ~~~, CommonMark: closed only by the same character at least as long,
  with no info string; an unclosed fence runs to the end; a fence right after a list marker
  counts too), lines indented four columns or more (indented code; tabs count to the next
  multiple of four), quoted lines (`>`) and the lines that lazily continue a quote up to the
  next blank line. A line must be prose in both readings, so neither an HTML comment nor a
  zero-width character can open or close a code block to uncover a command.
- Arguments of `implement` / `refine` are `key: value` pairs in any order; a value runs to the
  next known key (`until`, `merge`, `agent`, `prepare`) or the end of the line. `until:` is
  `ready-for-merge | merged`; `merge:` / `prepare:` are gates checked by
  `app.domain.card.autonomy.parse_gate_condition` (stored as a `GateCondition`); `agent:` is one
  name without whitespace. A key twice, a key of another verb, or text before the first key
  is an error.
- `answer` / `feedback` take the rest of the line plus the following plain lines up to a blank
  line, a quote, a code block, an indented line or another command line (joined with `\\n`);
  the text must not be empty, so `/pair answer` alone on its line with the text below works.
- `rerun-proof` takes exactly one phase name (lowercase letters, digits, `.`, `_`, `-`).
- `status`, `approve`, `retry`, `abandon` and `help` take nothing: trailing text is an error,
  so `/pair approve if CI is green` merges nothing.
- `Command.line` is the 1-based line of the command in the comment (CRLF, CR and LF all end a
  line); `Command.raw` is that one line, hidden content removed, surrounding whitespace trimmed.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Final, Literal

from app.domain.card.autonomy import ALLOWED_GATE_FORMS, GateCondition, parse_gate_condition
from app.domain.text.invisible import BIDI_CONTROLS
from app.domain.text.sanitize import reads_any, visible_lines
from hosts.vocabulary import GITHUB, Vocabulary

Verb = Literal[
    "implement",
    "refine",
    "status",
    "approve",
    "answer",
    "feedback",
    "retry",
    "rerun-proof",
    "abandon",
    "help",
]
ArgValue = str | GateCondition

DEFAULT_TRIGGER: Final = "pair"

# verb -> (arguments as written in the usage line, what it does). The order is the help's order.
_SPECS: Final[dict[Verb, tuple[str, str]]] = {
    "implement": (
        "[until: ready-for-merge|merged] [merge: always|never|when has:<labels> lacks:<labels>]"
        " [agent: <name>]",
        "start (or resume) the card's cycle as a one-card batch",
    ),
    "refine": (
        "[prepare: always|never|when has:<labels> lacks:<labels>]",
        "only refine the card into acceptance criteria and a plan",
    ),
    "status": ("", "reply with the card's status, next step, blocking gate and budget left"),
    "approve": ("", "clear an awaiting-approval or awaiting-human park (at the merge gate: merge)"),
    "answer": ("<text>", "answer a needs-input park"),
    "feedback": ("<text>", "re-run the last transition with this feedback"),
    "retry": ("", "retry a blocked step"),
    "rerun-proof": ("<phase>", "invalidate a phase's recorded proof-of-work"),
    "abandon": ("", "stop the cycle (abandoned) and keep everything for the record"),
    "help": ("", "show this usage"),
}
VERBS: Final[tuple[Verb, ...]] = tuple(_SPECS)

# Which `key:` arguments each keyed verb accepts. A value runs to the next of *any* known key,
# so `refine merge: never` says "merge: is not an argument of refine" instead of a gate error.
_KEYS: Final[dict[Verb, tuple[str, ...]]] = {
    "implement": ("until", "merge", "agent"),
    "refine": ("prepare",),
}
_KEY = re.compile(r"(?<!\S)(until|merge|agent|prepare)[ \t]*:", re.IGNORECASE)
UNTIL_VALUES: Final = ("ready-for-merge", "merged")
_PHASE = re.compile(r"[a-z0-9._-]+")
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?")
_BOT_SUFFIX = re.compile(r"\[bot\]\Z", re.IGNORECASE)

# CommonMark block structure, read on tab-expanded lines.
_LINE_END = re.compile(r"\r\n?")
_FENCE = re.compile(r"(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>.*)\Z")
_LIST_FENCE = re.compile(
    r"(?P<indent>[ ]*(?:(?:[-+*]|\d{1,9}[.)])[ ]+)+)(?P<fence>`{3,}|~{3,})(?P<info>.*)\Z"
)
_QUOTE = re.compile(r" {0,3}>")
# Every character that can hide inside a trigger word (format characters, Unicode category
# Cf): removed where a raw line is read as a command (the bidi check, the indentation check,
# and so the pre-check, `may_be_addressed`).
_ODD_INDENT = re.compile(r"[ \t]*[^\S \t\n]")
_FORMAT = re.compile("[\u00ad\u034f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff"
                     "\U000e0000-\U000e007f]")  # fmt: skip

_WRITE_PERMISSIONS: Final = frozenset({"write", "maintain", "admin"})


@dataclass(frozen=True)
class Command:
    """One well-formed command. `args` holds `until`/`agent`/`phase` (str), `merge`/`prepare`
    (GateCondition); `text` is the `answer`/`feedback` text, else None."""

    verb: Verb
    args: dict[str, ArgValue] = field(default_factory=dict, hash=False)
    text: str | None = None
    line: int = 0
    raw: str = ""

    def _str(self, key: str) -> str | None:
        value = self.args.get(key)
        return value if isinstance(value, str) else None

    def _gate(self, key: str) -> GateCondition | None:
        value = self.args.get(key)
        return value if isinstance(value, GateCondition) else None

    @property
    def until(self) -> str | None:
        return self._str("until")

    @property
    def agent(self) -> str | None:
        return self._str("agent")

    @property
    def phase(self) -> str | None:
        return self._str("phase")

    @property
    def merge(self) -> GateCondition | None:
        return self._gate("merge")

    @property
    def prepare(self) -> GateCondition | None:
        return self._gate("prepare")


@dataclass(frozen=True)
class CommandError:
    """A line addressed to pairbot that runs nothing: reply with `message` and `usage`."""

    line: int
    raw: str
    message: str
    usage: str


@dataclass(frozen=True)
class Decision:
    """Whether a comment's author may act; `silent` means ignore without replying."""

    allowed: bool
    reason: str
    silent: bool


def usage(verb: Verb, trigger: str = DEFAULT_TRIGGER) -> str:
    """The usage line of one verb, e.g. `/pair rerun-proof <phase>`."""
    arguments = _SPECS[verb][0]
    return f"/{trigger} {verb}" + (f" {arguments}" if arguments else "")


def help_text(trigger: str = DEFAULT_TRIGGER) -> str:
    """The usage of every verb, as Markdown for a reply comment."""
    lines = [
        f"pairbot commands: put one at the start of its own line, outside code blocks and "
        f"quotes, as `/{trigger} <verb>` or `@{trigger} <verb>`. Only the first command in a "
        "comment runs.",
        "",
    ]
    lines += [f"- `{usage(verb, trigger)}`: {_SPECS[verb][1]}" for verb in VERBS]
    return "\n".join(lines)


def parse_commands(
    body: str, *, trigger: str = DEFAULT_TRIGGER, app_slug: str | None = None
) -> list[Command | CommandError]:
    """Every command line of a comment, in order (see the module docstring for the grammar).

    Raises ValueError only for an invalid `trigger` or `app_slug` (configuration, not input).
    """
    start = _command_start(trigger, app_slug)  # first: it checks the trigger and the slug
    addressed = _addressed(trigger, app_slug)
    if not may_be_addressed(body, addressed):
        return []
    return _parse_addressed(body, trigger, start, addressed)


def addresses_pairbot(
    body: str, *, trigger: str = DEFAULT_TRIGGER, app_slug: str | None = None
) -> bool:
    """False only when `parse_commands(body, ...)` is certainly []: its cheap pre-check
    (`may_be_addressed`), which the App's edge runs before it queues a comment for its worker
    to read in full. Raises ValueError like `parse_commands`."""
    _command_start(trigger, app_slug)  # it checks the trigger and the slug
    return may_be_addressed(body, _addressed(trigger, app_slug))


def may_be_addressed(body: str, addressed: re.Pattern[str]) -> bool:
    """False only for a comment no reading can find a command in: `parse_commands` is then [].

    Why that holds: a result comes from one of two places, and each needs `addressed` to find
    something in a text this checks. (1) A command start on a visible line: `visible_lines`
    with `addressed` reads no line at all unless `addressed` finds something in its own
    normalisation of the text (`reads_any` is that very search). (2) A line with a bidi control
    that reads as a command once the format characters are gone (`_reordered_command`): its
    `start` match holds one of `addressed`'s alternatives, in a line of `_FORMAT.sub("", body)`
    (neither `_FORMAT` nor the pattern holds a line break, so splitting lines changes nothing).
    A plain ASCII comment holds no format character: its raw search is (2)'s, and (1)'s is
    `reads_any`'s (cheap for it: nothing invisible to remove). tests/domain/intake/
    test_command_precheck.py holds this against the full parse on generated comments.
    """
    if addressed.search(body) is not None:
        return True
    if not body.isascii() and addressed.search(_FORMAT.sub("", body)) is not None:
        return True
    return reads_any(body, addressed)


def _parse_addressed(
    body: str, trigger: str, start: re.Pattern[str], addressed: re.Pattern[str]
) -> list[Command | CommandError]:
    """`parse_commands` past its pre-check (`may_be_addressed`): the full reading."""
    original = _LINE_END.sub("\n", body).split("\n")
    reading = visible_lines(body, addressed)
    visible = reading.lines
    raw_prose = _prose_mask(original)
    prose = [a and b for a, b in zip(raw_prose, reading.prose, strict=True)]
    results: list[Command | CommandError] = []
    index = 0
    while index < len(visible):
        match = start.match(visible[index]) if prose[index] else None
        if match is not None and _ODD_INDENT.match(_FORMAT.sub("", original[index])):
            match = None  # a line indented by a no-break space is not a command line
        reordered = raw_prose[index] and _reordered_command(start, original[index])
        if match is None and not reordered:
            index += 1
            continue
        raw = visible[index].strip()
        line = index + 1
        rest = visible[index][match.end() :] if match is not None else ""
        index += 1
        if reordered:
            results.append(
                CommandError(
                    line,
                    raw,
                    "this line holds bidirectional control characters, so it displays "
                    "differently from how it reads; type the command again without them",
                    help_text(trigger),
                )
            )
            continue
        following = _continuation(visible, prose, start, index)
        command, taken = _one_command(rest, line, raw, trigger, following)
        results.append(command)
        index += taken
    return results


def _continuation(
    visible: list[str], prose: list[bool], start: re.Pattern[str], index: int
) -> list[str]:
    """The prose lines from `index` on that continue a command's text (an answer's or a
    feedback's): up to a blank line, a line that is not prose, or the next command line."""
    lines: list[str] = []
    while (
        index < len(visible)
        and prose[index]
        and visible[index].strip()
        and start.match(visible[index]) is None
    ):
        lines.append(visible[index].strip())
        index += 1
    return lines


def _one_command(
    rest: str, line: int, raw: str, trigger: str, following: list[str]
) -> tuple[Command | CommandError, int]:
    """The command whose verb and arguments are `rest`, and how many of the `following` lines
    it took (only an answer's or a feedback's text continues there)."""
    verb_match = re.match(r"\s*(\S+)", rest)
    if verb_match is None:
        missing = f"a verb is missing; allowed: {', '.join(VERBS)}"
        return CommandError(line, raw, missing, help_text(trigger)), 0
    name = verb_match.group(1).lower()
    arguments = rest[verb_match.end() :].strip()
    if name not in _SPECS:
        unknown = f"unknown verb {verb_match.group(1)!r}; allowed: {', '.join(VERBS)}"
        return CommandError(line, raw, unknown, help_text(trigger)), 0
    verb: Verb = next(v for v in VERBS if v == name)
    if verb in ("answer", "feedback"):
        text = "\n".join([arguments, *following]).strip()
        if text:
            return Command(verb, {}, text, line, raw), len(following)
        return CommandError(line, raw, f"{verb} needs a text", usage(verb, trigger)), len(following)
    outcome = _arguments(verb, arguments)
    if isinstance(outcome, str):
        help_usage = help_text(trigger) if verb == "help" else usage(verb, trigger)
        return CommandError(line, raw, outcome, help_usage), 0
    return Command(verb, outcome, None, line, raw), 0


def may_act(
    *,
    author_id: int,
    author_login: str,
    author_is_bot: bool,
    permission: str | None,
    allowlist: frozenset[int],
    own_bot_id: int | None,
    words: Vocabulary = GITHUB,
) -> Decision:
    """Who may act (docs/security.md), decided on numeric ids and permission only.

    In order: pairbot's own events are ignored silently; another bot is ignored silently unless
    its id is allowlisted; an allowlisted id may act whatever its login or permission; a human
    with write, maintain or admin permission may act; everyone else gets a polite refusal.
    `author_login` only names the author in that refusal: a login can change hands. `words`:
    the host's vocabulary the refusal speaks (`refusal`).
    """
    if own_bot_id is not None and author_id == own_bot_id:
        return Decision(False, "pairbot's own event", silent=True)
    if author_id in allowlist:
        kind = "bot" if author_is_bot else "user"
        return Decision(True, f"{kind} id {author_id} is on the operator's allowlist", False)
    if author_is_bot:
        return Decision(
            False, f"bot id {author_id} is not on the operator's allowlist", silent=True
        )
    level = (permission or "").strip().lower()
    if level in _WRITE_PERMISSIONS:
        return Decision(True, f"{level} permission on the repository", silent=False)
    return Decision(False, refusal(author_login, author_id, level, words), silent=False)


def refusal(login: str, author_id: int, level: str, words: Vocabulary = GITHUB) -> str:
    """The polite reply to someone who may not act, in the host's words (`hosts.vocabulary`):
    on GitHub the login and its numeric id; on Azure DevOps the account, who may act there
    (Contribute) and how an operator admits the account. Pure."""
    who = f"{login} (id {author_id})" if words.user_ids else login or "this commenter"
    hint = words.allowlist_hint.format(login=login) if login else ""
    return (
        f"Sorry, {who} has {level or 'no'} permission on this repository: pairbot takes "
        f"commands from {words.who_may_act}, or from {words.allowlist_entries} on the "
        f"operator's allowlist.{hint}"
    )


@functools.lru_cache(maxsize=64)
def _command_start(trigger: str, app_slug: str | None) -> re.Pattern[str]:
    """The pattern of a command line's start, up to (not including) the verb. Cached: the
    webhook edge parses every comment with the same trigger and slug."""
    if not _NAME.fullmatch(trigger):
        raise ValueError(f"trigger {trigger!r} must be letters, digits, '.', '_' or '-'")
    addresses = [rf"[/@]{re.escape(trigger)}"]
    if app_slug is not None:
        slug = _BOT_SUFFIX.sub("", app_slug)
        if not _NAME.fullmatch(slug):
            raise ValueError(f"app slug {app_slug!r} must be letters, digits, '.', '_' or '-'")
        addresses.append(rf"@{re.escape(slug)}\[bot\]")
    return re.compile(rf"[ \t]*(?:{'|'.join(addresses)})(?=\s|\Z)", re.IGNORECASE)


@functools.lru_cache(maxsize=64)
def _addressed(trigger: str, app_slug: str | None) -> re.Pattern[str]:
    """Anything that could become a command start once hidden content is read away."""
    words = [rf"[/@]{re.escape(trigger)}"]
    if app_slug is not None:
        words.append(rf"@{re.escape(_BOT_SUFFIX.sub('', app_slug))}\[bot\]")
    return re.compile("|".join(words), re.IGNORECASE)


def _reordered_command(start: re.Pattern[str], line: str) -> bool:
    """A raw line with a bidi control that reads as a command once the controls are gone."""
    if BIDI_CONTROLS.search(line) is None:
        return False
    return start.match(_FORMAT.sub("", line).lstrip()) is not None


def _prose_mask(lines: list[str]) -> list[bool]:
    """Per line: may it hold a command (not code, not quoted, not blank)?"""
    mask: list[bool] = []
    fence: tuple[str, int, int] | None = None  # (character, length, deepest closing indent)
    quoted = False
    for raw in lines:
        line = raw.expandtabs(4)
        if fence is not None:
            char, length, max_indent = fence
            stripped = line.lstrip(" ")
            body = stripped.rstrip(" ")
            if (
                len(line) - len(stripped) <= max_indent
                and len(body) >= length
                and body == char * len(body)
            ):
                fence = None
            mask.append(False)
            continue
        opened = _FENCE.match(line) or _LIST_FENCE.match(line)
        if opened is not None and not (
            opened.group("fence")[0] == "`" and "`" in opened.group("info")
        ):
            fence_chars = opened.group("fence")
            fence = (fence_chars[0], len(fence_chars), len(opened.group("indent")) + 3)
            quoted = False
            mask.append(False)
        elif not line.strip(" "):
            quoted = False
            mask.append(False)
        elif _QUOTE.match(line):
            quoted = True
            mask.append(False)
        else:
            # A lazy continuation of a quote, or indented code: neither holds a command.
            mask.append(not quoted and len(line) - len(line.lstrip(" ")) < 4)
    return mask


def _arguments(verb: Verb, text: str) -> dict[str, ArgValue] | str:
    """The arguments of a non-text verb, or an error message naming what is allowed."""
    if verb == "rerun-proof":
        if not text:
            return "rerun-proof needs a phase name"
        if not _PHASE.fullmatch(text):
            return (
                f"{text!r} is not a phase name: one word of lowercase letters, digits, "
                "'.', '_' or '-'"
            )
        return {"phase": text}
    if verb not in _KEYS:
        return f"{verb} takes no arguments, got {text!r}" if text else {}
    allowed = _KEYS[verb]
    allowed_text = ", ".join(f"{key}:" for key in allowed)
    keys = list(_KEY.finditer(text))
    head = text[: keys[0].start()] if keys else text
    if head.strip():
        return f"unexpected {head.strip()!r}; {verb} takes key: value arguments: {allowed_text}"
    args: dict[str, ArgValue] = {}
    for position, match in enumerate(keys):
        key = match.group(1).lower()
        end = keys[position + 1].start() if position + 1 < len(keys) else len(text)
        value = text[match.end() : end].strip()
        if key not in allowed:
            return f"{key}: is not an argument of {verb}; allowed: {allowed_text}"
        if key in args:
            return f"{key}: is given twice"
        if key == "until":
            if value.lower() not in UNTIL_VALUES:
                return f"until: must be {' or '.join(UNTIL_VALUES)}, got {value!r}"
            args[key] = value.lower()
        elif key == "agent":
            if not value or re.search(r"\s", value):
                return f"agent: must be one agent name without whitespace, got {value!r}"
            args[key] = value
        else:
            try:
                args[key] = parse_gate_condition(_normalise_gate(value))
            except ValueError:
                return f"{key}: {value!r} is not a gate; allowed: {ALLOWED_GATE_FORMS}"
    return args


def _normalise_gate(value: str) -> str:
    """Lower-case a gate's keywords (`Always`, `WHEN HAS:x`); labels keep their case."""
    value = re.sub(r"\A(always|never|when)\b", lambda m: m.group().lower(), value, flags=re.I)
    return re.sub(r"(?<!\S)(has|lacks)(?=\s*:)", lambda m: m.group().lower(), value, flags=re.I)
