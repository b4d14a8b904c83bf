"""A repository's `pair-state` branch read through GitHub's git data API, without a checkout.

    reader = StateBranchReader.of(session)               # an installation's GitHubSession
    files = await reader.read("octo/widget", previous, wanted)   # BranchFiles, or None
    config = await reader.default_file("octo/widget", ".pair/config.yaml")  # or None

The GitHub Action and the Azure Pipelines entry keep a repository's run-state on its orphan
branch `pair-state` (`action.statebranch`): `.pair/batches/<batch>/run/journal.jsonl` and
`state.json`, and a few other files. The App reads them here, with the calls a page view can
afford:

    GET /repos/{owner}/{repo}/git/ref/heads/pair-state    the tip (404: no such branch)
    GET /repos/{owner}/{repo}/git/trees/{tip}?recursive=1 every path, mode and blob sha
    GET /repos/{owner}/{repo}/git/blobs/{sha}             the bytes of a file that changed

The ref is read through the session's edge (`hosts.github.transport`), which resends a GET it
has an ETag for with `If-None-Match`, and a `304 Not Modified` does not count against the rate
limit. A tip equal to the one `previous` was read at is the end of it: a repository whose
branch did not move costs one conditional request. When it moved, the tree is listed (a tree
of a commit never changes) and only the files whose blob sha is new are fetched: a blob is
content-addressed, so a file with the same sha is the same bytes.
https://docs.github.com/en/rest/git/refs#get-a-reference
https://docs.github.com/en/rest/git/trees#get-a-tree
https://docs.github.com/en/rest/git/blobs#get-a-blob

A file users write on the default branch (`.pair/config.yaml`: the gates and budgets a card's
page shows) is read with the contents API, also conditional, so an unchanged file costs one
304 (`default_file`):

    GET /repos/{owner}/{repo}/contents/{path}              no `ref`: the default branch
https://docs.github.com/en/rest/repos/contents#get-repository-content

Every call goes through the session's discipline (`hosts.calls`: the rate window, reads
retried a bounded number of times, a refused installation token minted once) and fails as a
`hosts.errors.HostError`. A file over `max_bytes` is listed with no bytes and a problem, never
fetched; a tree GitHub truncated (over its 100,000 entries) is said in `truncated`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hosts.errors import Conflict, HostError, NotFound
from hosts.github import payloads

if TYPE_CHECKING:
    from hosts.calls import Calls
    from hosts.github.client import PooledGitHub
    from hosts.github.session import GitHubSession

STATE_BRANCH = "pair-state"
MAX_BYTES = 16 * 1024 * 1024  # a journal larger than this is named, not fetched
BLOB_FETCHES = 4  # blobs fetched at once for one repository
_SHA = re.compile(r"^[0-9a-f]{40}$")
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}/[A-Za-z0-9_.-]{1,100}$")
_REGULAR = ("100644", "100755")


@dataclass(frozen=True)
class BranchFile:
    """One file of the branch: its blob sha and bytes (None, with `problem`, when not read)."""

    sha: str
    data: bytes | None
    problem: str = ""


@dataclass(frozen=True)
class BranchFiles:
    """The wanted files of the branch at `tip`, by branch-relative path."""

    tip: str
    files: Mapping[str, BranchFile] = field(default_factory=dict)
    truncated: bool = False  # GitHub listed part of the tree only


class StateBranchReader:
    """Reads one branch of any repository an installation can see (see the module docstring)."""

    def __init__(
        self,
        gh: PooledGitHub,
        calls: Calls,
        *,
        branch: str = STATE_BRANCH,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self._gh = gh
        self._calls = calls
        self.branch = branch
        self.max_bytes = max_bytes

    @classmethod
    def of(cls, session: GitHubSession, **options: Any) -> StateBranchReader:
        """A reader over an installation's session: its pool, token, rate window and ETags."""
        return cls(session.gh, session.calls, **options)

    async def tip(self, repo: str) -> str | None:
        """The commit the branch points at; None when the repository has no such branch."""
        owner, name = _split(repo)
        op = f"read {self.branch} of {repo}"
        git = self._gh.rest.git
        try:
            response = await self._calls.read(
                op, lambda: git.async_get_ref(owner, name, f"heads/{self.branch}")
            )
        except NotFound:
            return None
        except Conflict:  # 409: an empty repository has no refs at all
            return None
        target = payloads.obj(response).get("object")
        sha = target.get("sha") if isinstance(target, dict) else None
        if not isinstance(sha, str) or not _SHA.match(sha):
            raise HostError(f"{op}: GitHub answered a ref with no commit sha")
        return sha

    async def read(
        self, repo: str, previous: BranchFiles | None, wanted: Callable[[str], bool]
    ) -> BranchFiles | None:
        """The `wanted` files at the branch's tip (None: no branch); `previous` when the tip
        has not moved, and its bytes reused for every file whose blob did not change."""
        tip = await self.tip(repo)
        if tip is None:
            return None
        if previous is not None and previous.tip == tip:
            return previous
        listed, truncated = await self._tree(repo, tip, wanted)
        known = {f.sha: f for f in previous.files.values()} if previous is not None else {}
        files: dict[str, BranchFile] = {}
        missing: dict[str, str] = {}  # path → sha to fetch
        for path, (sha, size) in listed.items():
            if sha in known and known[sha].data is not None:
                files[path] = known[sha]
            elif size is not None and size > self.max_bytes:
                problem = f"{size} bytes, over the {self.max_bytes} this reader fetches"
                files[path] = BranchFile(sha, None, problem)
            else:
                missing[path] = sha
        files.update(await self._blobs(repo, missing))
        return BranchFiles(tip=tip, files=dict(sorted(files.items())), truncated=truncated)

    async def default_file(self, repo: str, path: str) -> BranchFile | None:
        """The file at `path` on the repository's default branch (None: no such file, or an
        empty repository); a file over `max_bytes`, or not a file, has no bytes and a problem."""
        owner, name = _split(repo)
        op = f"read {path} on the default branch of {repo}"
        repos = self._gh.rest.repos
        try:
            response = await self._calls.read(
                op, lambda: repos.async_get_content(owner, name, path)
            )
        except NotFound:
            return None
        except Conflict:  # 409: an empty repository has no default branch yet
            return None
        data = payloads.obj(response)  # a directory is a list: obj() refuses it
        sha, size = data.get("sha"), data.get("size")
        if not isinstance(sha, str) or not _SHA.match(sha):
            raise HostError(f"{op}: GitHub answered content with no blob sha")
        if data.get("type") != "file":
            return BranchFile(sha, None, f"{path} is a {data.get('type')}, not a file")
        if isinstance(size, int) and size > self.max_bytes:
            return BranchFile(
                sha, None, f"{size} bytes, over the {self.max_bytes} this reader reads"
            )
        return _decoded(sha, data)

    async def _tree(
        self, repo: str, tip: str, wanted: Callable[[str], bool]
    ) -> tuple[dict[str, tuple[str, int | None]], bool]:
        owner, name = _split(repo)
        op = f"list {self.branch} of {repo} at {tip[:12]}"
        git = self._gh.rest.git
        # A commit sha names its tree here as well as the tree's own sha does (one call less).
        response = await self._calls.read(
            op, lambda: git.async_get_tree(owner, name, tip, recursive="1")
        )
        data = payloads.obj(response)
        entries = data.get("tree")
        if not isinstance(entries, list):
            raise HostError(f"{op}: GitHub answered a tree with no entries")
        listed: dict[str, tuple[str, int | None]] = {}
        for entry in entries:
            if not isinstance(entry, dict) or entry.get("type") != "blob":
                continue
            path, sha, size = entry.get("path"), entry.get("sha"), entry.get("size")
            if not isinstance(path, str) or not isinstance(sha, str) or not _SHA.match(sha):
                continue
            if entry.get("mode") in _REGULAR and wanted(path):
                listed[path] = (sha, size if isinstance(size, int) else None)
        return listed, data.get("truncated") is True

    async def _blobs(self, repo: str, missing: Mapping[str, str]) -> dict[str, BranchFile]:
        limit = asyncio.Semaphore(BLOB_FETCHES)

        async def one(path: str, sha: str) -> tuple[str, BranchFile]:
            async with limit:
                return path, await self._blob(repo, path, sha)

        done = await asyncio.gather(*(one(path, sha) for path, sha in missing.items()))
        return dict(done)

    async def _blob(self, repo: str, path: str, sha: str) -> BranchFile:
        owner, name = _split(repo)
        op = f"read {path} on {self.branch} of {repo}"
        git = self._gh.rest.git
        response = await self._calls.read(op, lambda: git.async_get_blob(owner, name, sha))
        return _decoded(sha, payloads.obj(response))


def _decoded(sha: str, data: Mapping[str, Any]) -> BranchFile:
    """A blob's (or a content file's: the same two fields) bytes from GitHub's answer."""
    content, encoding = data.get("content"), data.get("encoding")
    if not isinstance(content, str):
        return BranchFile(sha, None, "GitHub answered the blob without its content")
    if encoding == "utf-8":
        return BranchFile(sha, content.encode("utf-8"))
    if encoding != "base64":
        return BranchFile(sha, None, f"GitHub answered the blob in {encoding!r}")
    try:
        raw = base64.b64decode(content.replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):
        return BranchFile(sha, None, "GitHub answered a blob that is not base64")
    return BranchFile(sha, raw)


def _split(repo: str) -> tuple[str, str]:
    if not _REPO.match(repo):
        raise ValueError(f"expected a repository as owner/name, got {repo!r}")
    owner, _, name = repo.partition("/")
    return owner, name
