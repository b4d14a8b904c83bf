"""`pair-state` branches for the App's tests: written by the Action's own code, served by a fake.

    cards = run_real_cards(tmp, 2)                  # two cards through the real cycle
    push_run_state(cards.root, bare)                # onto `pair-state` of `bare`, written by
                                                    # action.statebranch.StateBranch (lock,
                                                    # push, release: what a CI run does)
    fake = StateGitHub(clock=WallClock(), state_repos={"octo/widget": bare})
    with serve_fake_github(fake, bare_repo=None) as base_url: ...

`StateGitHub` is `tests/support/fake_github.py`'s FakeGitHub (credentials, token mints, ETags
and 304s, the bookkeeping) answering three more routes for every repository of `state_repos`,
from the real bare repository, in the shapes of GitHub's git data API (no corpus example
exists for them; the fields are GitHub's documented ones, checked against githubkit's models
`GitRef`, `GitTree` and `Blob`):

    GET /repos/{o}/{r}/git/ref/heads/{branch}     {"ref", "node_id", "url", "object":
                                                   {"type": "commit", "sha", "url"}}; 404
                                                   {"message": "Not Found", …} when absent
    GET /repos/{o}/{r}/git/trees/{tree-ish}       {"sha", "url", "tree": [{"path", "mode",
                                                   "type", "sha", "size", "url"}], "truncated"}
                                                   (`recursive=1` lists every blob)
    GET /repos/{o}/{r}/git/blobs/{sha}            {"sha", "node_id", "size", "url", "content":
                                                   base64 in lines, "encoding": "base64"}

and one route of the contents API, for the file users write on the default branch (the
bare repository's HEAD, `main`; the shape is GitHub's documented "content file" response):

    GET /repos/{o}/{r}/contents/{path}            {"type": "file", "encoding": "base64",
                                                   "size", "name", "path", "content", "sha",
                                                   "url", "git_url", "html_url",
                                                   "download_url", "_links"}; 404 when the
                                                   file (or the default branch) is absent

`git_gets` lists (path, status) of those GETs, in order: a 304 is an `If-None-Match` answered
(the fake answers 304 only to the ETag it sent with the body). `push_default_file` commits a
file onto the default branch.
"""

from __future__ import annotations

import base64
import dataclasses
import re
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from action.statebranch import StateBranch
from tests.support.card_project import MAINTAINER, CardProject
from tests.support.fake_github import FakeGitHub, _Request
from tests.support.git import git, git_env, init_bare, init_repo

_GIT_DATA = re.compile(
    r"/repos/(?P<repo>[^/]+/[^/]+)/git/(?:ref/(?P<ref>heads/.+)|trees/(?P<tree>[^/]+)"
    r"|blobs/(?P<blob>[0-9a-f]{40}))"
)
_CONTENTS = re.compile(r"/repos/(?P<repo>[^/]+/[^/]+)/contents/(?P<path>.+)")
_NOT_FOUND = "https://docs.github.com/rest/git/refs#get-a-reference"
_NO_CONTENT = "https://docs.github.com/rest/repos/contents#get-repository-content"


def _git(bare: Path, *args: str, text: bool = True) -> Any:
    return subprocess.run(
        ["git", "-C", str(bare), *args],
        env=git_env(),
        capture_output=True,
        text=text,
        check=False,
        timeout=60,
    )


@dataclass
class StateGitHub(FakeGitHub):
    """FakeGitHub with the git data API over real bare repositories (see the module doc)."""

    state_repos: dict[str, Path] = field(default_factory=dict)

    @property
    def git_gets(self) -> list[tuple[str, int]]:
        """(path, status) of every git data GET, in order, as answered (304s included)."""
        return [
            (path, status)
            for path, _, status in self.gets
            if _GIT_DATA.fullmatch(path) or _CONTENTS.fullmatch(path)
        ]

    def _route(self, call: _Request) -> httpx.Response:
        found = _GIT_DATA.fullmatch(call.path) if call.method == "GET" else None
        content = _CONTENTS.fullmatch(call.path) if call.method == "GET" else None
        if content is not None and content["repo"] in self.state_repos:
            bare = self.state_repos[content["repo"]]
            return self._content(content["repo"], bare, content["path"], call.query.get("ref"))
        if found is None:
            return super()._route(call)
        bare = self.state_repos.get(found["repo"])
        if bare is None:
            response = self._error(404, "Not Found")
        elif found["ref"]:
            response = self._ref(found["repo"], bare, found["ref"])
        elif found["tree"]:
            response = self._tree(found["repo"], bare, found["tree"], call.query)
        else:
            response = self._blob(found["repo"], bare, found["blob"])
        # The fake turns a 200 into a 304 after this, when If-None-Match matches its ETag.
        return response

    def _url(self, repo: str, rest: str) -> str:
        return f"{self.base_url}/repos/{repo}/git/{rest}"

    def _ref(self, repo: str, bare: Path, ref: str) -> httpx.Response:
        done = _git(bare, "rev-parse", "--verify", "--quiet", f"refs/{ref}^{{commit}}")
        if done.returncode != 0:
            return self._json(404, {"message": "Not Found", "documentation_url": _NOT_FOUND})
        sha = done.stdout.strip()
        return self._json(
            200,
            {
                "ref": f"refs/{ref}",
                "node_id": "REF_" + base64.b64encode(f"{repo}:{ref}".encode()).decode(),
                "url": self._url(repo, f"refs/{ref}"),
                "object": {"type": "commit", "sha": sha, "url": self._url(repo, f"commits/{sha}")},
            },
        )

    def _tree(self, repo: str, bare: Path, ish: str, query: dict[str, str]) -> httpx.Response:
        done = _git(bare, "rev-parse", "--verify", "--quiet", f"{ish}^{{tree}}")
        if done.returncode != 0:
            return self._error(404, "Not Found")
        tree = done.stdout.strip()
        recursive = ["-r", "-t"] if query.get("recursive") not in (None, "", "0", "false") else []
        listing = _git(bare, "ls-tree", "-l", *recursive, tree).stdout
        entries = []
        for line in listing.splitlines():
            meta, _, path = line.partition("\t")
            mode, kind, sha, size = meta.split()
            entry: dict[str, Any] = {"path": path, "mode": mode, "type": kind, "sha": sha}
            if kind == "blob":
                entry["size"] = int(size)
            entry["url"] = self._url(repo, f"{kind}s/{sha}")
            entries.append(entry)
        body = {"sha": tree, "url": self._url(repo, f"trees/{tree}"), "tree": entries}
        return self._json(200, {**body, "truncated": False})

    def _content(self, repo: str, bare: Path, path: str, ref: str | None) -> httpx.Response:
        done = _git(bare, "rev-parse", "--verify", "--quiet", f"{ref or 'HEAD'}:{path}")
        kind = _git(bare, "cat-file", "-t", done.stdout.strip()) if done.returncode == 0 else None
        if kind is None or kind.stdout.strip() != "blob":
            return self._json(404, {"message": "Not Found", "documentation_url": _NO_CONTENT})
        sha = done.stdout.strip()
        raw: bytes = _git(bare, "cat-file", "blob", sha, text=False).stdout
        url = f"{self.base_url}/repos/{repo}/contents/{path}"
        html = f"https://github.com/{repo}/blob/main/{path}"
        return self._json(
            200,
            {
                "type": "file",
                "encoding": "base64",
                "size": len(raw),
                "name": path.rsplit("/", 1)[-1],
                "path": path,
                "content": base64.encodebytes(raw).decode(),
                "sha": sha,
                "url": url,
                "git_url": self._url(repo, f"blobs/{sha}"),
                "html_url": html,
                "download_url": f"https://raw.githubusercontent.com/{repo}/main/{path}",
                "_links": {"git": self._url(repo, f"blobs/{sha}"), "self": url, "html": html},
            },
        )

    def _blob(self, repo: str, bare: Path, sha: str) -> httpx.Response:
        done = _git(bare, "cat-file", "blob", sha, text=False)
        if done.returncode != 0:
            return self._error(404, "Not Found")
        raw: bytes = done.stdout
        return self._json(
            200,
            {
                "sha": sha,
                "node_id": "B_" + sha[:16],
                "size": len(raw),
                "url": self._url(repo, f"blobs/{sha}"),
                "content": base64.encodebytes(raw).decode(),  # in lines, as GitHub sends it
                "encoding": "base64",
            },
        )


# -- what the Action writes --------------------------------------------------------------------


def state_repo(path: Path) -> Path:
    """An empty bare repository a CI run's `origin` can push `pair-state` to."""
    return init_bare(path)


def push_run_state(work: Path, bare: Path, run_id: str = "run-1") -> str:
    """Push the run-state files under the git work tree `work` onto `pair-state` of `bare` the
    way a CI run does (`action.statebranch.StateBranch`: lock, push, release); the new tip."""
    remotes = git(work, "remote").split()
    git(work, "remote", "set-url" if "origin" in remotes else "add", "origin", str(bare))
    branch = StateBranch(work, clock=lambda: datetime.now(UTC), host_id="test-runner")
    lease = branch.try_lock(run_id)
    assert lease is not None, "the state branch is locked"
    batches = work / ".pair" / "batches"
    cards = sorted(p.name for p in batches.glob("card-*") if p.is_dir())
    branch.push(work, f"pairbot: run {run_id} (test)", lease, card_batches=cards)
    assert branch.release(lease)
    return git(bare, "rev-parse", "refs/heads/pair-state").strip()


def push_default_file(bare: Path, work: Path, path: str, text: str) -> str:
    """Commit `text` as `path` onto the default branch (`main`) of `bare` from the work tree
    `work` (cloned on first use): a maintainer's push. The new tip."""
    if not work.exists():
        work.mkdir(parents=True)
        git(work, "init", "-q", "-b", "main")
        git(work, "remote", "add", "origin", str(bare))
    (work / path).parent.mkdir(parents=True, exist_ok=True)
    (work / path).write_text(text)
    git(work, "add", path)
    git(work, "commit", "-q", "-m", f"edit {path}")
    git(work, "push", "-q", "origin", "HEAD:refs/heads/main")
    return git(work, "rev-parse", "HEAD")


def files_repo(path: Path, files: dict[str, bytes]) -> Path:
    """A git work tree holding `files` (run-state written by hand: a damaged branch)."""
    init_repo(path, {"README.md": "# project\n"})
    for name, data in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(data)
    return path


def run_real_cards(tmp: Path, count: int = 2) -> CardProject:
    """A project whose first `count` cards each went through the real cycle on the local
    forge (`/pair implement` with the scripted agent, until it stops on its own)."""
    project = CardProject.create(tmp)
    project.command("implement")
    project.until_quiet()
    for index in range(1, count):
        number = project.forge.seed_card(f"Card {index + 1}", "AC-1: it works\n", author=MAINTAINER)
        other = dataclasses.replace(project, card=number)
        other.command("implement")
        # Not `until_quiet`: its invariants read the project's first pull request only.
        for _ in range(20):
            if other.step().result.state in ("nothing-ready", "blocked", "awaiting-approval"):
                break
        else:
            raise AssertionError(f"card #{number} did not come to rest in 20 steps")
    return project
