"""A card's own git worktree on branch `pair/<card>`, made fresh for every step.

Each agent step of a card runs in a worktree of the project's repository, checked out on the
card's branch at its newest known tip: the branch on `origin` when the remote has it (on a fresh
Actions runner that is the only copy), else the local branch, else the base branch. "Fresh"
means reset hard and cleaned before the agent starts, so what one step left behind uncommitted
never leaks into the next, and a step that was refused can be undone by resetting to its start.

The worktree lives in the checkout's `.pair/worktrees/<card>`, beside the card's run-state: not
inside `.git`, where agents' edit tools refuse to write (claude's `acceptEdits` refuses every
path under `.git/`), and kept out of the checkout's `git status` by an entry in the repository's
own `info/exclude` (no tracked file changes), as are pairbot's own agent command files, so
that no commit of a card carries them (`exclude_agent_command_files`; a plain batch's work line
asks the same). git's own `worktree add` registers it, a stale
registration left by a killed process is pruned before reuse, and a worktree an older pairbot
made under `.git/pair-worktrees/` is moved here (`git worktree move`).

Git runs with a fixed identity (a fresh runner has no `user.name`) and never prompts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.domain.card.base_branch import ci_base_branch
from app.domain.review.guarded import ChangedPath, parse_name_status
from app.domain.review.seal import AGENT_COMMAND_FILES
from app.errors import OperatorError
from hosts.git import GitError, run_git

IDENTITY = ("-c", "user.name=pairbot", "-c", "user.email=pairbot@users.noreply.invalid")
_TIMEOUT_S = 300.0


class WorktreeError(OperatorError):
    """Git refused an operation on the card's worktree; the message carries git's stderr."""


@dataclass(frozen=True)
class Worktree:
    """A prepared worktree: where it is, its branch, and the commit the step starts from."""

    path: Path
    branch: str
    start: str


def git(
    cwd: Path, *args: str, check: bool = True, timeout: float = _TIMEOUT_S, strip: bool = True
) -> str:
    """Run git in `cwd` (through `hosts.git`: no inherited GIT_DIR, no prompt); stdout
    (stripped). A failure names the command and git's stderr."""
    try:
        done = run_git([*IDENTITY, *args], cwd=cwd, timeout_s=timeout, check=check)
    except GitError as error:
        said = error.stderr if error.returncode is not None else str(error)
        raise WorktreeError(f"git {' '.join(args[:3])} failed in {cwd}: {said}") from None
    return done.stdout.strip() if strip else done.stdout


def has_remote(root: Path, remote: str = "origin") -> bool:
    """Whether the repository has `remote`."""
    return remote in git(root, "remote").split()


def _event(env: Mapping[str, str]) -> Mapping[str, object] | None:
    """The GitHub Actions event payload, when this runs in a workflow (else None)."""
    path = env.get("GITHUB_EVENT_PATH", "")
    if not path:
        return None
    try:
        loaded = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def current_branch(root: Path, env: Mapping[str, str] | None = None) -> str:
    """The base for a card's PR: what the CI says (`ci_base_branch`), else the branch checked
    out in `root`, else the remote's default branch (`origin/HEAD`) — never a detached HEAD."""
    named = ci_base_branch(env or {}, _event(env or {}))
    if named is not None:
        return named
    name = git(root, "rev-parse", "--abbrev-ref", "HEAD")
    if name != "HEAD":
        return name
    remote_head = git(
        root, "symbolic-ref", "--quiet", "--short", "refs/remotes/origin/HEAD", check=False
    )
    if remote_head.startswith("origin/"):
        return remote_head.removeprefix("origin/")
    raise WorktreeError(
        f"{root} is on a detached HEAD and nothing names the base branch: set baseBranch in "
        "the batch, BUILD_SOURCEBRANCH (Azure Pipelines sets it), or check out a branch"
    )


def _resolve(root: Path, ref: str) -> str | None:
    out = git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    return out or None


def branch_tip(root: Path, branch: str, base: str, remote: str = "origin") -> str:
    """The commit a step of `branch` starts from: the remote's branch, the local one, or the
    base — the remote's base when it can be fetched, else the newest local ref of it.

    `remote` is a remote's name or a repository path (the local forge's bare repository); it
    is fetched into a private ref, so the user's remote-tracking refs are left alone.
    """
    named = not ("/" in remote or remote.startswith("."))
    reachable = not named or has_remote(root, remote)
    if reachable:
        tip = _fetch(root, remote, branch, f"refs/pairbot/tips/{branch}")
        if tip is not None:
            return tip
    local = _resolve(root, f"refs/heads/{branch}")
    if local is not None:
        return local
    # A new card starts from the remote's base as it is now: a long-lived checkout (the App's
    # worker) would otherwise branch from whatever its remote-tracking ref last saw.
    if reachable:
        fresh = _fetch(root, remote, base, f"refs/pairbot/bases/{base}")
        if fresh is not None:
            return fresh
    for ref in (f"refs/remotes/{remote}/{base}", f"refs/heads/{base}", base):
        found = _resolve(root, ref)
        if found is not None:
            return found
    raise WorktreeError(f"base branch {base!r} does not exist in {root}")


def _fetch(root: Path, remote: str, branch: str, private: str) -> str | None:
    """`branch` of `remote` fetched into the private ref `private`; its commit, or None when
    the remote cannot be reached or has no such branch (the caller falls back)."""
    try:
        fetched = run_git(
            # `--refmap=`: without it git also moves `origin/<branch>` (its "opportunistic"
            # update), and the user's remote-tracking refs are theirs.
            [
                "fetch",
                "--quiet",
                "--no-tags",
                "--refmap=",
                remote,
                f"+refs/heads/{branch}:{private}",
            ],
            cwd=root,
            timeout_s=_TIMEOUT_S,
            check=False,
        )
    except GitError as error:  # hung or missing git: not a remote to fall back from
        raise WorktreeError(f"{error} (in {root})") from None
    return _resolve(root, private) if fetched.ok else None


WORKTREES = ".pair/worktrees"  # relative to the checkout; app/runtime/lending.py keeps it
_EXCLUDE = f"/{WORKTREES}/"
COMMAND_FILE_EXCLUDES = tuple(f"/{pattern}" for pattern in AGENT_COMMAND_FILES)


def worktree_path(root: Path, card_key: str) -> Path:
    """`<checkout>/.pair/worktrees/<card>`."""
    return root / WORKTREES / card_key


def _common_dir(root: Path) -> Path:
    common = Path(git(root, "rev-parse", "--git-common-dir"))
    return common if common.is_absolute() else (root / common).resolve()


def _exclude(common: Path, lines: Sequence[str]) -> None:
    """`lines` in the repository's own `info/exclude` (never tracked, read by every worktree
    of it), each once."""
    exclude = common / "info" / "exclude"
    text = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
    present = set(text.splitlines())
    missing = [line for line in lines if line not in present]
    if missing:
        exclude.parent.mkdir(parents=True, exist_ok=True)
        separator = "" if not text or text.endswith("\n") else "\n"
        added = "".join(f"{line}\n" for line in missing)
        exclude.write_text(f"{text}{separator}{added}", encoding="utf-8")


def exclude_agent_command_files(root: Path) -> None:
    """pairbot's own command files (`AGENT_COMMAND_FILES`: what the runtime renders into the
    tree before an agent's step, for a person driving that agent by hand) are ignored by the
    repository of `root`, so no commit pairbot makes — a card's, a work line's — carries them
    into a pull request. A project that tracks them keeps them: an exclude leaves a tracked
    file alone, and pairbot never rewrites one that exists."""
    _exclude(_common_dir(root), COMMAND_FILE_EXCLUDES)


def prepare(root: Path, card_key: str, branch: str, base: str, remote: str = "origin") -> Worktree:
    """A clean worktree of `branch` at its newest tip; created (or re-created) as needed."""
    tip = branch_tip(root, branch, base, remote)
    path = worktree_path(root, card_key)
    common = _common_dir(root)
    _exclude(common, (_EXCLUDE, *COMMAND_FILE_EXCLUDES))
    if not (path / ".git").exists():
        # A killed run may leave a registration without its directory: prune it first.
        git(root, "worktree", "prune")
        path.parent.mkdir(parents=True, exist_ok=True)
        older = common / "pair-worktrees" / card_key  # where pairbot put them before
        if (older / ".git").exists():
            git(root, "worktree", "move", str(older), str(path))
        else:
            git(root, "worktree", "add", "--force", "--detach", str(path), tip)
    # A forced checkout resets the branch, the index and the tracked files to `tip` and ends a
    # merge or cherry-pick a step left in progress, as `reset --hard` would (no second pass);
    # `clean` removes what is untracked or ignored (tests/cycle/test_worktree_fresh.py).
    git(path, "checkout", "--quiet", "--force", "-B", branch, tip)
    git(path, "clean", "--quiet", "-ffdx")
    return Worktree(path=path, branch=branch, start=tip)


def head(path: Path) -> str:
    """The worktree's HEAD commit."""
    return git(path, "rev-parse", "HEAD")


def commit_all(path: Path, message: str, exclude: Sequence[str] = ()) -> str:
    """Commit everything the step changed (but `exclude`); returns HEAD (unchanged if clean)."""
    # Add, then put `exclude` back as HEAD has it: an `:(exclude)` pathspec naming an ignored
    # directory makes `git add` fail ("paths are ignored").
    git(path, "add", "--all", "--", ".")
    if exclude:
        git(path, "reset", "-q", "HEAD", "--", *exclude)
    if git(path, "diff", "--cached", "--name-only"):
        git(path, "commit", "--quiet", "--no-verify", "-m", message)
    return head(path)


def changed_paths(path: Path, start: str, end: str = "HEAD") -> list[ChangedPath]:
    """Every path added, modified, deleted, renamed or copied between two commits.

    `-z` keeps unusual file names exactly as they are (no C-quoting to undo).
    """
    out = git(path, "diff", "--name-status", "-z", "-M", start, end, strip=False)
    return parse_name_status(out)


def reset(path: Path, commit: str) -> None:
    """Throw away everything after `commit` (a refused step)."""
    git(path, "reset", "--quiet", "--hard", commit)
    git(path, "clean", "--quiet", "-ffdx")
