"""The Azure DevOps adapter: Azure Boards work items and Azure Repos pull requests, via the SDK.

`AzureDevOpsHost` implements `hosts.base.Host` with the azure-devops SDK (7.1, msrest over
requests). It only translates; every decision (which comment, which label, when to merge) is
made by the pure modules beside it. What each operation maps to:

    identity            Location ConnectionData: the PAT's authenticated user
    get_card …          work item: System.Title, System.Description, System.Tags ("a; b"),
                        System.AssignedTo; open/closed from the state's category (Completed and
                        Removed are closed) for the item's type
    create_card         a `User Story` (JSON patch)
    update_card         JSON patch of System.Title / System.Description
    list_comments       card: work-item comments (Markdown); pull: the text comments of every
                        PR thread, system comments left out
    upsert_comment      card: a work-item comment; pull: a PR thread whose FIRST comment carries
                        the marker (created `closed`, so a "resolve all comments" branch policy
                        never blocks a merge on pairbot's own notes); read back after each write
    react               work-item comments: +1/-1/confused as like/dislike/confused reactions;
                        PR comments: +1 as a like. Anything else is Unsupported("react"): there
                        are no eyes/rocket reactions, and none on a work item or PR itself
    permission          effective allow bits of the user on the repository (Git security
                        namespace ACL with extended info), see `permission_from_bits`
    push_branch         `git push` over HTTPS, the PAT in a URL-scoped `http.extraheader` passed
                        through GIT_CONFIG_COUNT env vars (never argv, never a URL)
    open_pull           the active PR from the same source branch, else a new one (a create that
                        raced one, TF401179, or failed after being stored is re-read, not retried)
    get_pull            status active/abandoned/completed → open/closed/merged, isDraft,
                        mergeStatus, lastMergeSourceCommit (the head), reviewers as assignees
    set/get_review_st.  a PR status, context {genre: pair, name: pair-review}, posted on the
                        iteration whose sourceRefCommit is the reviewed head (none: Conflict);
                        statuses are per iteration, so a moved head has no status
    set_state_label     card: System.Tags (replace, guarded by `test /rev`); pull: PR labels
    read_scope_decision the pull's comments, chosen by the shared `hosts.local.scope_decision_in`
                        (pairbot's own packet is never the maintainer's answer)
    merge               PATCH status=completed with lastMergeSourceCommit = the reviewed head (the
                        server refuses a stale one too) and mergeStrategy squash/noFastForward;
                        a draft is published first; rebase is Unsupported("merge:rebase"); a
                        queued completion is polled a bounded number of times (still queued:
                        merged=False), and one already requested is polled, not requested again
    close               pull: abandon; card: the first Completed-category state of its type

Ids: a card is a work item id; a pull is a pull request id; a card comment's id is its
work-item comment id; a PR comment's id is `<thread id>/<comment id>` (`147/1`).

Transport rules (`_call`, and `_prepare_session` for every requests session the SDK makes):
- the SDK is synchronous: every call runs in a worker thread (`asyncio.to_thread`);
- one requests adapter on every SDK session — the SDK's internal resource-area discovery client
  included, reached through the credentials' `signed_session` — caps the timeout and never
  retries (msrest's default retries POST and PATCH on 5xx with real sleeps, and a retried create
  can post twice); reads are retried a bounded number of times with the injected sleep, writes
  never, and a comment create that failed after the server stored it is reconciled by marker;
- `Retry-After` is honoured on every response, a 200 included (Azure DevOps delays before it
  blocks: https://learn.microsoft.com/azure/devops/integrate/concepts/rate-limits): a response
  hook records the window and the next HTTP request (even within the same SDK call) first
  awaits the injectable sleep until it closes, or raises RateLimited when the wait is longer
  than `max_wait_s`;
- SDK exceptions carry no HTTP status: they are mapped by `type_key` and TF code first, then by
  the status the response hook saw (`classify`); no token reaches a message, a log or a repr.

Known limits: System.Description is a rich-text (HTML) field and Azure DevOps may sanitise what
it stores (pairbot writes text as given; Markdown multiline fields are not used, as Azure DevOps
Server refuses them); work-item comments are written as Markdown so markers survive. The SDK
caches resource locations on disk for 12 hours, keyed by URL: `cache_dir` points that cache
elsewhere, process-wide (the SDK keeps it in module singletons, so the last host built wins).
The SDK is imported lazily, on the first call: importing `hosts` or another adapter never loads it.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast
from urllib.parse import urlsplit

from hosts.cardhash import card_hash
from hosts.decisions import scope_decision_in
from hosts.errors import (
    Conflict,
    Forbidden,
    HostError,
    HostUnavailable,
    NotFound,
    RateLimited,
    Unsupported,
)
from hosts.labels import PrState, plan_state_labels
from hosts.markers import plan_upsert, same_text
from hosts.models import (
    REVIEW_CONTEXT,
    Author,
    Card,
    Comment,
    MergeMethod,
    MergeResult,
    Permission,
    Pull,
    PullState,
    ReviewState,
    ReviewStatus,
    Target,
    Upserted,
    UpsertResult,
)

if TYPE_CHECKING:
    import requests

    from hosts.base import Host, Reaction

__all__ = [
    "AzureDevOpsHost",
    "classify",
    "permission_from_bits",
    "push_command",
    "retry_after_seconds",
    "split_tags",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

# The azure-devops SDK ships no type information. Everything it hands back is `Sdk` (Any) and is
# turned into host-neutral models by the `_…_from` functions below; nothing typed `Sdk` leaves
# this module.
Sdk = Any

NEW_CARD_TYPE: Final = "User Story"
REVIEW_GENRE: Final = "pair"
# Azure DevOps caps a PR description at 4,000 characters (Pull Requests - Update).
MAX_PR_DESCRIPTION: Final = 4000
# The Git repositories security namespace and its permission bits:
# https://learn.microsoft.com/azure/devops/organizations/security/namespace-reference
GIT_NAMESPACE: Final = "2e9eb7ed-3c0a-47d4-87c1-0ffdd275fd87"
GIT_ADMINISTER: Final = 1
GIT_READ: Final = 2
GIT_CONTRIBUTE: Final = 4
GIT_EDIT_POLICIES: Final = 2048
GIT_MANAGE_PERMISSIONS: Final = 8192
GIT_PR_CONTRIBUTE: Final = 16384
GIT_PR_BYPASS_POLICY: Final = 32768

_TO_AZURE_STATE: Final[Mapping[str, str]] = {
    "pending": "pending",
    "success": "succeeded",
    "failure": "failed",
    "error": "error",
}
_FROM_AZURE_STATE: Final[Mapping[str, ReviewState]] = {
    "pending": "pending",
    "succeeded": "success",
    "failed": "failure",
    "error": "error",
    "notSet": "pending",
    "notApplicable": "success",
    "partiallySucceeded": "failure",
}
_PULL_STATE: Final[Mapping[str, PullState]] = {
    "active": "open",
    "abandoned": "closed",
    "completed": "merged",
}
_MERGEABLE: Final[Mapping[str, bool]] = {
    "succeeded": True,
    "conflicts": False,
    "failure": False,
    "rejectedByPolicy": False,
}
_MERGE_STRATEGY: Final[Mapping[str, str]] = {"squash": "squash", "merge": "noFastForward"}
_CARD_REACTIONS: Final[Mapping[str, str]] = {"+1": "like", "-1": "dislike", "confused": "confused"}
_CLOSED_CATEGORIES: Final = frozenset({"Completed", "Removed"})

# Errors. `type_key` first, then the TF code at the start of the message, then the HTTP status
# the response hook saw. Keys and codes from the Azure DevOps REST docs and observed responses.
_BY_TYPE_KEY: Final[Mapping[str, type[HostError]]] = {
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
_BY_TF_CODE: Final[Mapping[str, type[HostError]]] = {
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
_TF_CODE = re.compile(r"\b(TF\d{5,6})\b")
_SDK_STATUS = re.compile(r"returned an? (\d{3}) status code")
_PUSH_REJECTED = re.compile(r"\[rejected\]|non-fast-forward|fetch first|stale info", re.I)
# A refused header makes git fall back to asking for a username, which GIT_TERMINAL_PROMPT=0
# turns into "could not read Username".
_PUSH_DENIED = re.compile(
    r"Authentication failed|could not read Username|HTTP 40[13]|error: 40[13]|TF401027", re.I
)


def permission_from_bits(allow: int) -> Permission:
    """Effective Git repository permission bits → the host-neutral level. Pure.

    An approximation, to be stated in the capability matrix: Administer or Manage permissions
    is `admin`; Contribute with Edit policies or Bypass policies on pull requests is `maintain`;
    Contribute (push) is `write`; Contribute to pull requests alone is `triage`; Read is `read`.
    Branch-level overrides (a locked or policy-protected `main`) are not looked at.
    """
    if allow & (GIT_ADMINISTER | GIT_MANAGE_PERMISSIONS):
        return "admin"
    if allow & GIT_CONTRIBUTE and allow & (GIT_EDIT_POLICIES | GIT_PR_BYPASS_POLICY):
        return "maintain"
    if allow & GIT_CONTRIBUTE:
        return "write"
    if allow & GIT_PR_CONTRIBUTE:
        return "triage"
    if allow & GIT_READ:
        return "read"
    return "none"


def push_command(
    remote_url: str, branch: str, token: str, *, force: bool, base_env: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of a `git push` authenticated by an HTTP header. Pure.

    The PAT travels as `Authorization: Basic base64(:PAT)` in `http.<scheme://host/>.extraheader`,
    set through GIT_CONFIG_COUNT / GIT_CONFIG_KEY_n / GIT_CONFIG_VALUE_n (git 2.31+) after any
    entries the environment already has: never in argv (visible in `ps`) or in a URL (printed in
    git's errors). Scoped to the remote's origin: a redirect or submodule elsewhere never sees it.
    """
    ref = f"refs/heads/{branch}"
    argv = [
        "git",
        "push",
        "--porcelain",
        *(["--force"] if force else []),
        remote_url,
        f"{ref}:{ref}",
    ]
    parts = urlsplit(remote_url)
    host = parts.hostname or ""
    origin = f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}/"
    env = dict(base_env)
    count = env.get("GIT_CONFIG_COUNT", "")
    index = int(count) if count.isdigit() else 0
    basic = base64.b64encode(f":{token}".encode()).decode("ascii")
    env[f"GIT_CONFIG_KEY_{index}"] = f"http.{origin}.extraheader"
    env[f"GIT_CONFIG_VALUE_{index}"] = f"Authorization: Basic {basic}"
    env["GIT_CONFIG_COUNT"] = str(index + 1)
    env["GIT_TERMINAL_PROMPT"] = "0"  # never wait on a password prompt
    env["GCM_INTERACTIVE"] = "never"  # nor on Git Credential Manager's
    return argv, env


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """A `Retry-After` value (delta-seconds or an HTTP date) as seconds from `now`. Pure."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


def classify(
    type_key: str | None, message: str, status: int | None, *, auth: bool, transport: bool
) -> type[HostError]:
    """Which `hosts.errors` class an SDK failure is. Pure."""
    if type_key and type_key in _BY_TYPE_KEY:
        return _BY_TYPE_KEY[type_key]
    code = _TF_CODE.search(message)
    if code and code.group(1) in _BY_TF_CODE:
        return _BY_TF_CODE[code.group(1)]
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


def split_tags(value: object) -> tuple[str, ...]:
    """System.Tags (`"a; b"`) as a tuple of tags. Pure."""
    if not isinstance(value, str):
        return ()
    return tuple(tag.strip() for tag in value.split(";") if tag.strip())


class _Secret:
    """The PAT: never printed by repr or str."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__


@dataclass(frozen=True)
class _Repo:
    """What pairbot needs of the repository, looked up once."""

    id: str
    project_id: str
    remote_url: str
    web_url: str


class _SdkFailure(Exception):
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


class _Clients:
    """The SDK connection and its clients, made on first use (in a worker thread)."""

    def __init__(self, connection: Sdk) -> None:
        self._connection = connection
        self._lock = threading.Lock()
        self._made: dict[str, Sdk] = {}

    def _client(self, kind: str) -> Sdk:
        with self._lock:
            client = self._made.get(kind)
            if client is None:
                # Connection.get_client discovers the area's URL (cached on disk by the SDK).
                client = getattr(self._connection.clients_v7_1, f"get_{kind}_client")()
                self._made[kind] = client
            return client

    @property
    def git(self) -> Sdk:
        return self._client("git")

    @property
    def wit(self) -> Sdk:
        return self._client("work_item_tracking")

    @property
    def location(self) -> Sdk:
        return self._client("location")

    @property
    def identity(self) -> Sdk:
        return self._client("identity")

    @property
    def security(self) -> Sdk:
        return self._client("security")


@dataclass(frozen=True)
class _SdkModules:
    """What this adapter uses of the SDK stack, imported on first use."""

    Connection: Sdk
    file_cache: Sdk
    git: Sdk  # azure.devops.v7_1.git.models
    wit: Sdk  # azure.devops.v7_1.work_item_tracking.models
    Adapter: Sdk  # requests HTTPAdapter: capped timeout, no retries
    errors: tuple[type[Exception], ...]  # what the SDK raises for a failed request
    AuthenticationError: type[Exception]
    RequestException: type[Exception]


@functools.cache
def _sdk() -> _SdkModules:
    """Import the SDK stack. Lazy on purpose: importing `hosts` or running another host's tick
    must never load azure-devops, msrest or requests, hence the local imports (PLC0415)."""
    import requests  # noqa: PLC0415
    from azure.devops import _file_cache  # type: ignore[import-untyped]  # noqa: PLC0415  no stubs
    from azure.devops.connection import (  # type: ignore[import-untyped]  # noqa: PLC0415
        Connection,
    )
    from azure.devops.v7_1.git import (  # type: ignore[import-untyped]  # noqa: PLC0415
        models as git,
    )
    from azure.devops.v7_1.work_item_tracking import (  # type: ignore[import-untyped]  # noqa: PLC0415
        models as wit,
    )
    from msrest.exceptions import AuthenticationError, ClientException  # noqa: PLC0415
    from requests.adapters import HTTPAdapter  # noqa: PLC0415
    from urllib3.util.retry import Retry  # noqa: PLC0415

    class Adapter(HTTPAdapter):
        """No retries at all (reads are retried by the adapter, writes never); timeout capped."""

        def __init__(self, timeout_s: float) -> None:
            super().__init__(max_retries=Retry(total=0, read=False, raise_on_status=False))
            self.timeout_s = timeout_s

        def send(  # noqa: PLR0917 — the signature is requests' HTTPAdapter.send
            self,
            request: requests.PreparedRequest,
            stream: bool = False,
            timeout: float | tuple[float | None, float | None] | None = None,
            verify: bool | str = True,
            cert: str | tuple[str, str] | None = None,
            proxies: dict[str, str] | None = None,
        ) -> requests.Response:
            capped: float | tuple[float, float]
            if isinstance(timeout, tuple):
                connect, read = timeout
                capped = (
                    min(connect or self.timeout_s, self.timeout_s),
                    min(read or self.timeout_s, self.timeout_s),
                )
            else:
                capped = min(timeout or self.timeout_s, self.timeout_s)
            return super().send(request, stream, capped, verify, cert, proxies)

    return _SdkModules(
        Connection=Connection,
        file_cache=_file_cache,
        git=git,
        wit=wit,
        Adapter=Adapter,
        errors=(ClientException, requests.RequestException),
        AuthenticationError=AuthenticationError,
        RequestException=requests.RequestException,
    )


def _authentication(token: str, prepare: Callable[[requests.Session], None]) -> Sdk:
    """msrest Basic credentials (any user name, the PAT as password) that also `prepare` every
    session they sign: msrest's documented seam for customising its requests sessions."""
    from msrest.authentication import BasicAuthentication  # noqa: PLC0415 — lazy, see _sdk

    class PatAuthentication(BasicAuthentication):
        def signed_session(self, session: requests.Session | None = None) -> requests.Session:
            signed = super().signed_session(session)
            prepare(signed)
            return signed

        def __repr__(self) -> str:
            return "PatAuthentication(<secret>)"

    return PatAuthentication("", token)


def _models() -> tuple[Sdk, Sdk]:
    """The SDK's git and work-item-tracking model modules."""
    sdk = _sdk()
    return sdk.git, sdk.wit


def _is_sdk_error(exc: Exception) -> bool:
    if isinstance(exc, _sdk().errors):
        return True
    # Raised by the SDK when the server has no route for an API (an older Azure DevOps Server).
    return isinstance(exc, ValueError) and "is not registered on" in str(exc)


def _timestamp(value: object) -> str:
    """An SDK date as fixed-width UTC ISO text, so that text order is time order."""
    if isinstance(value, datetime):
        when = value if value.tzinfo else value.replace(tzinfo=UTC)
        return when.astimezone(UTC).isoformat(timespec="microseconds")
    return str(value or "")


def _author_from(ref: Sdk) -> Author:
    """An IdentityRef (object or, inside work-item fields, a dict) as an Author."""
    if ref is None:
        return Author(login="", id="")
    if isinstance(ref, Mapping):
        login = ref.get("uniqueName") or ref.get("displayName") or ""
        ident, descriptor = ref.get("id") or "", ref.get("descriptor") or ""
        container = bool(ref.get("isContainer"))
    else:
        login = ref.unique_name or ref.display_name or ""
        ident, descriptor = ref.id or "", ref.descriptor or ""
        container = bool(ref.is_container)
    # Service identities (build service, service principals) have `svc.`/`s2s.` descriptors.
    is_bot = container or str(descriptor).startswith(("svc.", "s2s."))
    return Author(login=str(login), id=str(ident), is_bot=is_bot)


def _identity_from(user: Sdk) -> Author:
    """ConnectionData.authenticatedUser as an Author (login = its Account, e.g. an e-mail)."""
    props = user.properties if isinstance(user.properties, Mapping) else {}
    account = props.get("Account")
    login = account.get("$value") if isinstance(account, Mapping) else None
    subject = str(user.subject_descriptor or "")
    return Author(
        login=str(login or user.provider_display_name or ""),
        id=str(user.id or ""),
        is_bot=subject.startswith(("svc.", "s2s.")),
    )


def _truncate_description(body: str) -> str:
    if len(body) <= MAX_PR_DESCRIPTION:
        return body
    notice = f"\n\n… (truncated by pairbot to Azure DevOps' {MAX_PR_DESCRIPTION} characters)"
    return body[: MAX_PR_DESCRIPTION - len(notice)] + notice


def _branch(ref: object) -> str:
    return str(ref or "").removeprefix("refs/heads/")


def _commit(ref: Sdk) -> str:
    return str(ref.commit_id) if ref is not None and ref.commit_id else ""


def _pr_comment_id(thread: int, comment: int) -> str:
    """A PR comment's id: its thread and its id in the thread (`147/1`)."""
    return f"{thread}/{comment}"


def _parse_pr_comment_id(value: str) -> tuple[int, int]:
    thread, _, comment = value.partition("/")
    if not thread.isdigit() or not comment.isdigit():
        raise NotFound(f"{value!r} is not an Azure DevOps PR comment id (<thread>/<comment>)")
    return int(thread), int(comment)


class AzureDevOpsHost:
    """`Host` over one Azure DevOps project: its Boards for cards, one repository for code."""

    name = "azure-devops"

    def __init__(
        self,
        organization_url: str,
        project: str,
        repository: str,
        token: str,
        *,
        timeout_s: float = 30,
        cache_dir: str | Path | None = None,
        sleep: Callable[[float], Coroutine[Any, Any, None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        max_wait_s: float = 60.0,
        read_attempts: int = 3,
        backoff_s: float = 1.0,
        merge_polls: int = 10,
        push_timeout_s: float = 300.0,
    ) -> None:
        if not token:
            raise ValueError("an Azure DevOps personal access token is required")
        if not organization_url or not project or not repository:
            raise ValueError("organization_url, project and repository are required")
        self.organization_url = organization_url.rstrip("/")
        self.project = project
        self.repository = repository
        self._token = _Secret(token)
        self._timeout_s = timeout_s
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._sleep = sleep
        self._clock = clock
        self._max_wait_s = max_wait_s
        self._read_attempts = max(1, read_attempts)
        self._backoff_s = backoff_s
        self._merge_polls = merge_polls
        self._push_timeout_s = push_timeout_s
        self._sdk_lock = threading.Lock()
        self._window_lock = threading.Lock()
        self._clients_: _Clients | None = None
        self._observed = threading.local()
        self._not_before = 0.0
        self._me: Author | None = None
        self._repo: _Repo | None = None
        self._states: dict[str, dict[str, str]] = {}  # work item type → state → category

    def __repr__(self) -> str:
        return (
            f"AzureDevOpsHost(organization_url={self.organization_url!r}, "
            f"project={self.project!r}, repository={self.repository!r})"
        )

    # -- transport ------------------------------------------------------------------------------

    def _clients(self) -> _Clients:
        """The SDK connection (imported and built on first use, in a worker thread)."""
        with self._sdk_lock:
            if self._clients_ is None:
                sdk = _sdk()
                if self._cache_dir is not None:
                    self._cache_dir.mkdir(parents=True, exist_ok=True)
                    for cache, name in (
                        (sdk.file_cache.OPTIONS_CACHE, "options"),
                        (sdk.file_cache.RESOURCE_CACHE, "resources"),
                    ):
                        path = str(self._cache_dir / f"{name}.json")
                        if cache.file_name != path:
                            cache.file_name = path
                            cache.data = {}
                            cache.initial_load_occurred = False
                creds = _authentication(self._token.reveal(), self._prepare_session)
                connection = sdk.Connection(base_url=self.organization_url, creds=creds)
                self._clients_ = _Clients(connection)
            return self._clients_

    def _prepare_session(self, session: requests.Session) -> None:
        """Worker thread, before every HTTP request the SDK sends: the one transport policy.

        Reached through the credentials, which msrest asks to sign every session before every
        request — the SDK's internal discovery client included, which no client configuration
        reaches. Each session gets, once, an adapter that caps the timeout and never retries
        (msrest's default retries POST and PATCH on 5xx with real sleeps) and the response hook;
        every request first waits out an open Retry-After window, so the window holds between
        the several requests one SDK call can make (discovery, then the call itself).
        """
        if not getattr(session, "_pairbot_transport", False):
            adapter = _sdk().Adapter(self._timeout_s)
            session.mount("https://", adapter)
            session.mount("http://", adapter)
            session.hooks["response"].append(self._observe)
            session._pairbot_transport = True  # type: ignore[attr-defined]  # our own flag
        wait = self._window()
        loop: asyncio.AbstractEventLoop | None = getattr(self._observed, "loop", None)
        if wait > 0 and loop is not None:
            # The injected sleep is a coroutine: run it on the caller's loop (which is only
            # awaiting this thread) and block this worker thread until it is done.
            asyncio.run_coroutine_threadsafe(self._sleep(wait), loop).result()

    def _observe(self, response: Sdk, *args: object, **kwargs: object) -> None:
        """requests response hook (worker thread): note the status and any Retry-After."""
        # Read the body now: msrest asks for streamed responses and never reads the body of a
        # call that returns nothing (a DELETE, a like), which keeps the connection checked out
        # until garbage collection. The SDK's later reads use the cached content.
        _ = response.content
        status = int(response.status_code)
        delay = retry_after_seconds(response.headers.get("Retry-After"), time.time())
        self._observed.status = status
        self._observed.retry_after = delay
        if delay is not None:
            with self._window_lock:
                self._not_before = max(self._not_before, self._clock() + delay)
            log.warning(
                "Azure DevOps asked for a %.1fs pause (Retry-After on HTTP %s)", delay, status
            )

    def _run(self, fn: Callable[[_Clients], T], loop: asyncio.AbstractEventLoop) -> T:
        """Worker thread: one SDK call, its failure reduced to an `_SdkFailure`."""
        self._observed.status = None
        self._observed.retry_after = None
        self._observed.loop = loop
        try:
            return fn(self._clients())
        except Exception as exc:
            if not _is_sdk_error(exc):
                raise
            raise self._failure(exc) from None

    def _failure(self, exc: Exception) -> _SdkFailure:
        sdk = _sdk()
        inner = getattr(exc, "inner_exception", None)
        # msrest wraps a requests failure (refused, reset, timed out) as ClientRequestError.
        transport = isinstance(exc, sdk.RequestException) or isinstance(inner, sdk.RequestException)
        type_key = getattr(exc, "type_key", None)
        status = None if transport else getattr(self._observed, "status", None)
        message = str(getattr(exc, "message", None) or exc)
        if transport:
            # The text of a connection error repeats urllib3's internals; its class is enough.
            message = f"cannot reach Azure DevOps ({type(inner or exc).__name__})"
        elif status is None and (said := _SDK_STATUS.search(message)):
            status = int(said.group(1))  # "… Operation returned a 404 status code."
        return _SdkFailure(
            self._scrub(message),
            type_key=str(type_key) if type_key else None,
            status=status,
            retry_after=getattr(self._observed, "retry_after", None),
            auth=isinstance(exc, sdk.AuthenticationError),
            transport=transport,
        )

    def _scrub(self, text: str) -> str:
        token = self._token.reveal()
        for secret in (token, base64.b64encode(f":{token}".encode()).decode("ascii")):
            text = text.replace(secret, "***")
        return text

    def _window(self) -> float:
        """Seconds left in the Retry-After window (0 when closed); RateLimited when too long."""
        wait = self._not_before - self._clock()
        if wait > self._max_wait_s:
            raise RateLimited(
                f"Azure DevOps asked for a {wait:.0f}s pause (more than {self._max_wait_s:.0f}s)",
                retry_after=wait,
            )
        return max(0.0, wait)

    async def _respect_window(self) -> None:
        wait = self._window()
        if wait > 0:
            await self._sleep(wait)

    async def _call(self, what: str, fn: Callable[[_Clients], T], *, write: bool = False) -> T:
        """One SDK call in a worker thread, after any Retry-After window; reads retried."""
        attempts = 1 if write else self._read_attempts
        attempt = 0
        while True:
            attempt += 1
            await self._respect_window()
            try:
                return await asyncio.to_thread(self._run, fn, asyncio.get_running_loop())
            except _SdkFailure as failure:
                error = self._error(what, failure)
            if write or attempt >= attempts or not isinstance(error, HostUnavailable | RateLimited):
                raise error
            log.info("%s: %s; retrying (%d/%d)", what, error, attempt, attempts)
            if self._not_before <= self._clock():  # no Retry-After to honour: back off
                await self._sleep(self._backoff_s * 2 ** (attempt - 1))

    @staticmethod
    def _error(what: str, failure: _SdkFailure) -> HostError:
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

    # -- identity and repository ----------------------------------------------------------------

    async def identity(self) -> Author:
        if self._me is None:
            data = await self._call("identity", lambda c: c.location.get_connection_data())
            self._me = _identity_from(data.authenticated_user)
        return self._me

    async def _repository(self) -> _Repo:
        if self._repo is None:
            repo = await self._call(
                "repository",
                lambda c: c.git.get_repository(self.repository, project=self.project),
            )
            project_id = str(repo.project.id) if repo.project is not None else ""
            web = repo.web_url or f"{self.organization_url}/{self.project}/_git/{repo.name}"
            self._repo = _Repo(
                id=str(repo.id), project_id=project_id, remote_url=str(repo.remote_url), web_url=web
            )
        return self._repo

    # -- cards ----------------------------------------------------------------------------------

    async def _work_item(self, number: int) -> Sdk:
        return await self._call(
            f"get_card #{number}",
            lambda c: c.wit.get_work_item(number, project=self.project),
        )

    async def _categories(self, item_type: str) -> dict[str, str]:
        """State name → state category for a work item type (looked up once per type)."""
        if item_type not in self._states:
            states = await self._call(
                f"states of {item_type!r}",
                lambda c: c.wit.get_work_item_type_states(self.project, item_type),
            )
            self._states[item_type] = {str(s.name): str(s.category) for s in states or []}
        return self._states[item_type]

    async def _card_from(self, item: Sdk) -> Card:
        fields: Mapping[str, Any] = item.fields or {}
        item_type = str(fields.get("System.WorkItemType") or NEW_CARD_TYPE)
        state = str(fields.get("System.State") or "")
        category = (await self._categories(item_type)).get(state, "")
        assigned = fields.get("System.AssignedTo")
        return Card(
            number=int(item.id),
            title=str(fields.get("System.Title") or ""),
            body=str(fields.get("System.Description") or ""),
            labels=split_tags(fields.get("System.Tags")),
            assignees=(_author_from(assigned).login,) if assigned else (),
            state="closed" if category in _CLOSED_CATEGORIES else "open",
            url=f"{self.organization_url}/{self.project}/_workitems/edit/{item.id}",
        )

    async def get_card(self, number: int) -> Card:
        return await self._card_from(await self._work_item(number))

    async def card_hash(self, number: int) -> str:
        card = await self.get_card(number)
        return card_hash(card.title, card.body)

    @staticmethod
    def _patch(op: str, path: str, value: object) -> Sdk:
        _, wit = _models()
        return wit.JsonPatchOperation(op=op, path=path, value=value)

    async def create_card(self, title: str, body: str, labels: tuple[str, ...] = ()) -> Card:
        ops = [self._patch("add", "/fields/System.Title", title)]
        if body:
            ops.append(self._patch("add", "/fields/System.Description", body))
        if labels:
            ops.append(self._patch("add", "/fields/System.Tags", "; ".join(dict.fromkeys(labels))))
        item = await self._call(
            "create_card",
            lambda c: c.wit.create_work_item(ops, self.project, NEW_CARD_TYPE),
            write=True,
        )
        return await self._card_from(item)

    async def update_card(
        self, number: int, *, title: str | None = None, body: str | None = None
    ) -> Card:
        ops = []
        if title is not None:
            ops.append(self._patch("add", "/fields/System.Title", title))
        if body is not None:
            ops.append(self._patch("add", "/fields/System.Description", body))
        if not ops:
            return await self.get_card(number)
        item = await self._call(
            f"update_card #{number}",
            lambda c: c.wit.update_work_item(ops, number, project=self.project),
            write=True,
        )
        return await self._card_from(item)

    # -- comments -------------------------------------------------------------------------------

    def _card_comment(self, raw: Sdk) -> Comment:
        return Comment(
            id=str(raw.id),
            body=str(raw.text or ""),
            author=_author_from(raw.created_by),
            created_at=_timestamp(raw.created_date),
            url=str(raw.url or ""),
        )

    async def _card_comment_page(self, number: int, token: str | None) -> Sdk:
        return await self._call(
            f"comments of card #{number}",
            lambda c: c.wit.get_comments(self.project, number, continuation_token=token),
        )

    async def _card_comments(self, number: int) -> list[Comment]:
        comments: list[Comment] = []
        token: str | None = None
        while True:
            page = await self._card_comment_page(number, token)
            comments += [self._card_comment(raw) for raw in page.comments or []]
            token = page.continuation_token
            if not token:
                break
        return sorted(comments, key=lambda c: (c.created_at, int(c.id)))

    async def _threads(self, pull: int) -> list[Sdk]:
        threads = await self._call(
            f"threads of PR #{pull}",
            lambda c: c.git.get_threads(self.repository, pull, project=self.project),
        )
        return [t for t in threads or [] if not t.is_deleted]

    def _pr_comment(self, pull: int, thread: int, raw: Sdk, web_url: str) -> Comment:
        return Comment(
            id=_pr_comment_id(thread, int(raw.id)),
            body=str(raw.content or ""),
            author=_author_from(raw.author),
            created_at=_timestamp(raw.published_date),
            url=f"{web_url}/pullrequest/{pull}?discussionId={thread}",
        )

    async def _pr_comments(self, pull: int, *, first_only: bool) -> list[Comment]:
        web_url = (await self._repository()).web_url
        out: list[Comment] = []
        for thread in await self._threads(pull):
            texts = [
                raw
                for raw in sorted(thread.comments or [], key=lambda r: int(r.id))
                if not raw.is_deleted and str(raw.comment_type or "text") != "system"
            ]
            if first_only:
                texts = texts[:1] if texts and int(texts[0].id) == 1 else []
            out += [self._pr_comment(pull, int(thread.id), raw, web_url) for raw in texts]
        return sorted(out, key=lambda c: (c.created_at, *_parse_pr_comment_id(c.id)))

    async def list_comments(self, target: Target) -> list[Comment]:
        if target.kind == "card":
            return await self._card_comments(target.number)
        return await self._pr_comments(target.number, first_only=False)

    async def _create_comment(self, target: Target, body: str) -> str:
        if target.kind == "card":
            _, wit = _models()
            created = await self._call(
                f"comment on card #{target.number}",
                lambda c: c.wit.add_work_item_comment(
                    wit.CommentCreate(text=body), self.project, target.number, "markdown"
                ),
                write=True,
            )
            return str(created.id)
        git, _ = _models()
        thread = git.GitPullRequestCommentThread(
            comments=[git.Comment(parent_comment_id=0, content=body, comment_type="text")],
            status="closed",
        )
        made = await self._call(
            f"thread on PR #{target.number}",
            lambda c: c.git.create_thread(thread, self.repository, target.number, self.project),
            write=True,
        )
        return _pr_comment_id(int(made.id), int(made.comments[0].id))

    async def _edit_comment(self, target: Target, comment_id: str, body: str) -> None:
        if target.kind == "card":
            _, wit = _models()
            await self._call(
                f"edit comment {comment_id} on card #{target.number}",
                lambda c: c.wit.update_work_item_comment(
                    wit.CommentUpdate(text=body),
                    self.project,
                    target.number,
                    int(comment_id),
                    "markdown",
                ),
                write=True,
            )
            return
        git, _ = _models()
        thread, comment = _parse_pr_comment_id(comment_id)
        await self._call(
            f"edit comment {comment_id} on PR #{target.number}",
            lambda c: c.git.update_comment(
                git.Comment(content=body),
                self.repository,
                target.number,
                thread,
                comment,
                project=self.project,
            ),
            write=True,
        )

    async def _read_comment(self, target: Target, comment_id: str) -> Comment:
        if target.kind == "card":
            raw = await self._call(
                f"read back comment {comment_id} on card #{target.number}",
                lambda c: c.wit.get_comment(self.project, target.number, int(comment_id)),
            )
            return self._card_comment(raw)
        thread, comment = _parse_pr_comment_id(comment_id)
        raw = await self._call(
            f"read back comment {comment_id} on PR #{target.number}",
            lambda c: c.git.get_comment(
                self.repository, target.number, thread, comment, project=self.project
            ),
        )
        web_url = (await self._repository()).web_url
        return self._pr_comment(target.number, thread, raw, web_url)

    async def _upsert_candidates(self, target: Target) -> list[Comment]:
        if target.kind == "card":
            return await self._card_comments(target.number)
        return await self._pr_comments(target.number, first_only=True)

    async def upsert_comment(self, target: Target, marker: str, body: str) -> UpsertResult:
        me = await self.identity()
        comments = await self._upsert_candidates(target)
        plan = plan_upsert(comments, marker, body, me)
        if plan.action is Upserted.UNCHANGED:
            keeper = next(c for c in comments if c.id == plan.comment_id)
            return UpsertResult(Upserted.UNCHANGED, keeper, plan.duplicates)
        action = plan.action
        if plan.action is Upserted.CREATED:
            try:
                comment_id = await self._create_comment(target, plan.body)
            except HostUnavailable:
                # The server may have stored it before failing: look again, never post twice.
                comments = await self._upsert_candidates(target)
                plan = plan_upsert(comments, marker, body, me)
                if plan.action is Upserted.CREATED:
                    raise
                log.info("a comment that failed to post was stored after all; reconciled")
                if plan.action is Upserted.UPDATED:
                    await self._edit_comment(target, cast(str, plan.comment_id), plan.body)
                comment_id = cast(str, plan.comment_id)
        else:
            comment_id = cast(str, plan.comment_id)
            await self._edit_comment(target, comment_id, plan.body)
        back = await self._read_comment(target, comment_id)
        if not same_text(back.body, plan.body):
            raise HostUnavailable(
                f"Azure DevOps: comment {comment_id} on {target.kind} #{target.number} "
                "did not read back as written"
            )
        return UpsertResult(action, back, plan.duplicates)

    async def react(self, target: Target, comment_id: str | None, reaction: Reaction) -> None:
        if comment_id is None:
            raise Unsupported("react", "Azure DevOps has no reactions on a work item or PR itself")
        if target.kind == "card":
            kind = _CARD_REACTIONS.get(reaction)
            if kind is None:
                raise Unsupported("react", f"work-item comments have no {reaction!r} reaction")
            await self._call(
                f"react to comment {comment_id} on card #{target.number}",
                lambda c: c.wit.create_comment_reaction(
                    self.project, target.number, int(comment_id), kind
                ),
                write=True,
            )
            return
        if reaction != "+1":
            raise Unsupported("react", f"PR comments can only be liked, not {reaction!r}")
        thread, comment = _parse_pr_comment_id(comment_id)
        await self._call(
            f"like comment {comment_id} on PR #{target.number}",
            lambda c: c.git.create_like(
                self.repository, target.number, thread, comment, project=self.project
            ),
            write=True,
        )

    # -- people ---------------------------------------------------------------------------------

    async def permission(self, user: str) -> Permission:
        """The user's effective permission on the repository (see `permission_from_bits`)."""
        identities = await self._call(
            f"identity {user!r}",
            lambda c: c.identity.read_identities(search_filter="General", filter_value=user),
        )
        found = list(identities or [])

        def account(identity: Sdk) -> str:
            props = identity.properties if isinstance(identity.properties, Mapping) else {}
            value = props.get("Account")
            return str(value.get("$value", "")) if isinstance(value, Mapping) else ""

        exact = [i for i in found if account(i).casefold() == user.casefold()]
        chosen = exact or found
        if len(chosen) != 1:
            log.info("permission: %d identities match %r; treating as none", len(chosen), user)
            return "none"
        descriptor = str(chosen[0].descriptor)
        repo = await self._repository()
        token = f"repoV2/{repo.project_id}/{repo.id}"
        acls = await self._call(
            f"permissions of {user!r}",
            lambda c: c.security.query_access_control_lists(
                GIT_NAMESPACE, token=token, descriptors=descriptor, include_extended_info=True
            ),
        )
        allow = 0
        for acl in acls or []:
            for key, ace in (acl.aces_dictionary or {}).items():
                if str(key).casefold() != descriptor.casefold():
                    continue
                info = ace.extended_info
                effective = (info.effective_allow if info else None) or ace.allow or 0
                denied = (info.effective_deny if info else None) or ace.deny or 0
                allow |= int(effective) & ~int(denied)
        return permission_from_bits(allow)

    # -- code -----------------------------------------------------------------------------------

    async def push_branch(self, repo_dir: Path, branch: str, *, force: bool = False) -> str:
        if not branch or branch.startswith(("-", "refs/")):
            raise NotFound(f"{branch!r} is not a branch name")
        head = await _git_output(
            repo_dir, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"
        )
        if head is None:
            raise NotFound(f"branch {branch!r} does not exist in {repo_dir}")
        remote = (await self._repository()).remote_url
        argv, env = push_command(
            remote, branch, self._token.reveal(), force=force, base_env=os.environ
        )
        await self._respect_window()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=repo_dir,
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise HostUnavailable(f"push of {branch!r}: git did not start ({exc})") from None
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self._push_timeout_s)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise HostUnavailable(
                f"push of {branch!r} timed out after {self._push_timeout_s:.0f}s"
            ) from None
        if proc.returncode != 0:
            text = self._scrub((err or b"").decode(errors="replace") + (out or b"").decode())
            if _PUSH_REJECTED.search(text):
                raise Conflict(f"push of {branch!r} rejected: the remote has commits it lacks")
            if _PUSH_DENIED.search(text):
                raise Forbidden(f"push of {branch!r} refused: {text.strip()[-300:]}")
            raise HostUnavailable(f"push of {branch!r} failed: {text.strip()[-300:]}")
        return head

    def _pull_from(self, pr: Sdk, web_url: str) -> Pull:
        mergeable = _MERGEABLE.get(str(pr.merge_status or ""))  # queued / notSet: not known yet
        reviewers = [r for r in pr.reviewers or [] if not r.is_container]
        return Pull(
            number=int(pr.pull_request_id),
            head_branch=_branch(pr.source_ref_name),
            head_sha=_commit(pr.last_merge_source_commit),
            base_branch=_branch(pr.target_ref_name),
            state=_PULL_STATE.get(str(pr.status), "open"),
            draft=bool(pr.is_draft),
            mergeable=mergeable,
            title=str(pr.title or ""),
            body=str(pr.description or ""),
            url=f"{web_url}/pullrequest/{pr.pull_request_id}",
            labels=tuple(str(lb.name) for lb in pr.labels or [] if lb.active is not False),
            assignees=tuple(_author_from(r).login for r in reviewers),
        )

    async def _pr(self, number: int) -> Sdk:
        return await self._call(
            f"get_pull #{number}",
            lambda c: c.git.get_pull_request(self.repository, number, project=self.project),
        )

    async def get_pull(self, number: int) -> Pull:
        pr = await self._pr(number)
        return self._pull_from(pr, (await self._repository()).web_url)

    async def _active_pull_for(self, head: str) -> Sdk | None:
        git, _ = _models()
        criteria = git.GitPullRequestSearchCriteria(
            source_ref_name=f"refs/heads/{head}", status="active"
        )
        found = await self._call(
            f"pull requests from {head!r}",
            lambda c: c.git.get_pull_requests(self.repository, criteria, project=self.project),
        )
        mine = sorted(found or [], key=lambda pr: int(pr.pull_request_id))
        return mine[0] if mine else None

    async def open_pull(
        self, head: str, base: str, title: str, body: str, *, draft: bool = True
    ) -> Pull:
        web_url = (await self._repository()).web_url
        existing = await self._active_pull_for(head)
        if existing is not None:
            return self._pull_from(existing, web_url)
        if head == base:
            raise Conflict(f"a pull request needs two branches; head and base are {head!r}")
        git, _ = _models()
        new = git.GitPullRequest(
            source_ref_name=f"refs/heads/{head}",
            target_ref_name=f"refs/heads/{base}",
            title=title,
            description=_truncate_description(body),
            is_draft=draft,
        )
        try:
            pr = await self._call(
                f"open_pull {head!r}",
                lambda c: c.git.create_pull_request(new, self.repository, project=self.project),
                write=True,
            )
        except (Conflict, HostUnavailable):
            # Opened meanwhile (TF401179), or stored before a 5xx: return that one.
            existing = await self._active_pull_for(head)
            if existing is None:
                raise
            pr = existing
        return self._pull_from(pr, web_url)

    # -- review status --------------------------------------------------------------------------

    async def _iterations_of(self, pull: int, head_sha: str) -> list[int]:
        """The ids of the pull's iterations whose source commit is `head_sha`, newest first."""
        iterations = await self._call(
            f"iterations of PR #{pull}",
            lambda c: c.git.get_pull_request_iterations(
                self.repository, pull, project=self.project
            ),
        )
        sha = head_sha.lower()
        ids = [
            int(it.id) for it in iterations or [] if _commit(it.source_ref_commit).lower() == sha
        ]
        return sorted(ids, reverse=True)

    async def _our_statuses(self, pull: int, iteration: int) -> list[Sdk]:
        statuses = await self._call(
            f"statuses of PR #{pull} iteration {iteration}",
            lambda c: c.git.get_pull_request_iteration_statuses(
                self.repository, pull, iteration, project=self.project
            ),
        )
        ours = [
            s
            for s in statuses or []
            if s.context is not None
            and s.context.genre == REVIEW_GENRE
            and s.context.name == REVIEW_CONTEXT
        ]
        return sorted(ours, key=lambda s: int(s.id or 0))

    async def set_review_status(
        self, pull: int, head_sha: str, state: ReviewState, description: str
    ) -> ReviewStatus:
        if state not in _TO_AZURE_STATE:
            raise ValueError(f"{state!r} is not a review state")
        iterations = await self._iterations_of(pull, head_sha)
        if not iterations:
            raise Conflict(f"PR #{pull} has no iteration with head {head_sha[:12]}: it moved")
        iteration = iterations[0]
        wanted = ReviewStatus(head_sha=head_sha, state=state, description=description)
        ours = await self._our_statuses(pull, iteration)
        if ours and (str(ours[-1].state), ours[-1].description or "") == (
            _TO_AZURE_STATE[state],
            description,
        ):
            return wanted  # already so: re-setting the same status writes nothing
        git, _ = _models()
        status = git.GitPullRequestStatus(
            state=_TO_AZURE_STATE[state],
            description=description,
            context=git.GitStatusContext(genre=REVIEW_GENRE, name=REVIEW_CONTEXT),
        )
        await self._call(
            f"set pair-review on PR #{pull}",
            lambda c: c.git.create_pull_request_iteration_status(
                status, self.repository, pull, iteration, project=self.project
            ),
            write=True,
        )
        return wanted

    async def get_review_status(self, pull: int, head_sha: str) -> ReviewStatus | None:
        for iteration in await self._iterations_of(pull, head_sha):
            ours = await self._our_statuses(pull, iteration)
            if ours:
                latest = ours[-1]
                return ReviewStatus(
                    head_sha=head_sha,
                    state=_FROM_AZURE_STATE.get(str(latest.state), "error"),
                    description=str(latest.description or ""),
                )
        return None

    # -- labels ---------------------------------------------------------------------------------

    async def set_state_label(self, target: Target, state: PrState) -> bool:
        if target.kind == "card":
            return await self._set_card_state_label(target.number, state)
        labels = await self._call(
            f"labels of PR #{target.number}",
            lambda c: c.git.get_pull_request_labels(
                self.repository, target.number, project=self.project
            ),
        )
        current = [str(lb.name) for lb in labels or [] if lb.active is not False]
        plan = plan_state_labels(current, state)
        if plan.noop:
            return False
        for name in plan.remove:
            await self._pull_label(target.number, name, add=False)
        for name in plan.add:
            await self._pull_label(target.number, name, add=True)
        return True

    async def _pull_label(self, pull: int, name: str, *, add: bool) -> None:
        if add:
            git, _ = _models()
            await self._call(
                f"add label {name!r} to PR #{pull}",
                lambda c: c.git.create_pull_request_label(
                    git.WebApiCreateTagRequestData(name=name),
                    self.repository,
                    pull,
                    project=self.project,
                ),
                write=True,
            )
            return
        await self._call(
            f"remove label {name!r} from PR #{pull}",
            lambda c: c.git.delete_pull_request_labels(
                self.repository, pull, name, project=self.project
            ),
            write=True,
        )

    async def _set_card_state_label(self, number: int, state: PrState) -> bool:
        item = await self._work_item(number)
        current = split_tags((item.fields or {}).get("System.Tags"))
        plan = plan_state_labels(current, state)
        if plan.noop:
            return False
        tags = [t for t in current if t not in plan.remove] + list(plan.add)
        # `add` on System.Tags merges; `replace` sets the whole list (and needs one to exist).
        op = "replace" if current else "add"
        ops = [
            self._patch("test", "/rev", item.rev),
            self._patch(op, "/fields/System.Tags", "; ".join(tags)),
        ]
        await self._call(
            f"tags of card #{number}",
            lambda c: c.wit.update_work_item(ops, number, project=self.project),
            write=True,
        )
        return True

    # -- scope ----------------------------------------------------------------------------------

    async def read_scope_decision(
        self, pull: int, comment_ref: str | None = None
    ) -> Comment | None:
        comments = await self.list_comments(Target("pull", pull))
        return scope_decision_in(comments, comment_ref, identity=await self.identity())

    # -- merge and close ------------------------------------------------------------------------

    async def merge(self, pull: int, head_sha: str, method: MergeMethod) -> MergeResult:
        strategy = _MERGE_STRATEGY.get(method)
        if strategy is None:
            raise Unsupported(
                f"merge:{method}",
                "pairbot completes Azure DevOps pull requests by squash or merge only: a rebase "
                "completion rewrites the source branch, so the merged commits are not the reviewed",
            )
        pr = await self._pr(pull)
        same_head = _commit(pr.last_merge_source_commit).lower() == head_sha.lower()
        if str(pr.status) == "completed" and same_head:
            # Idempotent: a resumed merge of the same reviewed head gets the first result.
            return MergeResult(merged=True, sha=_commit(pr.last_merge_commit) or None)
        if str(pr.status) != "active":
            raise Conflict(f"PR #{pull} is {pr.status}, not active")
        if not same_head:
            raise Conflict(
                f"PR #{pull} head is {_commit(pr.last_merge_source_commit)[:12]}, "
                f"not the reviewed {head_sha[:12]}"
            )
        if pr.completion_options is not None and str(pr.merge_status) == "queued":
            # A completion an earlier call requested is still running: wait for it rather than
            # request it again (a write whose effect on a queued completion is not documented).
            return await self._await_completion(pull, pr)
        git, _ = _models()
        if pr.is_draft:
            # Azure DevOps cannot complete a draft: publish it first (as GitHub marks it ready).
            await self._call(
                f"publish draft PR #{pull}",
                lambda c: c.git.update_pull_request(
                    git.GitPullRequest(is_draft=False), self.repository, pull, project=self.project
                ),
                write=True,
            )
        update = git.GitPullRequest(
            status="completed",
            last_merge_source_commit=git.GitCommitRef(commit_id=head_sha),
            completion_options=git.GitPullRequestCompletionOptions(merge_strategy=strategy),
        )
        done = await self._call(
            f"complete PR #{pull}",
            lambda c: c.git.update_pull_request(
                update, self.repository, pull, project=self.project
            ),
            write=True,
        )
        return await self._await_completion(pull, done)

    async def _await_completion(self, pull: int, done: Sdk) -> MergeResult:
        """Completion can be queued: poll a bounded number of times; merged=False when it is
        still running after them (the caller asks again later)."""
        for _ in range(self._merge_polls):
            if str(done.status) == "completed":
                return MergeResult(merged=True, sha=_commit(done.last_merge_commit) or None)
            if str(done.status) == "abandoned" or str(done.merge_status) in (
                "conflicts",
                "failure",
                "rejectedByPolicy",
            ):
                reason = done.merge_failure_message or done.merge_status or done.status
                raise Conflict(f"PR #{pull} did not complete: {reason}")
            await self._sleep(1.0)
            done = await self._pr(pull)
        if str(done.status) == "completed":
            return MergeResult(merged=True, sha=_commit(done.last_merge_commit) or None)
        return MergeResult(merged=False)

    async def close(self, target: Target) -> None:
        if target.kind == "pull":
            pr = await self._pr(target.number)
            if str(pr.status) == "completed":
                raise Conflict(f"PR #{target.number} is completed; it cannot be abandoned")
            if str(pr.status) == "abandoned":
                return
            git, _ = _models()
            await self._call(
                f"abandon PR #{target.number}",
                lambda c: c.git.update_pull_request(
                    git.GitPullRequest(status="abandoned"),
                    self.repository,
                    target.number,
                    project=self.project,
                ),
                write=True,
            )
            return
        item = await self._work_item(target.number)
        fields: Mapping[str, Any] = item.fields or {}
        item_type = str(fields.get("System.WorkItemType") or NEW_CARD_TYPE)
        categories = await self._categories(item_type)
        if categories.get(str(fields.get("System.State") or "")) in _CLOSED_CATEGORIES:
            return
        done = next((s for s, cat in categories.items() if cat == "Completed"), None)
        if done is None:
            raise Unsupported("close", f"work item type {item_type!r} has no Completed state")
        ops = [self._patch("add", "/fields/System.State", done)]
        await self._call(
            f"close card #{target.number}",
            lambda c: c.wit.update_work_item(ops, target.number, project=self.project),
            write=True,
        )


async def _git_output(repo_dir: Path, *args: str) -> str | None:
    """stdout of a local `git` command, or None when it fails."""
    try:
        proc = await asyncio.create_subprocess_exec(
            "git",
            *args,
            cwd=repo_dir,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        out, _ = await proc.communicate()
    except OSError:
        return None
    return out.decode().strip() if proc.returncode == 0 else None


if TYPE_CHECKING:  # AzureDevOpsHost is a Host: checked by mypy, costs nothing at run time.

    def _is_a_host(host: AzureDevOpsHost) -> Host:
        return host
