"""A stateful fake Azure DevOps, served on a real loopback HTTP server for the SDK to talk to.

The azure-devops SDK speaks `requests`, so instead of patching it the tests give it a server:
`FakeAzureDevOps` binds 127.0.0.1 on a free port (tests/support/loopback.py's server, the one
the fake GitHub uses too) and answers what the SDK really asks —

    OPTIONS {org}/_apis                        resource locations (route templates per API)
    GET     {org}/_apis/ResourceAreas          where each area lives (all here)
    GET     {org}/_apis/ConnectionData         the PAT's authenticated user
    GET     {org}/_apis/Identities             identity search (permission)
    GET     {org}/_apis/AccessControlLists/…   effective Git permissions (permission)
    …/{project}/_apis/git/…                    repository, pull requests, threads, comments,
                                               likes, iterations, iteration statuses, labels
    …/{project}/_apis/wit/…                    work items (JSON patch; artifact links to
                                               pull requests, `$expand=relations`), comments,
                                               reactions, work item type states
    …/{project}/_git/{repo}/…                  git smart HTTP through `git http-backend`
                                               (loopback's `git_http_backend`)

— with the shapes of ../shared/corpora/azure-devops/ (api-version 7.1; MicrosoftDocs/
vsts-rest-api-specs @ adb2878, MIT). Route templates, location ids and the identity/ACL/
connection-data shapes, which that folder does not hold, are the ones the SDK's 7.1 clients
request (azure/devops/v7_1/*) and the REST reference documents.

It requires `Authorization: Basic base64(<any>:<PAT>)` on every request (git included), checks
the api-version, records every request, answers 404 to anything it does not know and records
that in `unexpected` (the fixture fails a test on it), and can inject failures: a status instead
of the answer (`fail_next`), a 5xx after the write was stored (`fail_after_store`), or a
`Retry-After` on a successful answer (`delay_next`); `complete_async` makes PR completion
queue (answered `active`/`queued`, merged on a later read) as it can on the service, and
`queued_reads` is how many reads still find it queued (0: it merges on the next read). A
completion with `transitionWorkItems` moves every work item linked to the pull request to its
type's Resolved state (else its Completed one), as the service does.

Branch policies of type "Require a merge strategy" (`require_merge_strategy`) are listed by
Git's "Policy Configurations - Get" (`{project}/_apis/git/policy/configurations`, filtered by
`repositoryId`, `refName` and `policyType` as the service documents: a scope's `matchKind`
`Exact` or `Prefix`, a scope without `repositoryId` covering every repository), in the
`PolicyConfiguration` shape of the policy REST reference; a completion whose `mergeStrategy`
an enabled blocking one refuses is answered 400 (the fake's own message: no recorded sample).

Listings page as the service does: work-item comments come newest first (`order=asc` to
reverse), at most `$top` or `page_size` a page (200: the most the service gives), and a page
with more behind it carries `continuationToken` and `nextPage` in its body; the list ends at
the first page without one. The thread list of a pull request is one answer with every
thread, as the service documents it ("Retrieve all threads in a pull request": no `$top`,
`$skip` or token).
`before_answer(method, path)` lets the world move mid-listing (a comment between two pages).

The outside world's moves — a human filing a work item, commenting, opening a PR, pushing to a
PR's branch (a new iteration) — are methods that change the state directly, never over HTTP, so
`writes()` counts only what the adapter did. Branches live in a real bare repository; PR heads
are real commits and completing a PR makes a real squash or merge commit.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import itertools
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

from hosts.base import Host
from hosts.models import Author, Target
from tests.support import loopback
from tests.support.git import git, git_env, init_bare, run_git

ORG = "fabrikam"
PROJECT = "Fabrikam-Fiber-Git"
PROJECT_ID = "6ce954b1-ce1f-45d1-b94d-e6bf2464ba2c"
REPO = "pairbot-demo"
REPO_ID = "3411ebc1-d5aa-464f-9615-0b527bc66719"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
GIT_NAMESPACE = "2e9eb7ed-3c0a-47d4-87c1-0ffdd275fd87"

# Git repository permission bits (namespace reference).
READ = 2
CONTRIBUTE = 4 | 16 | 32 | 2 | 16384  # contribute, create branch/tag, read, PR contribute
ADMIN = 1 | 8192 | 2048 | CONTRIBUTE

Json = dict[str, Any]

# (location id, area, resource, route template, resource version): what the SDK's 7.1 clients
# look up by id in the OPTIONS answer to build their URLs.
_GIT_PR = "{project}/_apis/{area}/repositories/{repositoryId}/pullRequests/{pullRequestId}"
LOCATIONS: tuple[tuple[str, str, str, str, int], ...] = (
    (
        "2c420070-a0a2-49cc-9639-c9f271c5ff07",
        "git",
        "configurations",
        "{project}/_apis/{area}/policy/{resource}",
        1,
    ),
    (
        "c23ddff5-229c-4d04-a80b-0fdce9f360c8",
        "policy",
        "evaluations",
        "{project}/_apis/{area}/{resource}/{evaluationId}",
        1,
    ),
    ("00d9565f-ed9c-4a06-9a50-00e7896ccab4", "Location", "ConnectionData", "_apis/{resource}", 1),
    (
        "e81700f7-3be2-46de-8624-2eb35882fcaa",
        "Location",
        "ResourceAreas",
        "_apis/{resource}/{areaId}",
        1,
    ),
    (
        "28010c54-d0c0-4c89-a5b0-1c9e188b9fb7",
        "IMS",
        "Identities",
        "_apis/{resource}/{identityId}",
        1,
    ),
    (
        "18a2ad18-7571-46ae-bec7-0c7da1495885",
        "Security",
        "AccessControlLists",
        "_apis/{resource}/{securityNamespaceId}",
        1,
    ),
    (
        "225f7195-f9c7-4d14-ab28-a83f7ff77e1f",
        "git",
        "repositories",
        "{project}/_apis/{area}/{resource}/{repositoryId}",
        1,
    ),
    (
        "9946fd70-0d40-406e-b686-b4744cbbcc37",
        "git",
        "pullRequests",
        "{project}/_apis/{area}/repositories/{repositoryId}/{resource}/{pullRequestId}",
        1,
    ),
    (
        "ab6e2e5d-a0b7-4153-b64a-a4efe0d49449",
        "git",
        "threads",
        _GIT_PR + "/{resource}/{threadId}",
        1,
    ),
    (
        "965a3ec7-5ed8-455a-bdcb-835a5ea7fe7b",
        "git",
        "comments",
        _GIT_PR + "/threads/{threadId}/{resource}/{commentId}",
        1,
    ),
    (
        "5f2e2851-1389-425b-a00b-fb2adb3ef31b",
        "git",
        "likes",
        _GIT_PR + "/threads/{threadId}/comments/{commentId}/{resource}",
        1,
    ),
    (
        "d43911ee-6958-46b0-a42b-8445b8a0d004",
        "git",
        "iterations",
        _GIT_PR + "/{resource}/{iterationId}",
        2,
    ),
    (
        "75cf11c5-979f-4038-a76e-058a06adf2bf",
        "git",
        "statuses",
        _GIT_PR + "/iterations/{iterationId}/{resource}/{statusId}",
        1,
    ),
    (
        "f22387e3-984e-4c52-9c6d-fbb8f14c812d",
        "git",
        "labels",
        _GIT_PR + "/{resource}/{labelIdOrName}",
        1,
    ),
    (
        "62d3d110-0047-428c-ad3c-4fe872c91c74",
        "wit",
        "workItems",
        "{project}/_apis/{area}/{resource}/${type}",
        3,
    ),
    (
        "72c7ddf8-2cdc-4f60-90cd-ab71c14a399b",
        "wit",
        "workItems",
        "{project}/_apis/{area}/{resource}/{id}",
        3,
    ),
    (
        "608aac0a-32e1-4493-a863-b9cf4566d257",
        "wit",
        "comments",
        "{project}/_apis/{area}/workItems/{workItemId}/{resource}/{commentId}",
        4,
    ),
    (
        "f6cb3f27-1028-4851-af96-887e570dc21f",
        "wit",
        "reactions",
        "{project}/_apis/{area}/workItems/{workItemId}/comments/{commentId}/{resource}/{reactionType}",
        1,
    ),
    (
        "1a9c53f7-f243-4447-b110-35ef023636e4",
        "wit",
        "wiql",
        "{project}/{team}/_apis/{area}/{resource}/{id}",
        2,
    ),
    (
        "7c9d7a76-4a09-43e8-b5df-bd792f4ac6aa",
        "wit",
        "states",
        "{project}/_apis/{area}/workitemtypes/{type}/{resource}",
        1,
    ),
)
# Resource areas (id, name): the clients whose area is not None ask where it lives.
AREAS = (
    ("4e080c62-fa21-4fbc-8fef-2a10a2b38049", "git"),
    ("5264459e-e5e0-4bd8-b118-0985e68a4ec5", "wit"),
    ("8a3d49b8-91f0-46ef-b33d-dda338c25db3", "IMS"),
    ("79134c72-4a58-4b42-976c-04e7115f32bf", "core"),
    ("fb13a388-40dd-4a04-b530-013a739c72ef", "policy"),
)
BUILD_POLICY = "0609b952-1397-4640-95ec-e00a01b2c241"  # the Build (validation) policy type
MERGE_STRATEGY_POLICY = "fa4e907d-c16b-4a4c-9dfa-4916e5d171ab"  # "Require a merge strategy"
# A completion's mergeStrategy, by the policy setting that allows it.
_STRATEGY_SETTING = {
    "squash": "allowSquash",
    "noFastForward": "allowNoFastForward",
    "rebase": "allowRebase",
    "rebaseMerge": "allowRebaseMerge",
}
# The Agile process's User Story states (and a Basic-process Issue, for other types).
STATES: Mapping[str, tuple[tuple[str, str], ...]] = {
    "User Story": (
        ("New", "Proposed"),
        ("Active", "InProgress"),
        ("Resolved", "Resolved"),
        ("Closed", "Completed"),
        ("Removed", "Removed"),
    ),
    "Issue": (("To Do", "Proposed"), ("Doing", "InProgress"), ("Done", "Completed")),
}
REACTIONS = frozenset({"like", "dislike", "heart", "hooray", "smile", "confused"})


@dataclass
class Person:
    """Someone on the fake organization: who they are and what they may do in the repository."""

    author: Author
    display_name: str
    bits: int
    subject: str  # graph subject descriptor (aad.… for users, svc.… for service identities)

    @property
    def descriptor(self) -> str:
        """The identity descriptor (what ACL queries take)."""
        return f"Microsoft.IdentityModel.Claims.ClaimsIdentity;{TENANT}\\{self.author.login}"


@dataclass
class _Fault:
    method: str
    path: re.Pattern[str]
    status: int
    times: int
    retry_after: str | None = None
    after_store: bool = False
    delay_only: bool = False


@dataclass
class Seen:
    """One request the fake answered."""

    method: str
    path: str
    query: str
    status: int = 0


@dataclass
class _WorkItem:
    id: int
    rev: int
    fields: Json
    relations: list[Json] = field(default_factory=list)


@dataclass
class _Pull:
    id: int
    source: str
    target: str
    title: str
    description: str
    created_by: Person
    created: str
    draft: bool
    status: str = "active"
    merge_status: str = "succeeded"
    head: str = ""
    base_sha: str = ""
    merge_commit: str | None = None
    completion: Json | None = None
    queued: str | None = None  # a completion (its strategy) not yet done
    closed: str | None = None
    labels: list[Json] = field(default_factory=list)
    iterations: list[Json] = field(default_factory=list)
    statuses: list[Json] = field(default_factory=list)
    evaluations: list[Json] = field(default_factory=list)  # build policy evaluations
    threads: list[Json] = field(default_factory=list)
    reviewers: list[Person] = field(default_factory=list)


class AzureError(Exception):
    """An error answer in Azure DevOps' wrapped-exception shape."""

    def __init__(self, status: int, message: str, type_key: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type_key = type_key

    def body(self) -> Json:
        return {
            "$id": "1",
            "innerException": None,
            "message": self.message,
            "typeName": f"Microsoft.TeamFoundation.Framework.Server.{self.type_key}, "
            "Microsoft.TeamFoundation.Framework.Server",
            "typeKey": self.type_key,
            "errorCode": 0,
            "eventId": 3000,
        }


def _guid(seed: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, seed))


class FakeAzureDevOps:
    """The fake organization `fabrikam`, project `Fabrikam-Fiber-Git`, repository `pairbot-demo`."""

    def __init__(self, token: str, root: Path, *, page_size: int = 200) -> None:
        if not token:
            raise ValueError("the fake needs a non-empty PAT")
        self.token = token
        self.root = Path(root)
        self.page_size = page_size
        self.repo = self.root / "repo.git"
        self.requests: list[Seen] = []
        self.unexpected: list[str] = []
        self.likes: list[tuple[int, int, int, str]] = []  # (pr, thread, comment, user id)
        self.reactions: list[tuple[int, int, str, str]] = []  # (item, comment, type, user id)
        self._faults: list[_Fault] = []
        self._lock = threading.RLock()
        self._clock = itertools.count(1)
        self._ids = itertools.count(1)  # work items and pull requests: one sequence, as on ADO
        self._comment_ids = itertools.count(1)
        self._work_items: dict[int, _WorkItem] = {}
        self._wi_comments: dict[int, list[Json]] = {}
        self._pulls: dict[int, _Pull] = {}
        self.pairbot = Person(
            Author("pairbot@fabrikam.example", _guid("pairbot")),
            "pairbot",
            CONTRIBUTE,
            "aad.cGFpcmJvdA",
        )
        self.human = Person(
            Author("maintainer@fabrikam.example", _guid("maintainer")),
            "Jamal Hartnett",
            ADMIN,
            "aad.bWFpbnRhaW5lcg",
        )
        self.bot = Person(
            Author("build-service@fabrikam.example", _guid("build"), is_bot=True),
            "Fabrikam Build Service",
            READ,
            "svc.YnVpbGQ",
        )
        self.people = [self.pairbot, self.human, self.bot]
        # The repository's default branch (None: an empty repository, which has none).
        self.default_branch: str | None = "refs/heads/main"
        # Branch-level ACL entries: (login casefolded, branch) -> (allow, deny) bits.
        self.branch_aces: dict[tuple[str, str], tuple[int, int]] = {}
        # Completion is asynchronous on Azure DevOps: when set, a completed PATCH answers
        # `active`/`queued` and the merge happens on a later read of the pull request.
        self.complete_async = False
        self.queued_reads = 0  # reads of a queued PR answered `queued` before it merges
        # Branch policy configurations ("Require a merge strategy"), as the service keeps them.
        self.policies: list[Json] = []
        # Called with (method, path) before a request is answered: the world moving mid-call
        # (a comment posted between two pages of a listing). It runs under the fake's lock.
        self.before_answer: Callable[[str, str], None] | None = None
        self._server: loopback.LoopbackServer | None = None
        # Where the fake's clock starts (every timestamp it writes is a later instant); a test
        # of something that compares them with the real clock moves it near today.
        self.epoch = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
        self._git_init()

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> FakeAzureDevOps:
        self._server = loopback.LoopbackServer(self._serve, name="fake Azure DevOps")
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()

    def __enter__(self) -> FakeAzureDevOps:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def origin(self) -> str:
        assert self._server is not None, "start() the fake first"
        return self._server.origin

    @property
    def base_url(self) -> str:
        """The organization URL (what `AzureDevOpsHost(organization_url=…)` takes)."""
        return f"{self.origin}/{ORG}"

    # -- inspection and injection ---------------------------------------------------------------

    def writes(self) -> int:
        """Mutating REST requests answered so far (git pushes not included)."""
        with self._lock:
            return sum(
                1
                for r in self.requests
                if r.method in {"POST", "PATCH", "PUT", "DELETE"} and "/_apis" in r.path
            )

    def count(self, method: str | None = None, pattern: str = "") -> int:
        """Requests answered with `method` (any when None) whose path matches `pattern`."""
        with self._lock:
            return sum(
                1
                for r in self.requests
                if (method is None or r.method == method) and re.search(pattern, r.path, re.I)
            )

    def fail_next(
        self,
        method: str,
        pattern: str,
        status: int = 503,
        *,
        times: int = 1,
        retry_after: float | str | None = None,
    ) -> None:
        """Answer the next `times` matching requests with `status` instead of doing them."""
        with self._lock:
            self._faults.append(
                _Fault(method, re.compile(pattern, re.I), status, times, _text(retry_after))
            )

    def fail_after_store(self, method: str, pattern: str, status: int = 500) -> None:
        """Do the next matching request, then answer `status` as if it had failed."""
        with self._lock:
            self._faults.append(
                _Fault(method, re.compile(pattern, re.I), status, 1, after_store=True)
            )

    def delay_next(self, retry_after: float | str, *, pattern: str = "", times: int = 1) -> None:
        """Answer the next `times` requests normally, with a `Retry-After` header (a 200)."""
        with self._lock:
            self._faults.append(
                _Fault(
                    "*", re.compile(pattern, re.I), 200, times, _text(retry_after), delay_only=True
                )
            )

    # -- the world: work items ------------------------------------------------------------------

    def seed_card(
        self,
        title: str,
        body: str,
        labels: tuple[str, ...] = (),
        assignees: tuple[str, ...] = (),
        *,
        author: Person | None = None,
        item_type: str = "User Story",
        state: str = "New",
    ) -> int:
        """A work item a human filed; its id."""
        with self._lock:
            who = author or self.human
            fields: Json = {"System.Title": title}
            if body:
                fields["System.Description"] = body
            if labels:
                fields["System.Tags"] = "; ".join(labels)
            if assignees:  # a work item has one assignee
                fields["System.AssignedTo"] = self._identity_ref(self._person(assignees[0]))
            return self._new_work_item(item_type, fields, who, state=state).id

    def card(self, number: int) -> Json:
        """A work item's fields as stored."""
        with self._lock:
            return dict(self._work_items[number].fields)

    def edit_card(self, number: int, **fields: str) -> None:
        """A human edits work item fields (`System.Title=…`, by reference name with `_`)."""
        with self._lock:
            item = self._work_items[number]
            for name, value in fields.items():
                item.fields[name.replace("_", ".")] = value
            item.rev += 1

    # -- the world: git and pull requests -------------------------------------------------------

    def commit(
        self, branch: str, files: Mapping[str, str], message: str, start: str = "main"
    ) -> str:
        """A commit on `branch` (made from `start` when new) straight in the bare repo; its SHA."""
        with self._lock:
            parent = self.branch_sha(branch) or self.branch_sha(start)
            env = {"GIT_INDEX_FILE": str(self.root / "index.tmp")}
            Path(env["GIT_INDEX_FILE"]).unlink(missing_ok=True)
            if parent:
                self._git("read-tree", parent, env=env)
            for path, text in files.items():
                blob = self._git("hash-object", "-w", "--stdin", stdin=text)
                self._git("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
            tree = self._git("write-tree", env=env)
            Path(env["GIT_INDEX_FILE"]).unlink()
            sha = self._commit_tree(tree, [parent] if parent else [], message, self.human)
            self._git("update-ref", f"refs/heads/{branch}", sha)
            self._sync_iterations()
            return sha

    def branch_sha(self, branch: str) -> str | None:
        done = run_git(
            self.repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}"
        )
        return done.stdout.strip() if done.returncode == 0 else None

    def seed_pull(
        self,
        head_branch: str,
        base_branch: str = "main",
        *,
        author: Person | None = None,
        draft: bool = False,
        title: str | None = None,
    ) -> int:
        """An active PR a human opened for `head_branch` (made with one commit if missing)."""
        if self.branch_sha(head_branch) is None:
            self.commit(
                head_branch,
                {f"{head_branch}.txt": f"{head_branch}\n"},
                f"work on {head_branch}",
                start=base_branch,
            )
        with self._lock:
            return self._new_pull(
                head_branch,
                base_branch,
                title or f"Merge {head_branch}",
                "",
                author or self.human,
                draft=draft,
            ).id

    def head_of(self, pull: int) -> str:
        with self._lock:
            return self._pulls[pull].head

    def move_head(self, pull: int) -> str:
        """A human pushes one more commit to the PR's branch: a new iteration."""
        with self._lock:
            pr = self._pulls[pull]
            stamp = next(self._clock)
            return self.commit(pr.source, {f"moved-{pull}-{stamp}.txt": f"{stamp}\n"}, "more work")

    def post_status(
        self,
        pull: int,
        name: str,
        state: str,
        *,
        genre: str | None = "ci",
        description: str = "",
        iteration: int | None = None,
    ) -> None:
        """A build service posts PR status `genre/name` on an iteration (the newest unless
        named), as a pipeline does: the world's move, not the adapter's write."""
        with self._lock:
            self._sync_iterations()
            pr = self._pulls[pull]
            now = self._now()
            status: Json = {
                "iterationId": iteration or len(pr.iterations),
                "id": len(pr.statuses) + 1,
                "state": state,
                "description": description,
                "context": {"name": name, "genre": genre},
                "creationDate": now,
                "updatedDate": now,
                "createdBy": self._identity_ref(self.bot),
                "targetUrl": f"https://ci.example/{name}/{len(pr.statuses) + 1}",
            }
            pr.statuses.append(status)

    def require_merge_strategy(
        self,
        ref: str = "refs/heads/main",
        *,
        match: str = "Exact",
        enabled: bool = True,
        blocking: bool = True,
        repository: str | None = REPO_ID,
        **allow: bool,
    ) -> Json:
        """An administrator adds a "Require a merge strategy" policy on `ref` (`allow`: the
        settings, `allowSquash=True`, …; a legacy `useSquashMerge` too); its configuration."""
        with self._lock:
            number = len(self.policies) + 1
            api = f"{self.base_url}/{PROJECT_ID}/_apis/policy"
            kind = f"{api}/types/{MERGE_STRATEGY_POLICY}"
            config: Json = {
                "createdBy": self._identity_ref(self.human),
                "createdDate": self._now(),
                "isEnabled": enabled,
                "isBlocking": blocking,
                "isDeleted": False,
                "settings": {
                    **allow,
                    "scope": [{"refName": ref, "matchKind": match, "repositoryId": repository}],
                },
                "isEnterpriseManaged": False,
                "_links": {
                    "self": {"href": f"{api}/configurations/{number}"},
                    "policyType": {"href": kind},
                },
                "revision": 1,
                "id": number,
                "url": f"{api}/configurations/{number}",
                "type": {
                    "id": MERGE_STRATEGY_POLICY,
                    "url": kind,
                    "displayName": "Require a merge strategy",
                },
            }
            self.policies.append(config)
            return config

    def _policies_for(self, ref: str, repository: str = REPO_ID) -> list[Json]:
        def applies(scope: Json) -> bool:
            if scope.get("repositoryId") not in (None, repository):
                return False
            name = str(scope.get("refName") or "")
            if scope.get("matchKind") == "Prefix":
                return ref.startswith(name)
            return ref == name

        return [p for p in self.policies if any(applies(s) for s in p["settings"].get("scope", []))]

    def evaluate_build(
        self,
        pull: int,
        name: str,
        status: str,
        *,
        blocking: bool = True,
        not_current: bool = False,
        policy_type: str = BUILD_POLICY,
    ) -> None:
        """A build validation policy evaluates the PR (the pipeline ran): its record, as
        "Evaluations - List" returns it, replaces the policy's earlier one."""
        with self._lock:
            pr = self._pulls[pull]
            config_id = next(
                (
                    e["configuration"]["id"]
                    for e in pr.evaluations
                    if e["configuration"]["settings"]["displayName"] == name
                ),
                len(pr.evaluations) + 1,
            )
            pr.evaluations = [e for e in pr.evaluations if e["configuration"]["id"] != config_id]
            build = next(self._clock)
            pr.evaluations.append(
                {
                    "evaluationId": str(uuid.uuid4()),
                    "artifactId": f"vstfs:///CodeReview/CodeReviewId/{PROJECT_ID}/{pull}",
                    "startedDate": self._now(),
                    "completedDate": None if status in ("queued", "running") else self._now(),
                    "status": status,
                    "configuration": {
                        "id": config_id,
                        "revision": 1,
                        "isEnabled": True,
                        "isBlocking": blocking,
                        "isDeleted": False,
                        "type": {"id": policy_type, "displayName": "Build"},
                        "settings": {
                            "buildDefinitionId": 10 + config_id,
                            "displayName": name,
                            "validDuration": 720,
                        },
                    },
                    "context": {
                        "buildId": build,
                        "buildDefinitionId": 10 + config_id,
                        "buildIsNotCurrent": not_current,
                        "isExpired": False,
                    },
                }
            )

    def pull(self, number: int) -> _Pull:
        with self._lock:
            return self._pulls[number]

    def pulls(self) -> list[_Pull]:
        with self._lock:
            return list(self._pulls.values())

    def set_merge_status(self, pull: int, merge_status: str) -> None:
        with self._lock:
            self._pulls[pull].merge_status = merge_status

    def add_reviewer(self, pull: int, person: Person) -> None:
        with self._lock:
            self._pulls[pull].reviewers.append(person)

    # -- the world: comments --------------------------------------------------------------------

    def comment_as(self, author: Author, target: Target, body: str) -> str:
        """A comment by `author` (their own words, or a forged marker); its adapter-side id."""
        with self._lock:
            who = self._person(author.login, author)
            if target.kind == "card":
                return str(self._add_wi_comment(target.number, body, who)["id"])
            thread = self._new_thread(self._pulls[target.number], body, who, status="active")
            return f"{thread['id']}/{thread['comments'][0]['id']}"

    def reply_as(self, author: Author, pull: int, thread_id: int, body: str) -> str:
        """A reply in an existing thread."""
        with self._lock:
            who = self._person(author.login, author)
            thread = self._thread_of(self._pulls[pull], thread_id)
            comment = self._pr_comment(len(thread["comments"]) + 1, body, who, parent=1)
            thread["comments"].append(comment)
            thread["lastUpdatedDate"] = comment["publishedDate"]  # a reply updates its thread
            return f"{thread_id}/{comment['id']}"

    def edit_comment_as(self, target: Target, comment_id: str, body: str) -> None:
        """Someone edits a comment in the UI (e.g. appends under pairbot's owned section)."""
        with self._lock:
            if target.kind == "card":
                comment = self._wi_comment(target.number, int(comment_id))
                comment["text"] = body
                comment["version"] += 1
                return
            thread_id, _, cid = comment_id.partition("/")
            thread = self._thread_of(self._pulls[target.number], int(thread_id))
            comment = self._comment_in(thread, int(cid))
            comment["content"] = body
            now = self._now()
            comment["lastUpdatedDate"] = comment["lastContentUpdatedDate"] = now
            thread["lastUpdatedDate"] = now

    def threads(self, pull: int) -> list[Json]:
        with self._lock:
            return copy.deepcopy(self._pulls[pull].threads)

    def wi_comments(self, number: int) -> list[Json]:
        with self._lock:
            return copy.deepcopy(self._wi_comments.get(number, []))

    def grant(self, author: Author, bits: int) -> None:
        """Give a person these effective Git permission bits on the repository."""
        with self._lock:
            self._person(author.login, author).bits = bits

    def set_branch_ace(self, author: Author, branch: str, *, allow: int = 0, deny: int = 0) -> None:
        """An explicit entry for a person on one branch (a locked or protected `main`)."""
        with self._lock:
            person = self._person(author.login, author)
            self.branch_aces[(person.author.login.casefold(), branch)] = (allow, deny)

    # -- internals: state -----------------------------------------------------------------------

    def _now(self) -> str:
        """The next instant, in Azure DevOps' variable-precision form (`…:05.12Z`, `…:06Z`)."""
        tick = next(self._clock)
        when = self.epoch + timedelta(milliseconds=370 * tick)
        text = when.strftime("%Y-%m-%dT%H:%M:%S.%f").rstrip("0").rstrip(".")
        return text + "Z"

    def _person(self, login: str, author: Author | None = None) -> Person:
        for person in self.people:
            if person.author.login.casefold() == login.casefold():
                return person
        if author is None:
            author = Author(login, _guid(login))
        person = Person(author, author.login.split("@")[0], 0, f"aad.{_guid(login)[:8]}")
        self.people.append(person)
        return person

    def _identity_ref(self, person: Person) -> Json:
        return {
            "displayName": person.display_name,
            "url": f"{self.base_url}/_apis/Identities/{person.author.id}",
            "id": person.author.id,
            "uniqueName": person.author.login,
            "imageUrl": f"{self.base_url}/_api/_common/identityImage?id={person.author.id}",
            "descriptor": person.subject,
        }

    def _new_work_item(self, item_type: str, fields: Json, who: Person, state: str) -> _WorkItem:
        number = next(self._ids)
        now = self._now()
        base: Json = {
            "System.AreaPath": PROJECT,
            "System.TeamProject": PROJECT,
            "System.IterationPath": PROJECT,
            "System.WorkItemType": item_type,
            "System.State": state,
            "System.Reason": "New",
            "System.CreatedDate": now,
            "System.CreatedBy": self._identity_ref(who),
            "System.ChangedDate": now,
            "System.ChangedBy": self._identity_ref(who),
            "Microsoft.VSTS.Common.Priority": 2,
        }
        item = _WorkItem(number, 1, {**base, **fields})
        self._work_items[number] = item
        return item

    def _add_wi_comment(self, number: int, text: str, who: Person, fmt: str = "html") -> Json:
        if number not in self._work_items:
            raise _wi_missing(number)
        now = self._now()
        comment: Json = {
            "workItemId": number,
            "id": next(self._comment_ids),
            "version": 1,
            "text": text,
            "format": fmt,
            "createdBy": self._identity_ref(who),
            "createdDate": now,
            "modifiedBy": self._identity_ref(who),
            "modifiedDate": now,
            "isDeleted": False,
        }
        self._wi_comments.setdefault(number, []).append(comment)
        return comment

    def _wi_comment(self, number: int, comment_id: int) -> Json:
        for comment in self._wi_comments.get(number, []):
            if comment["id"] == comment_id:
                return comment
        raise AzureError(404, f"Comment {comment_id} does not exist.", "CommentNotFoundException")

    def _new_pull(
        self, source: str, target: str, title: str, description: str, who: Person, *, draft: bool
    ) -> _Pull:
        head, base = self.branch_sha(source), self.branch_sha(target)
        if head is None or base is None:
            raise AzureError(
                400,
                "TF401398: The pull request cannot be activated because the source and/or the "
                "target branch no longer exists, or the requested refs are not branches",
                "InvalidArgumentValueException",
            )
        pr = _Pull(
            id=next(self._ids),
            source=source,
            target=target,
            title=title,
            description=description,
            created_by=who,
            created=self._now(),
            draft=draft,
            head=head,
            base_sha=base,
        )
        self._pulls[pr.id] = pr
        self._add_iteration(pr, head, who, reason="create")
        return pr

    def _add_iteration(self, pr: _Pull, head: str, who: Person, reason: str) -> None:
        now = self._now()
        pr.iterations.append(
            {
                "id": len(pr.iterations) + 1,
                "description": pr.title,
                "author": self._identity_ref(who),
                "createdDate": now,
                "updatedDate": now,
                "sourceRefCommit": {"commitId": head},
                "targetRefCommit": {"commitId": pr.base_sha},
                "commonRefCommit": {"commitId": pr.base_sha},
                "hasMoreCommits": False,
                "reason": reason,
                "push": {"pushId": next(self._clock), "date": now},
            }
        )
        pr.head = head

    def _sync_iterations(self) -> None:
        """Every active PR whose branch moved gets a new iteration (as a push makes one)."""
        for pr in self._pulls.values():
            sha = self.branch_sha(pr.source)
            if pr.status == "active" and sha and sha != pr.head:
                self._add_iteration(pr, sha, self.human, reason="push")

    def _pr_comment(self, cid: int, text: str, who: Person, parent: int = 0) -> Json:
        now = self._now()
        return {
            "id": cid,
            "parentCommentId": parent,
            "author": self._identity_ref(who),
            "content": text,
            "publishedDate": now,
            "lastUpdatedDate": now,
            "lastContentUpdatedDate": now,
            "commentType": "text",
            "usersLiked": [],
        }

    def _new_thread(self, pr: _Pull, text: str, who: Person, status: str) -> Json:
        comment = self._pr_comment(1, text, who)
        thread: Json = {
            "pullRequestThreadContext": None,
            "id": 100 + sum(len(p.threads) for p in self._pulls.values()) + 1,
            "publishedDate": comment["publishedDate"],
            "lastUpdatedDate": comment["publishedDate"],
            "comments": [comment],
            "status": status,
            "threadContext": None,
            "properties": {},
            "isDeleted": False,
        }
        pr.threads.append(thread)
        return thread

    def _thread_of(self, pr: _Pull, thread_id: int) -> Json:
        for thread in pr.threads:
            if thread["id"] == thread_id:
                return thread
        raise AzureError(404, f"The thread {thread_id} was not found.", "NotFoundException")

    @staticmethod
    def _comment_in(thread: Json, comment_id: int) -> Json:
        for comment in thread["comments"]:
            if comment["id"] == comment_id:
                return comment  # type: ignore[no-any-return]
        raise AzureError(404, f"Comment {comment_id} was not found.", "NotFoundException")

    def _system_thread(self, pr: _Pull, text: str) -> None:
        """A system-generated thread (vote, merge attempt): pairbot must ignore it."""
        thread = self._new_thread(pr, text, self.bot, status="active")
        thread["comments"][0]["commentType"] = "system"

    # -- internals: git -------------------------------------------------------------------------

    def _git(
        self, *args: str, stdin: str | None = None, env: Mapping[str, str] | None = None
    ) -> str:
        return git(self.repo, *args, input=stdin, env={**git_env(), **(env or {})})

    def _git_init(self) -> None:
        init_bare(self.repo)
        self._git("config", "http.receivepack", "true")
        self.commit("main", {"README.md": "# pairbot demo\n"}, "initial commit")

    def _commit_tree(self, tree: str, parents: list[str], message: str, who: Person) -> str:
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        stamp = f"{1714554000 + next(self._clock)} +0000"
        env = {
            "GIT_AUTHOR_NAME": who.display_name,
            "GIT_AUTHOR_EMAIL": who.author.login,
            "GIT_COMMITTER_NAME": who.display_name,
            "GIT_COMMITTER_EMAIL": who.author.login,
            "GIT_AUTHOR_DATE": stamp,
            "GIT_COMMITTER_DATE": stamp,
        }
        return self._git(*args, "-m", message, env=env)

    def _complete(self, pr: _Pull, strategy: str) -> None:
        base = self.branch_sha(pr.target) or pr.base_sha
        merged = run_git(self.repo, "merge-tree", "--write-tree", "--no-messages", base, pr.head)
        if merged.returncode != 0:
            pr.merge_status = "conflicts"
            raise AzureError(
                409,
                "The pull request could not be completed: it has merge conflicts.",
                "GitPullRequestStaleException",
            )
        tree = merged.stdout.split()[0]
        if strategy == "squash":
            sha = self._commit_tree(tree, [base], f"Merged PR {pr.id}: {pr.title}", self.pairbot)
        else:
            message = f"Merged PR {pr.id}: {pr.title}"
            sha = self._commit_tree(tree, [base, pr.head], message, self.pairbot)
        self._git("update-ref", f"refs/heads/{pr.target}", sha, base)
        pr.status, pr.merge_commit, pr.closed = "completed", sha, self._now()
        if (pr.completion or {}).get("transitionWorkItems"):
            self._transition_linked(pr)

    # -- internals: JSON ------------------------------------------------------------------------

    def _repo_json(self) -> Json:
        return {
            "id": REPO_ID,
            "name": REPO,
            "url": f"{self.base_url}/{PROJECT_ID}/_apis/git/repositories/{REPO_ID}",
            "project": {
                "id": PROJECT_ID,
                "name": PROJECT,
                "url": f"{self.base_url}/_apis/projects/{PROJECT_ID}",
                "state": "wellFormed",
                "revision": 7,
                "visibility": "private",
            },
            **({"defaultBranch": self.default_branch} if self.default_branch else {}),
            "size": 1024,
            "remoteUrl": f"{self.base_url}/{PROJECT}/_git/{REPO}",
            "sshUrl": f"git@ssh.dev.azure.com:v3/{ORG}/{PROJECT}/{REPO}",
            "webUrl": f"{self.base_url}/{PROJECT}/_git/{REPO}",
            "isDisabled": False,
            "isInMaintenance": False,
        }

    def _pr_json(self, pr: _Pull) -> Json:
        api = f"{self.base_url}/{PROJECT_ID}/_apis/git/repositories/{REPO_ID}"
        body: Json = {
            "repository": {
                "id": REPO_ID,
                "name": REPO,
                "url": api,
                "project": {"id": PROJECT_ID, "name": PROJECT, "state": "wellFormed"},
                "remoteUrl": f"{self.base_url}/{PROJECT}/_git/{REPO}",
            },
            "pullRequestId": pr.id,
            "codeReviewId": pr.id,
            "status": pr.status,
            "createdBy": self._identity_ref(pr.created_by),
            "creationDate": pr.created,
            "title": pr.title,
            "description": pr.description,
            "sourceRefName": f"refs/heads/{pr.source}",
            "targetRefName": f"refs/heads/{pr.target}",
            "mergeStatus": pr.merge_status,
            "isDraft": pr.draft,
            "mergeId": _guid(f"merge-{pr.id}-{pr.head}"),
            "lastMergeSourceCommit": {"commitId": pr.head, "url": f"{api}/commits/{pr.head}"},
            "lastMergeTargetCommit": {
                "commitId": pr.base_sha,
                "url": f"{api}/commits/{pr.base_sha}",
            },
            "reviewers": [
                {**self._identity_ref(p), "vote": 0, "isRequired": True, "hasDeclined": False}
                for p in pr.reviewers
            ],
            "labels": [dict(lb) for lb in pr.labels],
            "url": f"{api}/pullRequests/{pr.id}",
            "supportsIterations": True,
            "artifactId": f"vstfs:///Git/PullRequestId/{PROJECT_ID}%2f{REPO_ID}%2f{pr.id}",
        }
        if pr.merge_commit:
            body["lastMergeCommit"] = {"commitId": pr.merge_commit, "url": f"{api}/commits/x"}
        if pr.completion is not None:
            body["completionOptions"] = pr.completion
        if pr.closed:
            body["closedDate"] = pr.closed
            body["closedBy"] = self._identity_ref(self.pairbot)
        return body

    def _wi_json(self, item: _WorkItem) -> Json:
        api = f"{self.base_url}/_apis/wit/workItems/{item.id}"
        return {
            "id": item.id,
            "rev": item.rev,
            "fields": dict(item.fields),
            "_links": {
                "self": {"href": api},
                "workItemUpdates": {"href": f"{api}/updates"},
                "workItemRevisions": {"href": f"{api}/revisions"},
                "workItemHistory": {"href": f"{api}/history"},
                "html": {"href": f"{self.base_url}/web/wi.aspx?pcguid={TENANT}&id={item.id}"},
            },
            "url": api,
        }

    def _wi_comment_json(self, comment: Json) -> Json:
        # 7.1-preview.4 names the comment's id `id` (what the SDK's 7.1 `Comment` reads); the
        # corpus samples, recorded at 5.1-preview, call it `commentId`.
        out = dict(comment)
        out["url"] = (
            f"{self.base_url}/{PROJECT_ID}/_apis/wit/workItems/{comment['workItemId']}"
            f"/comments/{comment['id']}"
        )
        return out

    def _status_json(self, pr: _Pull, status: Json) -> Json:
        api = f"{self.base_url}/_apis/git/repositories/{REPO_ID}/pullRequests/{pr.id}"
        return {
            **status,
            "_links": {
                "self": {"href": f"{api}/statuses/{status['id']}"},
                "repository": {"href": f"{self.base_url}/_apis/git/repositories/{REPO_ID}"},
            },
        }

    def _connection_data(self, person: Person) -> Json:
        identity = self._identity_json(person)
        return {
            "authenticatedUser": identity,
            "authorizedUser": identity,
            "instanceId": _guid("instance"),
            "deploymentId": _guid("deployment"),
            "deploymentType": "hosted",
            "locationServiceData": {
                "serviceOwner": "00025394-6065-48ca-87d9-7f5672854ef7",
                "defaultAccessMappingMoniker": "PublicAccessMapping",
                "lastChangeId": 1,
                "lastChangeId64": 1,
            },
        }

    def _identity_json(self, person: Person) -> Json:
        return {
            "id": person.author.id,
            "descriptor": person.descriptor,
            "subjectDescriptor": person.subject,
            "providerDisplayName": person.display_name,
            "isActive": True,
            "isContainer": False,
            "members": [],
            "memberOf": [],
            "memberIds": [],
            "properties": {
                "Account": {"$type": "System.String", "$value": person.author.login},
                "Mail": {"$type": "System.String", "$value": person.author.login},
                "Domain": {"$type": "System.String", "$value": TENANT},
            },
            "resourceVersion": 2,
            "metaTypeId": 0,
        }

    # -- internals: HTTP ------------------------------------------------------------------------

    def _authorized(self, header: str | None) -> Person | None:
        if not header or not header.startswith("Basic "):
            return None
        try:
            _, _, password = base64.b64decode(header[6:]).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        return self.pairbot if password == self.token else None

    def _fault_for(self, method: str, path: str) -> _Fault | None:
        for fault in self._faults:
            if fault.times > 0 and fault.method in (method, "*") and fault.path.search(path):
                fault.times -= 1
                return fault
        return None

    async def _serve(self, request: loopback.Request) -> loopback.Response:
        """The loopback server's handler: `handle` in a worker thread, so that requests are
        served concurrently as by the service, and the fake's lock keeps its state consistent."""
        req = _Request(
            request.method, request.path, request.query, request.headers, request.body, request
        )
        answer = await asyncio.to_thread(self.handle, req)
        return loopback.Response.of(answer.status, answer.body, answer.headers)

    def handle(self, req: _Request) -> _Response:
        """Answer one request (under the lock: the fake is one consistent server)."""
        with self._lock:
            seen = Seen(req.method, req.path, req.query)
            self.requests.append(seen)
            if self.before_answer is not None:
                self.before_answer(req.method, req.path)
            response = self._answer(req)
            seen.status = response.status
            return response

    def _answer(self, req: _Request) -> _Response:
        if self._authorized(req.headers.get("Authorization")) is None:
            return _Response(
                401,
                b"Unauthorized",
                {"Content-Type": "text/plain", "WWW-Authenticate": 'Basic realm="fake"'},
            )
        if "/_git/" in req.path:
            return self._git_http(req)
        fault = self._fault_for(req.method, req.path)
        if fault is not None and not fault.after_store and not fault.delay_only:
            return _fault_response(fault)
        accept = req.headers.get("Accept", "")
        if req.method != "OPTIONS" and "api-version=7.1" not in accept:
            self.unexpected.append(f"{req.method} {req.path}: api-version not 7.1 ({accept!r})")
            return _json(
                400, AzureError(400, "api-version", "VssVersionOutOfRangeException").body()
            )
        try:
            status, body = self._route(req)
        except AzureError as err:
            status, body = err.status, err.body()
        except _Unknown as unknown:
            self.unexpected.append(f"{req.method} {req.path}?{req.query} {unknown}".strip())
            return _json(404, AzureError(404, "not found", "NotFoundException").body())
        if fault is not None and fault.after_store:
            return _fault_response(fault)
        response = _json(status, body) if body is not None else _Response(status, b"", {})
        if fault is not None and fault.delay_only and fault.retry_after is not None:
            response.headers["Retry-After"] = fault.retry_after
            response.headers["X-RateLimit-Resource"] = "ATCPU"
            response.headers["X-RateLimit-Delay"] = "0.5"
        return response

    def _route(self, req: _Request) -> tuple[int, Any]:
        org = f"/{ORG}"
        path = req.path
        if not path.lower().startswith(org.lower() + "/"):
            raise _Unknown("outside the organization")
        rest = path[len(org) :]
        for method, pattern, handler in _ROUTES:
            match = pattern.fullmatch(rest)
            if match and method == req.method:
                args = {name: unquote(value) for name, value in match.groupdict().items()}
                return handler(self, req, **args)
        raise _Unknown("no such route")

    # -- routes: discovery and people -----------------------------------------------------------

    def _options(self, req: _Request) -> tuple[int, Any]:
        value = [
            {
                "id": lid,
                "area": area,
                "resourceName": resource,
                "routeTemplate": template,
                "resourceVersion": version,
                "minVersion": "1.0",
                "maxVersion": "7.1",
                "releasedVersion": "7.0",
            }
            for lid, area, resource, template, version in LOCATIONS
        ]
        return 200, {"count": len(value), "value": value}

    def _resource_areas(self, req: _Request) -> tuple[int, Any]:
        value = [{"id": i, "name": n, "locationUrl": self.base_url + "/"} for i, n in AREAS]
        return 200, {"count": len(value), "value": value}

    def _connection(self, req: _Request) -> tuple[int, Any]:
        return 200, self._connection_data(self.pairbot)

    def _identities(self, req: _Request) -> tuple[int, Any]:
        query = req.params()
        if query.get("searchFilter") != "General" or "filterValue" not in query:
            raise _Unknown("identity search other than searchFilter=General")
        wanted = query["filterValue"].casefold()
        found = [
            self._identity_json(p)
            for p in self.people
            if wanted in (p.author.login.casefold(), p.display_name.casefold())
        ]
        return 200, {"count": len(found), "value": found}

    def _acls(self, req: _Request, *, namespace: str) -> tuple[int, Any]:
        query = req.params()
        token = query.get("token", "")
        repo_token = f"repoV2/{PROJECT_ID}/{REPO_ID}"
        if namespace != GIT_NAMESPACE or not token.startswith(repo_token):
            raise _Unknown(f"ACL query for {namespace} {token!r}")
        descriptor = query.get("descriptors", "")
        person = next((p for p in self.people if p.descriptor == descriptor), None)
        if token == repo_token:
            allow, deny = (person.bits if person else 0), 0
        else:
            branch = _branch_of(token.removeprefix(repo_token))
            login = person.author.login.casefold() if person else ""
            allow, deny = self.branch_aces.get((login, branch), (0, 0))
        ace = {
            "descriptor": descriptor,
            "allow": allow if token != repo_token else 0,
            "deny": deny,
            "extendedInfo": {
                "effectiveAllow": allow,
                "effectiveDeny": deny,
                "inheritedAllow": allow,
            },
        }
        acl = {
            "inheritPermissions": True,
            "token": token,
            "acesDictionary": {descriptor: ace},
            "includeExtendedInfo": query.get("includeExtendedInfo") == "True",
        }
        return 200, {"count": 1, "value": [acl]}

    # -- routes: git ----------------------------------------------------------------------------

    def _check_repo(self, project: str, repo: str) -> None:
        if project.casefold() not in (PROJECT.casefold(), PROJECT_ID):
            raise AzureError(
                404,
                f"TF200016: The following project does not exist: {project}.",
                "ProjectDoesNotExistWithNameException",
            )
        if repo.casefold() not in (REPO.casefold(), REPO_ID):
            raise AzureError(
                404,
                f"TF401019: The Git repository with name or identifier {repo} does not exist "
                "or you do not have permissions for the operation you are attempting.",
                "GitRepositoryNotFoundException",
            )

    def _pr(self, project: str, repo: str, number: str) -> _Pull:
        self._check_repo(project, repo)
        pr = self._pulls.get(int(number))
        if pr is None:
            raise AzureError(
                404,
                "TF401180: The requested pull request was not found.",
                "GitPullRequestNotFoundException",
            )
        return pr

    def _get_repo(self, req: _Request, *, project: str, repo: str) -> tuple[int, Any]:
        self._check_repo(project, repo)
        return 200, self._repo_json()

    def _list_prs(self, req: _Request, *, project: str, repo: str) -> tuple[int, Any]:
        self._check_repo(project, repo)
        query = req.params()
        known = {"searchCriteria.sourceRefName", "searchCriteria.status", "$top", "$skip"}
        if set(query) - known:
            raise _Unknown(f"PR search by {sorted(set(query) - known)}")
        # Newest first, `$skip` then at most `$top` (the service's default page: 101).
        found = [
            self._pr_json(pr)
            for pr in sorted(self._pulls.values(), key=lambda p: -p.id)
            if query.get("searchCriteria.sourceRefName") in (None, f"refs/heads/{pr.source}")
            and query.get("searchCriteria.status", "active") in ("all", pr.status)
        ]
        skip = int(query.get("$skip") or 0)
        found = found[skip : skip + int(query.get("$top") or 101)]
        return 200, {"count": len(found), "value": found}

    def _create_pr(self, req: _Request, *, project: str, repo: str) -> tuple[int, Any]:
        self._check_repo(project, repo)
        body = req.json()
        source = str(body["sourceRefName"]).removeprefix("refs/heads/")
        target = str(body["targetRefName"]).removeprefix("refs/heads/")
        if len(body.get("description") or "") > 4000:
            raise AzureError(
                400,
                "The description of the pull request is too long: 4000 characters at most.",
                "InvalidArgumentValueException",
            )
        for pr in self._pulls.values():
            if pr.status == "active" and (pr.source, pr.target) == (source, target):
                raise AzureError(
                    409,
                    "TF401179: An active pull request for the source and target branch already "
                    "exists.",
                    "GitPullRequestExistsException",
                )
        made = self._new_pull(
            source,
            target,
            str(body.get("title") or ""),
            str(body.get("description") or ""),
            self.pairbot,
            draft=bool(body.get("isDraft")),
        )
        self._system_thread(made, f"The pull request is mergeable: {made.head[:12]}.")
        return 201, self._pr_json(made)

    def _get_pr(self, req: _Request, *, project: str, repo: str, number: str) -> tuple[int, Any]:
        pr = self._pr(project, repo, number)
        if pr.queued is not None and self.queued_reads > 0:
            self.queued_reads -= 1  # the service is still merging
        elif pr.queued is not None:
            strategy, pr.queued = pr.queued, None
            pr.merge_status = "succeeded"
            self._complete(pr, strategy)
        return 200, self._pr_json(pr)

    def _update_pr(self, req: _Request, *, project: str, repo: str, number: str) -> tuple[int, Any]:
        pr = self._pr(project, repo, number)
        body = req.json()
        allowed = {"status", "isDraft", "title", "description", "completionOptions"}
        allowed |= {"lastMergeSourceCommit", "mergeOptions"}
        if set(body) - allowed:
            raise AzureError(
                400, f"cannot update {sorted(set(body) - allowed)}", "InvalidArgumentValueException"
            )
        if "isDraft" in body:
            pr.draft = bool(body["isDraft"])
        for key in ("title", "description"):
            if key in body:
                setattr(pr, key, str(body[key]))
        status = body.get("status")
        if status == "completed":
            if pr.status != "active":
                raise AzureError(
                    409,
                    "TF401181: The pull request cannot be edited due to its state.",
                    "InvalidPullRequestStatusTransitionException",
                )
            source = (body.get("lastMergeSourceCommit") or {}).get("commitId")
            if source != pr.head:
                raise AzureError(
                    409,
                    "The pull request has been updated since you last viewed it: "
                    "lastMergeSourceCommit does not match the source branch.",
                    "GitPullRequestStaleException",
                )
            if pr.draft:
                raise AzureError(
                    400, "Draft pull requests cannot be completed.", "InvalidArgumentValueException"
                )
            options = body.get("completionOptions") or {}
            strategy = options.get("mergeStrategy") or "noFastForward"
            if strategy not in ("squash", "noFastForward"):
                raise _Unknown(f"mergeStrategy {strategy!r}")
            for policy in self._policies_for(f"refs/heads/{pr.target}"):
                settings = policy["settings"]
                binding = policy["isEnabled"] and policy["isBlocking"] and not policy["isDeleted"]
                if binding and settings.get(_STRATEGY_SETTING[strategy]) is not True:
                    raise AzureError(
                        400,
                        f"The merge strategy {strategy} is not allowed by the policy "
                        f"'Require a merge strategy' on {pr.target}.",
                        "PolicyViolationException",
                    )
            pr.completion = options
            if self.complete_async:
                pr.merge_status = "queued"
                pr.queued = strategy
            else:
                self._complete(pr, strategy)
        elif status == "abandoned":
            if pr.status == "completed":
                raise AzureError(
                    409,
                    "TF401181: The pull request cannot be edited due to its state.",
                    "InvalidPullRequestStatusTransitionException",
                )
            pr.status, pr.closed = "abandoned", self._now()
        elif status is not None:
            raise _Unknown(f"status {status!r}")
        return 200, self._pr_json(pr)

    def _list_threads(
        self, req: _Request, *, project: str, repo: str, number: str
    ) -> tuple[int, Any]:
        pr = self._pr(project, repo, number)
        return 200, {"count": len(pr.threads), "value": pr.threads}

    def _get_thread(
        self, req: _Request, *, project: str, repo: str, number: str, thread: str
    ) -> tuple[int, Any]:
        return 200, self._thread_of(self._pr(project, repo, number), int(thread))

    def _create_thread(
        self, req: _Request, *, project: str, repo: str, number: str
    ) -> tuple[int, Any]:
        pr = self._pr(project, repo, number)
        body = req.json()
        comments = body.get("comments") or []
        if len(comments) != 1 or comments[0].get("parentCommentId", 0) != 0:
            raise _Unknown("a thread that does not open with exactly one comment")
        if comments[0].get("commentType", "text") not in ("text", 1):
            raise _Unknown(f"commentType {comments[0].get('commentType')!r}")
        status = {1: "active", 4: "closed"}.get(body.get("status"), body.get("status") or "active")
        thread = self._new_thread(pr, str(comments[0]["content"]), self.pairbot, str(status))
        return 200, thread

    def _get_comment(
        self, req: _Request, *, project: str, repo: str, number: str, thread: str, cid: str
    ) -> tuple[int, Any]:
        found = self._thread_of(self._pr(project, repo, number), int(thread))
        return 200, self._comment_in(found, int(cid))

    def _update_comment(
        self, req: _Request, *, project: str, repo: str, number: str, thread: str, cid: str
    ) -> tuple[int, Any]:
        found = self._thread_of(self._pr(project, repo, number), int(thread))
        comment = self._comment_in(found, int(cid))
        if comment["author"]["id"] != self.pairbot.author.id:
            raise AzureError(
                403, "You can only edit your own comments.", "UnauthorizedRequestException"
            )
        body = req.json()
        if set(body) != {"content"}:
            raise _Unknown(f"comment update of {sorted(body)}")
        comment["content"] = body["content"]
        comment["lastUpdatedDate"] = comment["lastContentUpdatedDate"] = self._now()
        found["lastUpdatedDate"] = comment["lastUpdatedDate"]
        return 200, comment

    def _like(
        self, req: _Request, *, project: str, repo: str, number: str, thread: str, cid: str
    ) -> tuple[int, Any]:
        found = self._thread_of(self._pr(project, repo, number), int(thread))
        comment = self._comment_in(found, int(cid))
        like = (int(number), int(thread), int(cid), self.pairbot.author.id)
        if like not in self.likes:
            self.likes.append(like)
            comment["usersLiked"].append(self._identity_ref(self.pairbot))
        return 204, None

    def _iterations(
        self, req: _Request, *, project: str, repo: str, number: str
    ) -> tuple[int, Any]:
        pr = self._pr(project, repo, number)
        return 200, {"count": len(pr.iterations), "value": pr.iterations}

    def _iteration(self, pr: _Pull, iteration: str) -> int:
        index = int(iteration)
        if not 1 <= index <= len(pr.iterations):
            raise AzureError(
                404,
                f"The iteration {index} of this pull request cannot be found.",
                "GitPullRequestIterationNotFoundException",
            )
        return index

    def _evaluations(self, req: _Request, *, project: str) -> tuple[int, Any]:
        """Evaluations - List: the policy records of the PR the artifact id names."""
        artifact = req.params().get("artifactId", "")
        prefix = f"vstfs:///CodeReview/CodeReviewId/{PROJECT_ID}/"
        if not artifact.startswith(prefix):
            raise _Unknown(f"policy evaluations for {artifact!r}")
        pr = self._pr(project, REPO, artifact.removeprefix(prefix))
        return 200, {"count": len(pr.evaluations), "value": pr.evaluations}

    def _configurations(self, req: _Request, *, project: str) -> tuple[int, Any]:
        """Git's Policy Configurations - Get: the policies that apply to `refName` of
        `repositoryId`, of `policyType` when given."""
        params = req.params()
        repository = params.get("repositoryId", "")
        if repository.lower() != REPO_ID:
            raise _Unknown(f"policy configurations of repository {repository!r}")
        kind = params.get("policyType")
        found = [
            p
            for p in self._policies_for(params.get("refName", ""), repository.lower())
            if kind is None or p["type"]["id"] == kind
        ]
        return 200, {"count": len(found), "value": found}

    def _list_statuses(
        self, req: _Request, *, project: str, repo: str, number: str, iteration: str
    ) -> tuple[int, Any]:
        pr = self._pr(project, repo, number)
        index = self._iteration(pr, iteration)
        found = [self._status_json(pr, s) for s in pr.statuses if s["iterationId"] == index]
        return 200, {"count": len(found), "value": found}

    def _create_status(
        self, req: _Request, *, project: str, repo: str, number: str, iteration: str
    ) -> tuple[int, Any]:
        pr = self._pr(project, repo, number)
        index = self._iteration(pr, iteration)
        body = req.json()
        context = body.get("context") or {}
        if not context.get("name"):
            raise AzureError(400, "Context.Name is required.", "InvalidArgumentValueException")
        if body.get("state") not in ("pending", "succeeded", "failed", "error", "notApplicable"):
            raise _Unknown(f"status state {body.get('state')!r}")
        now = self._now()
        status = {
            "iterationId": index,
            "id": len(pr.statuses) + 1,
            "state": body["state"],
            "description": body.get("description", ""),
            "context": {"name": context["name"], "genre": context.get("genre")},
            "creationDate": now,
            "updatedDate": now,
            "createdBy": self._identity_ref(self.pairbot),
        }
        if body.get("targetUrl"):
            status["targetUrl"] = body["targetUrl"]
        pr.statuses.append(status)
        return 200, self._status_json(pr, status)

    def _list_labels(
        self, req: _Request, *, project: str, repo: str, number: str
    ) -> tuple[int, Any]:
        pr = self._pr(project, repo, number)
        return 200, {"count": len(pr.labels), "value": pr.labels}

    def _create_label(
        self, req: _Request, *, project: str, repo: str, number: str
    ) -> tuple[int, Any]:
        pr = self._pr(project, repo, number)
        name = str(req.json()["name"])
        for label in pr.labels:
            if label["name"].casefold() == name.casefold():
                return 200, label
        label = {
            "id": _guid(f"label-{name.casefold()}"),
            "name": name,
            "active": True,
            "url": f"{self.base_url}/_apis/git/repositories/{REPO_ID}/pullRequests/{pr.id}/labels",
        }
        pr.labels.append(label)
        return 200, label

    def _delete_label(
        self, req: _Request, *, project: str, repo: str, number: str, name: str
    ) -> tuple[int, Any]:
        pr = self._pr(project, repo, number)
        kept = [lb for lb in pr.labels if name.casefold() not in (lb["name"].casefold(), lb["id"])]
        if len(kept) == len(pr.labels):
            raise AzureError(404, f"label {name} was not found", "NotFoundException")
        pr.labels = kept
        return 204, None

    # -- routes: work items ---------------------------------------------------------------------

    def _check_project(self, project: str) -> None:
        self._check_repo(project, REPO)

    def _item(self, project: str, number: str) -> _WorkItem:
        self._check_project(project)
        item = self._work_items.get(int(number))
        if item is None:
            raise _wi_missing(int(number))
        return item

    def _patch_ops(self, req: _Request) -> list[Json]:
        if not req.headers.get("Content-Type", "").startswith("application/json-patch+json"):
            raise _Unknown(f"work item patch sent as {req.headers.get('Content-Type')!r}")
        ops = req.json()
        if not isinstance(ops, list):
            raise _Unknown("a JSON patch that is not a list")
        return ops

    def _apply(self, item: _WorkItem, ops: list[Json]) -> None:
        fields = dict(item.fields)
        for op in ops:
            kind, path, value = op.get("op"), str(op.get("path")), op.get("value")
            if kind == "test" and path == "/rev":
                if value != item.rev:
                    raise AzureError(
                        412,
                        f"TF26071: This work item has been changed by someone else since you "
                        f"opened it. You will need to refresh it and discard your changes. "
                        f"(rev {value} is not {item.rev})",
                        "WorkItemRevisionMismatchException",
                    )
                continue
            if path == "/relations/-" and kind == "add":
                self._add_relation(item, value)
                continue
            if not path.startswith("/fields/"):
                raise _Unknown(f"patch of {path}")
            name = path.removeprefix("/fields/")
            if kind == "add" and name == "System.Tags" and fields.get(name):
                # `add` on tags merges (wit-workitem-update-add-tag.json).
                merged = [t.strip() for t in str(fields[name]).split(";") if t.strip()]
                for tag in (t.strip() for t in str(value).split(";") if t.strip()):
                    if tag.casefold() not in {m.casefold() for m in merged}:
                        merged.append(tag)
                fields[name] = "; ".join(merged)
            elif kind in ("add", "replace"):
                fields[name] = value
            elif kind == "remove":
                fields.pop(name, None)
            else:
                raise _Unknown(f"patch op {kind!r}")
        if not fields.get("System.Title"):
            raise AzureError(
                400,
                "TF401320: Rule Error for field Title. Error code: Required, HasValues.",
                "RuleValidationException",
            )
        states = dict(STATES.get(str(fields["System.WorkItemType"]), ()))
        if states and fields.get("System.State") not in states:
            raise AzureError(
                400,
                f"TF401320: Rule Error for field State. {fields.get('System.State')!r} is not in "
                "the list of supported values.",
                "RuleValidationException",
            )
        now = self._now()
        fields["System.ChangedDate"] = now
        fields["System.ChangedBy"] = self._identity_ref(self.pairbot)
        item.fields = fields
        item.rev += 1

    def _get_wi(self, req: _Request, *, project: str, number: str) -> tuple[int, Any]:
        body = self._wi_json(self._item(project, number))
        if req.params().get("$expand", "").casefold() in ("relations", "all"):
            body["relations"] = copy.deepcopy(self._item(project, number).relations)
        return 200, body

    @staticmethod
    def _add_relation(item: _WorkItem, value: Any) -> None:
        """`add /relations/-`: a link (only artifact links to a pull request are known here);
        the same link twice is the service's 400."""
        if not isinstance(value, dict) or value.get("rel") != "ArtifactLink":
            raise _Unknown(f"relation {value!r}")
        url = str(value.get("url") or "")
        if not url.startswith("vstfs:///Git/PullRequestId/"):
            raise _Unknown(f"artifact link {url!r}")
        if any(r["url"].casefold() == url.casefold() for r in item.relations):
            raise AzureError(
                400,
                f"TF201035: The link to {url} already exists on work item {item.id}.",
                "WorkItemLinkAlreadyExistsException",
            )
        item.relations.append(
            {"rel": "ArtifactLink", "url": url, "attributes": dict(value.get("attributes") or {})}
        )

    def linked_pulls(self, number: int) -> list[int]:
        """The pull requests work item `number` links (its Pull Request artifact links)."""
        prefix = f"vstfs:///Git/PullRequestId/{PROJECT_ID}%2F{REPO_ID}%2F"
        return [
            int(r["url"][len(prefix) :])
            for r in self._work_items[number].relations
            if r["url"].startswith(prefix)
        ]

    def _transition_linked(self, pr: _Pull) -> None:
        """`completionOptions.transitionWorkItems`: every work item linked to `pr` moves to "the
        next logical state (i.e. Active -> Resolved)": its type's first Resolved-category state,
        else its first Completed one; one already there stays."""
        for item in self._work_items.values():
            if pr.id not in self.linked_pulls(item.id):
                continue
            states = STATES.get(str(item.fields.get("System.WorkItemType")), ())
            category = dict(states).get(str(item.fields.get("System.State")))
            if category in ("Resolved", "Completed", "Removed"):
                continue
            done = next((n for n, c in states if c == "Resolved"), None) or next(
                (n for n, c in states if c == "Completed"), None
            )
            if done is not None:
                item.fields["System.State"] = done
                item.fields["System.ChangedDate"] = self._now()
                item.fields["System.ChangedBy"] = self._identity_ref(self.pairbot)
                item.rev += 1

    def _create_wi(self, req: _Request, *, project: str, item_type: str) -> tuple[int, Any]:
        self._check_project(project)
        ops = self._patch_ops(req)
        if item_type not in STATES:
            raise AzureError(
                404,
                f"Work item type {item_type} does not exist.",
                "WorkItemTypeNotFoundException",
            )
        item = self._new_work_item(item_type, {}, self.pairbot, state=STATES[item_type][0][0])
        try:
            item.rev = 0
            self._apply(item, ops)
        except AzureError:
            del self._work_items[item.id]
            raise
        return 200, self._wi_json(item)

    def _update_wi(self, req: _Request, *, project: str, number: str) -> tuple[int, Any]:
        item = self._item(project, number)
        self._apply(item, self._patch_ops(req))
        return 200, self._wi_json(item)

    def _states(self, req: _Request, *, project: str, item_type: str) -> tuple[int, Any]:
        self._check_project(project)
        states = STATES.get(item_type)
        if states is None:
            raise _Unknown(f"states of {item_type!r}")
        value = [{"name": n, "color": "b2b2b2", "category": c} for n, c in states]
        return 200, {"count": len(value), "value": value}

    def _wiql(self, req: _Request, *, project: str) -> tuple[int, Any]:
        """Query By Wiql, for the one query shape pairbot sends: the project's work items
        changed at or after a time (`[System.ChangedDate] >= '…'`), oldest change first, at
        most `$top`. Adding a comment changes its work item on the service (a new revision),
        so an item's newest comment counts as a change here."""
        self._check_project(project)
        query = str((req.json() or {}).get("query", ""))
        found = re.search(r"\[System\.ChangedDate\]\s*>=\s*'([^']+)'", query)
        if found is None or "@project" not in query:
            raise _Unknown(f"a WIQL query pairbot does not send: {query!r}")
        since = _when(found.group(1))
        changed: list[tuple[datetime, int]] = []
        for item in self._work_items.values():
            stamps = [str(item.fields.get("System.ChangedDate", ""))]
            stamps += [str(c["createdDate"]) for c in self._wi_comments.get(item.id, [])]
            newest = max(_when(stamp) for stamp in stamps)
            if newest >= since:
                changed.append((newest, item.id))
        changed.sort()
        top = int(req.params().get("$top", "20000"))
        refs = [
            {"id": number, "url": f"{self.base_url}/_apis/wit/workItems/{number}"}
            for _, number in changed[:top]
        ]
        return 200, {
            "queryType": "flat",
            "queryResultType": "workItem",
            "asOf": self._now(),
            "columns": [{"referenceName": "System.Id", "name": "ID"}],
            "sortColumns": [],
            "workItems": refs,
        }

    def _list_wi_comments(self, req: _Request, *, project: str, number: str) -> tuple[int, Any]:
        self._item(project, number)
        query = req.params()
        comments = [c for c in self._wi_comments.get(int(number), []) if not c["isDeleted"]]
        comments.sort(key=lambda c: c["id"], reverse=query.get("order", "desc") != "asc")
        start = int(query.get("continuationToken", "0") or "0")
        top = int(query.get("$top", str(self.page_size)))
        page = comments[start : start + min(top, self.page_size)]
        body: Json = {
            "totalCount": len(comments),
            "count": len(page),
            "comments": [self._wi_comment_json(c) for c in page],
        }
        if start + len(page) < len(comments):
            body["continuationToken"] = str(start + len(page))
            body["nextPage"] = (
                f"{self.base_url}/{PROJECT_ID}/_apis/wit/workItems/{number}/comments"
                f"?continuationToken={start + len(page)}"
            )
        return 200, body

    def _add_wi_comment_route(self, req: _Request, *, project: str, number: str) -> tuple[int, Any]:
        self._item(project, number)
        fmt = req.params().get("format", "html")
        comment = self._add_wi_comment(int(number), str(req.json()["text"]), self.pairbot, fmt)
        return 200, self._wi_comment_json(comment)

    def _get_wi_comment(
        self, req: _Request, *, project: str, number: str, cid: str
    ) -> tuple[int, Any]:
        self._item(project, number)
        return 200, self._wi_comment_json(self._wi_comment(int(number), int(cid)))

    def _update_wi_comment(
        self, req: _Request, *, project: str, number: str, cid: str
    ) -> tuple[int, Any]:
        self._item(project, number)
        comment = self._wi_comment(int(number), int(cid))
        if comment["createdBy"]["id"] != self.pairbot.author.id:
            raise AzureError(
                403, "You can only edit your own comments.", "UnauthorizedRequestException"
            )
        comment["text"] = str(req.json()["text"])
        comment["format"] = req.params().get("format", comment["format"])
        comment["version"] += 1
        comment["modifiedDate"] = self._now()
        return 200, self._wi_comment_json(comment)

    def _react(
        self, req: _Request, *, project: str, number: str, cid: str, kind: str
    ) -> tuple[int, Any]:
        self._item(project, number)
        self._wi_comment(int(number), int(cid))
        if kind not in REACTIONS:
            raise _Unknown(f"reaction {kind!r}")
        record = (int(number), int(cid), kind, self.pairbot.author.id)
        if record not in self.reactions:
            self.reactions.append(record)
        count = sum(1 for r in self.reactions if r[:3] == record[:3])
        return 200, {
            "commentId": int(cid),
            "type": kind,
            "count": count,
            "isCurrentUserEngaged": True,
        }

    # -- git smart HTTP -------------------------------------------------------------------------

    def _git_http(self, req: _Request) -> _Response:
        prefix = f"/{ORG}/{PROJECT}/_git/{REPO}"
        if not req.path.lower().startswith(prefix.lower()):
            self.unexpected.append(f"git {req.method} {req.path}")
            return _Response(404, b"not found", {"Content-Type": "text/plain"})
        tail = req.path[len(prefix) :]
        answer = loopback.git_http_backend(
            req.raw,
            project_root=self.root,
            path_info=f"/{self.repo.name}{tail}",
            remote_user=self.pairbot.author.login,
        )
        if req.method == "POST" and tail.endswith("git-receive-pack"):
            self._sync_iterations()
        return _Response(answer.status, answer.body, dict(answer.headers))


# -- HTTP plumbing ------------------------------------------------------------------------------


class _Unknown(Exception):
    """A request the fake does not implement: answered 404 and recorded."""


@dataclass
class _Request:
    method: str
    path: str
    query: str
    headers: Mapping[str, str]  # case-insensitive lookups, as HTTP wants
    body: bytes
    raw: loopback.Request  # as served, for the git bridge

    def json(self) -> Any:
        return json.loads(self.body or b"null")

    def params(self) -> dict[str, str]:
        return {k: v[-1] for k, v in parse_qs(self.query, keep_blank_values=True).items()}


@dataclass
class _Response:
    status: int
    body: bytes
    headers: dict[str, str]


def _branch_of(rest: str) -> str:
    """`/refs/heads/<hex UTF-16LE segments>` (the Git namespace's branch token) → the branch;
    anything else is a request the fake does not know."""
    if not rest.startswith("/refs/heads/"):
        raise _Unknown(f"ACL token tail {rest!r}")
    try:
        parts = [bytes.fromhex(p).decode("utf-16-le") for p in rest[12:].strip("/").split("/")]
    except (ValueError, UnicodeDecodeError):
        raise _Unknown(f"ACL token tail {rest!r} is not hex UTF-16LE") from None
    return "/".join(parts)


def _text(value: float | str | None) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else f"{value:g}"


def _json(status: int, body: Any) -> _Response:
    return _Response(
        status,
        json.dumps(body).encode(),
        {"Content-Type": "application/json; charset=utf-8; api-version=7.1"},
    )


def _fault_response(fault: _Fault) -> _Response:
    headers: dict[str, str] = {}
    if fault.retry_after is not None:
        headers["Retry-After"] = fault.retry_after
    if fault.status == 429:
        err = AzureError(
            429,
            "TF400733: The request has been canceled: Request was blocked due to exceeding usage "
            "of resource 'ATCPU' in namespace 'User'.",
            "RequestBlockedException",
        )
        response = _json(429, err.body())
        response.headers.update(headers)
        return response
    return _Response(
        fault.status, b"Service Unavailable", {"Content-Type": "text/plain", **headers}
    )


def _wi_missing(number: int) -> AzureError:
    return AzureError(
        404,
        f"TF401232: Work item {number} does not exist, or you do not have permissions to read it.",
        "WorkItemUnauthorizedAccessException",
    )


_P = r"/(?P<project>[^/]+)"  # a project
_R = _P + r"/_apis/git/repositories/(?P<repo>[^/]+)"  # a project and a repository
_PR = _R + r"/pullRequests/(?P<number>\d+)"
_WI = _P + r"/_apis/wit/workItems/(?P<number>\d+)"
_ROUTES: tuple[tuple[str, re.Pattern[str], Callable[..., tuple[int, Any]]], ...] = tuple(
    (method, re.compile(pattern, re.I), handler)
    for method, pattern, handler in (
        ("OPTIONS", r"/_apis", FakeAzureDevOps._options),
        ("GET", r"/_apis/ResourceAreas", FakeAzureDevOps._resource_areas),
        ("GET", r"/_apis/ConnectionData", FakeAzureDevOps._connection),
        ("GET", r"/_apis/Identities", FakeAzureDevOps._identities),
        ("GET", r"/_apis/AccessControlLists/(?P<namespace>[^/]+)", FakeAzureDevOps._acls),
        ("GET", _R, FakeAzureDevOps._get_repo),
        ("GET", _R + r"/pullRequests", FakeAzureDevOps._list_prs),
        ("POST", _R + r"/pullRequests", FakeAzureDevOps._create_pr),
        ("GET", _PR, FakeAzureDevOps._get_pr),
        ("PATCH", _PR, FakeAzureDevOps._update_pr),
        ("GET", _PR + r"/threads", FakeAzureDevOps._list_threads),
        ("POST", _PR + r"/threads", FakeAzureDevOps._create_thread),
        ("GET", _PR + r"/threads/(?P<thread>\d+)", FakeAzureDevOps._get_thread),
        (
            "GET",
            _PR + r"/threads/(?P<thread>\d+)/comments/(?P<cid>\d+)",
            FakeAzureDevOps._get_comment,
        ),
        (
            "PATCH",
            _PR + r"/threads/(?P<thread>\d+)/comments/(?P<cid>\d+)",
            FakeAzureDevOps._update_comment,
        ),
        (
            "POST",
            _PR + r"/threads/(?P<thread>\d+)/comments/(?P<cid>\d+)/likes",
            FakeAzureDevOps._like,
        ),
        ("GET", _PR + r"/iterations", FakeAzureDevOps._iterations),
        ("GET", _P + r"/_apis/policy/evaluations", FakeAzureDevOps._evaluations),
        ("GET", _P + r"/_apis/git/policy/configurations", FakeAzureDevOps._configurations),
        ("GET", _PR + r"/iterations/(?P<iteration>\d+)/statuses", FakeAzureDevOps._list_statuses),
        ("POST", _PR + r"/iterations/(?P<iteration>\d+)/statuses", FakeAzureDevOps._create_status),
        ("GET", _PR + r"/labels", FakeAzureDevOps._list_labels),
        ("POST", _PR + r"/labels", FakeAzureDevOps._create_label),
        ("DELETE", _PR + r"/labels/(?P<name>[^/]+)", FakeAzureDevOps._delete_label),
        ("POST", _P + r"/_apis/wit/workItems/\$(?P<item_type>[^/]+)", FakeAzureDevOps._create_wi),
        ("POST", _P + r"/_apis/wit/wiql", FakeAzureDevOps._wiql),
        ("GET", _WI, FakeAzureDevOps._get_wi),
        ("PATCH", _WI, FakeAzureDevOps._update_wi),
        ("GET", _WI + r"/comments", FakeAzureDevOps._list_wi_comments),
        ("POST", _WI + r"/comments", FakeAzureDevOps._add_wi_comment_route),
        ("GET", _WI + r"/comments/(?P<cid>\d+)", FakeAzureDevOps._get_wi_comment),
        ("PATCH", _WI + r"/comments/(?P<cid>\d+)", FakeAzureDevOps._update_wi_comment),
        ("PUT", _WI + r"/comments/(?P<cid>\d+)/reactions/(?P<kind>[^/]+)", FakeAzureDevOps._react),
        (
            "GET",
            _P + r"/_apis/wit/workitemtypes/(?P<item_type>[^/]+)/states",
            FakeAzureDevOps._states,
        ),
    )
)


@contextlib.contextmanager
def running(token: str, root: Path, **kwargs: Any) -> Iterator[FakeAzureDevOps]:
    """A started fake, stopped on exit."""
    fake = FakeAzureDevOps(token, root, **kwargs)
    with fake:
        yield fake


class AzureHarness:
    """`ContractHarness` over the fake: the adapter, a restart, and the world around it."""

    def __init__(self, fake: FakeAzureDevOps, make_host: Callable[[], Host]) -> None:
        self.fake = fake
        self._make_host = make_host
        self.host = make_host()
        self.identity = fake.pairbot.author
        self.human = fake.human.author
        self.bot = fake.bot.author

    def restart(self) -> Host:
        """A fresh adapter over the same fake (no identity, repository or state cache)."""
        return self._make_host()

    async def seed_card(
        self, title: str, body: str, labels: tuple[str, ...] = (), assignees: tuple[str, ...] = ()
    ) -> int:
        return self.fake.seed_card(title, body, labels, assignees)

    async def seed_pull(self, head_branch: str, base_branch: str = "main") -> int:
        return self.fake.seed_pull(head_branch, base_branch)

    async def head_of(self, pull: int) -> str:
        return self.fake.head_of(pull)

    async def move_head(self, pull: int) -> str:
        return self.fake.move_head(pull)

    async def comment_as(self, author: Author, target: Target, body: str) -> str:
        return self.fake.comment_as(author, target, body)

    async def report_check(
        self, pull: int, sha: str, name: str, state: str, summary: str = ""
    ) -> None:
        iterations = [
            int(it["id"])
            for it in self.fake.pull(pull).iterations
            if it["sourceRefCommit"]["commitId"] == sha
        ]
        azure = {"success": "succeeded", "failure": "failed", "pending": "pending"}[state]
        self.fake.post_status(
            pull, name, azure, genre=None, description=summary, iteration=iterations[-1]
        )

    def writes(self) -> int:
        return self.fake.writes()


def _when(text: str) -> datetime:
    """An Azure DevOps timestamp (`…:05.12Z`), or the distant past when it is none."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
