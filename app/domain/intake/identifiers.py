"""Identifiers no host would send, found before anything of a delivery is kept.

    github_invalid(event, payload) -> Invalid | None
    azure_invalid(payload)         -> Invalid | None

A signed delivery still carries whatever its sender put in it. The names and numbers pairbot
keys its store, its checkouts and its API calls on are checked here, once, before routing:
an installation id, a repository's `owner/name`, issue, pull request and comment numbers, a head
commit; on Azure DevOps a project's and a repository's name, a pull request, a work item, a
comment and its version. A field that is absent is the routing's business (it answers "ignored"
for a notification without what its event carries); a field that is present must be valid, or
the delivery is `Invalid`: one line naming the field, what is allowed and what came (shown
escaped and cut short). The App answers it 422 and records nothing (app.web.events).

The rules are the hosts' own, a little wider where a host's documentation and its practice
differ, never narrower than what a host really sends:

- a GitHub owner is 1 to 100 letters, digits, `-` or `_` (accounts of managed enterprises carry
  an `_`), not starting with `-` or `_`; a repository name is 1 to 100 letters, digits, `.`,
  `-` or `_`, never `.` or `..`; `full_name` is exactly one of each around one `/`;
- an Azure DevOps project or repository name is 1 to 64 characters with none of
  `\\ / : * ? " < > ; # $ { } , + = [ ] |`, no control character, no `..`, not
  starting with `_` or `.` and not ending with `.`;
- a number that names something is a positive JSON integer (`positive_reason`);
- a commit is 40 lower-case hex digits (SHA-1) or 64 (a SHA-256 repository).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeGuard

from app.domain.intake.intent import positive_reason

__all__ = [
    "Invalid",
    "azure_invalid",
    "azure_name_problem",
    "full_name_problem",
    "github_invalid",
    "sha_problem",
]

Payload = Mapping[str, Any]

_OWNER: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")
_REPO_NAME: Final = re.compile(r"[A-Za-z0-9._-]{1,100}")
_SHA: Final = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_AZURE_FORBIDDEN: Final = frozenset('\\/:*?"<>;#${},+=[]|')
_AZURE_MAX: Final = 64
_SHOWN_CHARS: Final = 40


@dataclass(frozen=True)
class Invalid:
    """A delivery refused for one identifier: `field` (its path in the payload) and `reason`
    (the one line its refusal and its log line carry)."""

    field: str
    reason: str


def _shown(value: Any) -> str:
    shown = repr(value)  # repr escapes control characters: the line stays one line
    return shown if len(shown) <= _SHOWN_CHARS else shown[: _SHOWN_CHARS - 1] + "…"


def _is_mapping(value: Any) -> TypeGuard[Payload]:
    # `type(...) is dict` and `None` first: parsed JSON is dicts (or null), and an ABC's
    # isinstance costs ten times a type test (it runs on every delivery the App takes).
    return type(value) is dict or (value is not None and isinstance(value, Mapping))


def _obj(value: Any) -> Payload:
    return value if _is_mapping(value) else _EMPTY


_EMPTY: Final[Mapping[str, Any]] = {}


def full_name_problem(value: Any, name: str) -> str | None:
    """Why `value` is not a GitHub `owner/name`, or None when it is."""
    allowed = (
        "allowed: owner/name, the owner 1-100 letters, digits, '-' or '_' (not first), the "
        "name 1-100 letters, digits, '.', '-' or '_' (not '.' or '..')"
    )
    if not isinstance(value, str):
        return f"{name} must be a string owner/name; {allowed}; got {_shown(value)}"
    owner, slash, repo = value.partition("/")
    if (
        not slash
        or not _OWNER.fullmatch(owner)
        or not _REPO_NAME.fullmatch(repo)
        or repo in (".", "..")
    ):
        return f"{name} is not a repository's owner/name; {allowed}; got {_shown(value)}"
    return None


def sha_problem(value: Any, name: str) -> str | None:
    """Why `value` is not a commit id, or None when it is."""
    if isinstance(value, str) and _SHA.fullmatch(value):
        return None
    return (
        f"{name} must be a commit id, 40 lower-case hex digits (64 in a SHA-256 repository); "
        f"got {_shown(value)}"
    )


def azure_name_problem(value: Any, name: str) -> str | None:
    """Why `value` is not an Azure DevOps project or repository name, or None when it is."""
    allowed = (
        f"allowed: 1-{_AZURE_MAX} characters without control characters, '..' or any of "
        "\\ / : * ? \" < > ; # $ { } , + = [ ] |, not starting with '_' or '.', not "
        "ending with '.'"
    )
    if not isinstance(value, str):
        return f"{name} must be a string; {allowed}; got {_shown(value)}"
    if (
        not value
        or len(value) > _AZURE_MAX
        or ".." in value
        or value[0] in "_."
        or value.endswith(".")
        or any(ch in _AZURE_FORBIDDEN or _is_control(ch) for ch in value)
    ):
        return f"{name} is not an Azure DevOps name; {allowed}; got {_shown(value)}"
    return None


def _is_control(ch: str) -> bool:
    """A C0 or C1 control character, or a lone surrogate (JSON can carry one)."""
    code = ord(ch)
    return code < 32 or 127 <= code < 160 or 0xD800 <= code <= 0xDFFF


def _first(event: str, checks: Iterator[tuple[str, str | None]]) -> Invalid | None:
    for field, problem in checks:
        if problem is not None:
            return Invalid(field, f"{event}: {problem}")
    return None


def _present(payload: Payload, *path: str) -> tuple[bool, Any]:
    """Whether the value at `path` is there (not absent, not null), and the value."""
    node: Any = payload
    for key in path:
        if not _is_mapping(node) or node.get(key) is None:
            return False, None
        node = node[key]
    return True, node


def _number(payload: Payload, *path: str) -> Iterator[tuple[str, str | None]]:
    present, value = _present(payload, *path)
    if present:
        field = ".".join(path)
        yield field, positive_reason(value, field)


# -- GitHub ---------------------------------------------------------------------------------


def github_invalid(event: str, payload: Payload) -> Invalid | None:
    """The first identifier of a GitHub delivery no host would send, or None. Pure.

    Written out check by check, not as the generator of checks Azure DevOps' are: it runs on
    every delivery the App takes, and a valid identifier costs one type test and a compare
    here (`_positive_int`); only a present, wrong one builds its line (`positive_reason`).
    """
    installation = payload.get("installation")
    if installation is not None:
        value = _obj(installation).get("id")
        if not _positive_int(value):
            return _refuse(event, "installation.id", positive_reason(value, "installation.id"))
    repository = payload.get("repository")
    if _is_mapping(repository):
        full_name = repository.get("full_name")
        if full_name is not None:
            field = "repository.full_name"
            if (problem := full_name_problem(full_name, field)) is not None:
                return _refuse(event, field, problem)
    for key in _REPOSITORY_LISTS:
        items = payload.get(key)
        if not isinstance(items, list):
            continue
        for index, item in enumerate(items):
            field = f"{key}[{index}].full_name"
            if (problem := full_name_problem(_obj(item).get("full_name"), field)) is not None:
                return _refuse(event, field, problem)
    if event == "issue_comment":
        return _numbers(event, payload, _COMMENT_NUMBERS)
    if event == "pull_request":
        invalid = _numbers(event, payload, _PULL_NUMBERS)
        if invalid is not None:
            return invalid
        present, sha = _present(payload, "pull_request", "head", "sha")
        if present and (problem := sha_problem(sha, "pull_request.head.sha")) is not None:
            return _refuse(event, "pull_request.head.sha", problem)
    return None


_REPOSITORY_LISTS: Final = ("repositories", "repositories_added", "repositories_removed")
_COMMENT_NUMBERS: Final = (("issue", "number"), ("comment", "id"))
_PULL_NUMBERS: Final = (("pull_request", "number"), ("number",))


def _numbers(event: str, payload: Payload, paths: tuple[tuple[str, ...], ...]) -> Invalid | None:
    """The first of `paths` present (not absent, not null) and not a positive integer."""
    for path in paths:
        present, value = _present(payload, *path)
        if present and not _positive_int(value):
            field = ".".join(path)
            return _refuse(event, field, positive_reason(value, field))
    return None


def _positive_int(value: Any) -> bool:
    """`positive_reason(value, …) is None`, answered without building its line: a JSON
    integer (an `int`, never a `bool`) of at least 1."""
    if type(value) is int:  # the common case, decided without an isinstance walk
        return value >= 1
    return positive_reason(value, "") is None


def _refuse(event: str, field: str, problem: str | None) -> Invalid:
    return Invalid(field, f"{event}: {problem}")


# -- Azure DevOps ---------------------------------------------------------------------------


def azure_invalid(payload: Payload) -> Invalid | None:
    """The first identifier of a service-hook notification no host would send, or None. Pure."""
    event = payload.get("eventType")
    return _first(event if isinstance(event, str) else "", _azure_checks(payload))


def _azure_name(payload: Payload, *path: str) -> Iterator[tuple[str, str | None]]:
    present, value = _present(payload, *path)
    if present:
        field = ".".join(path)
        yield field, azure_name_problem(value, field)


def _azure_checks(payload: Payload) -> Iterator[tuple[str, str | None]]:
    event = payload.get("eventType")
    if event == "workitem.commented":
        for fields in ("fields",), ("revision", "fields"):
            yield from _azure_name(payload, "resource", *fields, "System.TeamProject")
        for path in ("workItemId",), ("id",), ("rev",), ("revision", "id"), ("revision", "rev"):
            yield from _number(payload, "resource", *path)
        yield from _number(payload, "resource", "commentVersionRef", "commentId")
        yield from _number(payload, "resource", "commentVersionRef", "version")
    elif event == "ms.vss-code.git-pullrequest-comment-event":
        yield from _azure_name(payload, "resource", "pullRequest", "repository", "name")
        yield from _azure_name(payload, "resource", "pullRequest", "repository", "project", "name")
        yield from _number(payload, "resource", "pullRequest", "pullRequestId")
        yield from _number(payload, "resource", "comment", "id")
    elif event == "git.pullrequest.updated":
        yield from _azure_name(payload, "resource", "repository", "name")
        yield from _azure_name(payload, "resource", "repository", "project", "name")
        yield from _number(payload, "resource", "pullRequestId")
        present, sha = _present(payload, "resource", "lastMergeSourceCommit", "commitId")
        if present:
            field = "resource.lastMergeSourceCommit.commitId"
            yield field, sha_problem(sha, field)
