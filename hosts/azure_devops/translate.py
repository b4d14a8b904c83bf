"""Azure DevOps SDK failures as `hosts.errors`: the adapter's error boundary. Pure.

SDK exceptions carry no HTTP status: they are mapped by `type_key` first, then by the TF code
in the message, then by the status the response hook saw (`classify`). An `SdkFailure` is an
SDK exception reduced to what translation needs — no SDK object, no token.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from hosts.errors import (
    Conflict,
    Forbidden,
    HostError,
    HostUnavailable,
    NotFound,
    RateLimited,
)

# Errors. `type_key` first, then the TF code at the start of the message, then the HTTP status
# the response hook saw. Keys and codes from the Azure DevOps REST docs and observed responses.
BY_TYPE_KEY: Final[Mapping[str, type[HostError]]] = {
    "GitPullRequestNotFoundException": NotFound,
    "GitRepositoryNotFoundException": NotFound,
    "GitItemNotFoundException": NotFound,
    "ProjectDoesNotExistWithNameException": NotFound,
    "ProjectDoesNotExistException": NotFound,
    "WorkItemUnauthorizedAccessException": NotFound,  # TF401232: "does not exist, or …"
    "WorkItemDoesNotExistException": NotFound,
    "GitPullRequestStaleException": Conflict,
    "GitPullRequestExistsException": Conflict,
    "InvalidPullRequestStatusTransitionException": Conflict,
    "WorkItemRevisionMismatchException": Conflict,
    "UnauthorizedRequestException": Forbidden,
    "AccessCheckException": Forbidden,
    "GitNeedsPermissionException": Forbidden,
    "RequestBlockedException": RateLimited,
}
BY_TF_CODE: Final[Mapping[str, type[HostError]]] = {
    "TF401019": NotFound,  # the Git repository does not exist or you do not have permissions
    "TF401180": NotFound,  # the requested pull request was not found
    "TF401232": NotFound,  # work item does not exist, or you do not have permissions to read it
    "TF200016": NotFound,  # the project does not exist
    "TF401398": NotFound,  # the source and/or the target branch no longer exists
    "TF401179": Conflict,  # an active pull request for the source and target already exists
    "TF401181": Conflict,  # the pull request cannot be edited due to its state
    "TF26071": Conflict,  # the work item has been changed by someone else
    "TF401027": Forbidden,  # you need the Git permission …
    "TF400813": Forbidden,  # the user is not authorized to access this resource
    "TF400733": RateLimited,  # request was blocked due to exceeding usage of resource
}
TF_CODE = re.compile(r"\b(TF\d{5,6})\b")
SDK_STATUS = re.compile(r"returned an? (\d{3}) status code")


def classify(
    type_key: str | None, message: str, status: int | None, *, auth: bool, transport: bool
) -> type[HostError]:
    """Which `hosts.errors` class an SDK failure is. Pure."""
    if type_key and type_key in BY_TYPE_KEY:
        return BY_TYPE_KEY[type_key]
    code = TF_CODE.search(message)
    if code and code.group(1) in BY_TF_CODE:
        return BY_TF_CODE[code.group(1)]
    if status == 429:
        return RateLimited
    if auth or status in (401, 403):
        return Forbidden
    if status == 404:
        return NotFound
    if status in (409, 412):
        return Conflict
    if transport or (status is not None and status >= 500):
        return HostUnavailable
    return HostError


class SdkFailure(Exception):
    """An SDK exception reduced to what translation needs (no SDK object, no token)."""

    def __init__(
        self,
        message: str,
        *,
        type_key: str | None,
        status: int | None,
        retry_after: float | None,
        auth: bool,
        transport: bool,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.type_key = type_key
        self.status = status
        self.retry_after = retry_after
        self.auth = auth
        self.transport = transport


def error_of(what: str, failure: SdkFailure) -> HostError:
    """The `hosts.errors` error an SDK failure is, its message naming the operation."""
    kind = classify(
        failure.type_key,
        failure.message,
        failure.status,
        auth=failure.auth,
        transport=failure.transport,
    )
    suffix = f" ({failure.type_key})" if failure.type_key else ""
    status = f" [HTTP {failure.status}]" if failure.status else ""
    text = f"Azure DevOps {what}: {failure.message}{suffix}{status}"
    if kind is RateLimited:
        return RateLimited(text, retry_after=failure.retry_after)
    return kind(text)
