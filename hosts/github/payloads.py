"""GitHub's JSON answers as host-neutral models, read tolerantly: only the fields pairbot uses.

The raw JSON, not githubkit's `parsed_data`: its models follow the newest API schema and refuse
older (GHES) or leaner answers — e.g. a label without `archived_at`. Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, cast

from hosts.errors import HostError
from hosts.models import Author, Card, CheckState, Comment, HeadCheck, Pull


def obj(response: Any) -> dict[str, Any]:
    """The JSON object of a githubkit response (read tolerantly: only the fields used)."""
    data = body_of(response)
    if not isinstance(data, dict):
        raise HostError(f"GitHub answered {type(data).__name__} where an object was expected")
    return cast(dict[str, Any], data)


def objs(response: Any) -> list[dict[str, Any]]:
    """The JSON list of objects of a githubkit response."""
    data = body_of(response)
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise HostError(f"GitHub answered {type(data).__name__} where a list was expected")
    return cast(list[dict[str, Any]], data)


def body_of(response: Any) -> Any:
    try:
        return response.raw_response.json()
    except ValueError:
        raise HostError("GitHub answered a body that is not JSON") from None


def text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def author(user: Any) -> Author:
    if not isinstance(user, dict):
        return Author(login="ghost", id="")  # a deleted account
    return Author(
        login=text(user.get("login")),
        id=str(user.get("id", "")),
        is_bot=user.get("type") == "Bot",
    )


def labels(data: Mapping[str, Any]) -> tuple[str, ...]:
    names = []
    for label in data.get("labels") or ():
        names.append(label.get("name", "") if isinstance(label, dict) else str(label))
    return tuple(name for name in names if name)


def logins(data: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(author(user).login for user in data.get("assignees") or ())


def comment(data: Mapping[str, Any]) -> Comment:
    return Comment(
        id=str(data.get("id", "")),
        body=text(data.get("body")),
        author=author(data.get("user")),
        created_at=text(data.get("created_at")),
        url=text(data.get("html_url")),
        updated_at=text(data.get("updated_at")),
    )


def card(data: Mapping[str, Any]) -> Card:
    return Card(
        number=int(data["number"]),
        title=text(data.get("title")),
        body=text(data.get("body")),
        labels=labels(data),
        assignees=logins(data),
        state="closed" if data.get("state") == "closed" else "open",
        url=text(data.get("html_url")),
        author=author(data.get("user")) if isinstance(data.get("user"), dict) else None,
    )


def pull(data: Mapping[str, Any]) -> Pull:
    head = data.get("head") or {}
    base = data.get("base") or {}
    merged = bool(data.get("merged")) or bool(data.get("merged_at"))
    state: Literal["open", "closed", "merged"] = (
        "merged" if merged else "closed" if data.get("state") == "closed" else "open"
    )
    mergeable = data.get("mergeable")
    return Pull(
        number=int(data["number"]),
        head_branch=text(head.get("ref")),
        head_sha=text(head.get("sha")),
        base_branch=text(base.get("ref")),
        state=state,
        draft=bool(data.get("draft")),
        mergeable=mergeable if isinstance(mergeable, bool) else None,
        title=text(data.get("title")),
        body=text(data.get("body")),
        url=text(data.get("html_url")),
        labels=labels(data),
        assignees=logins(data),
    )


# A completed check run's conclusion as a check state; anything else (`failure`, `timed_out`,
# `cancelled`, `action_required`, `startup_failure`, `stale`, a value added later) is a failure:
# a check that did not pass is never read as green.
# https://docs.github.com/en/rest/checks/runs#get-a-check-run
_CONCLUSIONS: dict[str, CheckState] = {
    "success": "success",
    "neutral": "neutral",
    "skipped": "skipped",
}
# A commit status's state: `error` is a failure too.
# https://docs.github.com/en/rest/commits/statuses#get-the-combined-status-for-a-specific-reference
_STATUS_STATES: dict[str, CheckState] = {"success": "success", "pending": "pending"}


def check_run(data: Mapping[str, Any], required: frozenset[str]) -> HeadCheck:
    """A check run: pending until `status` is `completed`, then its conclusion."""
    name = text(data.get("name"))
    if data.get("status") != "completed":
        state: CheckState = "pending"
    else:
        state = _CONCLUSIONS.get(text(data.get("conclusion")), "failure")
    output = data.get("output") or {}
    summary = (
        text(output.get("title")) or text(output.get("summary")) if isinstance(output, dict) else ""
    )
    return HeadCheck(
        name=name,
        source="check-run",
        state=state,
        url=text(data.get("html_url")) or text(data.get("details_url")),
        required=name in required,
        summary=summary,
    )


def commit_status(data: Mapping[str, Any], required: frozenset[str]) -> HeadCheck:
    """A commit status (the newest for its context, as the combined status lists them)."""
    name = text(data.get("context"))
    return HeadCheck(
        name=name,
        source="status",
        state=_STATUS_STATES.get(text(data.get("state")), "failure"),
        url=text(data.get("target_url")),
        required=name in required,
        summary=text(data.get("description")),
    )


def required_checks(data: Mapping[str, Any]) -> frozenset[str]:
    """The check names a branch protection requires: `contexts` and each `checks[].context`."""
    names = {text(c) for c in data.get("contexts") or () if text(c)}
    for check in data.get("checks") or ():
        if isinstance(check, dict) and text(check.get("context")):
            names.add(text(check.get("context")))
    return frozenset(names)
