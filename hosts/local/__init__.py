"""The local forge: a code host and PM tool kept in one directory, and its `Host` adapter.

    store.py   Store: the directory, its lock, its JSON documents and its bare repository
    host.py    LocalHost: the `Host` operations (what pairbot does)
    forge.py   LocalForge: forge administration (what the world around pairbot does)


It is the reference implementation of `hosts.base.Host`, pairbot's embedded default (try pairbot
with no account) and the fast target of end-to-end tests. Its layout:

    <root>/
      repo.git/             bare git repository: every branch
      forge.lock            flock'ed around every read-modify-write
      counters.json         {"number": n, "comment": n}; cards and pulls share one number space,
                            as issues and pull requests do on GitHub
      cards/<n>.json        title, body, labels, assignees, state, author
      pulls/<n>.json        head and base branch, head SHA (live from repo.git while open),
                            state, draft, labels, merge commit
      comments/<n>.json     the comments on card or pull <n>, oldest first
      statuses/<n>.json     {"<head sha>": {state, description, context}} for pull <n>
      reactions/<n>.json    reactions on card or pull <n> and on its comments
      collaborators.json    {"<login>": "<permission>"}; a login not listed has "none"
      locks/<n>.lock        flock'ed for a whole publication (an upsert, a label change) on <n>

Every document is written whole to a temp file in its directory and `os.replace`d, so a reader
never sees half a file; every read-modify-write holds an exclusive `fcntl.flock` on `forge.lock`,
so two processes (two pairbot ticks, a test and pairbot) never lose each other's update; a
publication (several such steps: read, write, read back) also holds its target's lock file, so
two processes never post one marker twice. That lock
waits rather than skips (unlike the engine's step lock, which skips): it stands in for the
server a real forge serialises requests on, and holds for milliseconds.

Two classes, on purpose apart:

    LocalHost    the `Host` operations — what pairbot does. Protocol methods are `async` but do
                 their file and git work synchronously: each is milliseconds of local I/O.
    LocalForge   forge administration — what the world around pairbot does: a human opens a card,
                 comments, pushes to a pull's branch, grants access. Tests and end-to-end scenarios
                 use it; pairbot never does.

Merging happens in the bare repository without a checkout: `merge` is a real two-parent merge
commit and `squash` one commit on the base, both built with `git merge-tree --write-tree` (git
2.38+); `rebase` replays the pull's commits onto the base in a temporary worktree. The base
branch moves with a compare-and-swap `update-ref`, and the commit merged is the pinned `head_sha`,
never whatever the branch points at by then.
"""

from hosts.local.forge import LocalForge
from hosts.local.host import LocalHost
from hosts.local.store import DEFAULT_HUMAN, DEFAULT_IDENTITY

__all__ = [
    "DEFAULT_HUMAN",
    "DEFAULT_IDENTITY",
    "LocalForge",
    "LocalHost",
]
