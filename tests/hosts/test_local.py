"""The local forge: the whole host contract, plus what only a directory-and-git forge can show.

Everything is real: a bare git repository in `tmp_path`, JSON files, `flock`, and separate
processes for the concurrency test.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hosts.base import Host
from hosts.decisions import holds_scope_decision, scope_decision_in
from hosts.errors import Conflict, HostUnavailable, NotFound
from hosts.labels import PrState
from hosts.local import (
    DEFAULT_HUMAN,
    LocalForge,
    LocalHost,
)
from hosts.local.store import Store, _CommentRec
from hosts.markers import make_marker
from hosts.models import Author, Comment, Target, Upserted
from tests.hosts.contract import *  # noqa: F403 - collects the contract's tests for `local`
from tests.hosts.contract import ContractHarness
from tests.hosts.harness import CommentWrite, ReportedState
from tests.support.git import git

ROOT = Path(__file__).resolve().parents[2]
PAIRBOT = Author(login="pairbot", id="local:pairbot", is_bot=True)
HUMAN = Author(login="maintainer", id="local:maintainer")
OTHER_BOT = Author(login="dependabot", id="local:dependabot", is_bot=True)


class FailingStore(Store):
    """The forge's disk, with the next comment write failing as a server error does."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.faults: list[tuple[int, CommentWrite, bool]] = []  # (number, write, landed)

    def _fail(self, number: int, write: CommentWrite, effect: Callable[[], object]) -> None:
        fault = next((f for f in self.faults if f[:2] == (number, write)), None)
        if fault is None:
            effect()
            return
        self.faults.remove(fault)
        if fault[2]:
            effect()
        raise HostUnavailable(f"local forge: the {write} of a comment on #{number} failed")

    def add_comment(self, number: int, author: Author, body: str) -> _CommentRec:
        added: list[_CommentRec] = []
        self._fail(
            number,
            "create",
            lambda: added.append(super(FailingStore, self).add_comment(number, author, body)),
        )
        return added[0]

    def edit_comment(self, number: int, comment_id: str, body: str) -> None:
        self._fail(
            number, "edit", lambda: super(FailingStore, self).edit_comment(number, comment_id, body)
        )


@dataclass
class LocalHarness:
    """`ContractHarness` over a forge directory; the outside world acts through `LocalForge`."""

    forge: LocalForge
    host: LocalHost
    identity: Author = PAIRBOT
    human: Author = HUMAN
    bot: Author = OTHER_BOT
    instances: list[LocalHost] = field(default_factory=list)

    def restart(self) -> Host:
        host = self.forge.host(self.identity)
        self.instances.append(host)
        return host

    async def seed_card(
        self, title: str, body: str, labels: tuple[str, ...] = (), assignees: tuple[str, ...] = ()
    ) -> int:
        return self.forge.seed_card(title, body, labels, assignees, author=self.human)

    async def seed_pull(self, head_branch: str, base_branch: str = "main") -> int:
        return self.forge.seed_pull(head_branch, base_branch, author=self.human)

    async def head_of(self, pull: int) -> str:
        return self.forge.head_of(pull)

    async def move_head(self, pull: int) -> str:
        return self.forge.move_head(pull, author=self.human)

    async def comment_as(self, author: Author, target: Target, body: str) -> str:
        return self.forge.comment_as(author, target, body)

    async def report_check(
        self, pull: int, sha: str, name: str, state: ReportedState, summary: str = ""
    ) -> None:
        self.forge.set_check(sha, name, state, summary=summary)

    def fail_comment_write(self, target: Target, write: CommentWrite, *, landed: bool) -> None:
        assert isinstance(self.host._store, FailingStore)
        self.host._store.faults.append((target.number, write, landed))

    def writes(self) -> int:
        return sum(h.write_count for h in [self.host, *self.instances])


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[ContractHarness]:
    forge = LocalForge(tmp_path / "forge")
    forge.grant(HUMAN.login, "write")
    host = LocalHost(forge.root, identity=PAIRBOT, store=FailingStore(forge.root))
    yield LocalHarness(forge=forge, host=host)


@pytest.fixture
def forge(tmp_path: Path) -> LocalForge:
    return LocalForge(tmp_path / "forge")


def checkout(forge: LocalForge, where: Path) -> Path:
    """A developer's clone of the forge's repository (main seeded first)."""
    if forge.branch_sha("main") is None:
        forge.commit("main", {"README.md": "hello\n"}, "initial")
    git(where.parent, "clone", "--quiet", str(forge.repo), where.name)
    return where


def commit_file(repo: Path, name: str, text: str) -> str:
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "--quiet", "-m", f"edit {name}")
    return git(repo, "rev-parse", "HEAD")


# -- git: push, open, merge -----------------------------------------------------------------------


def test_push_branch_returns_the_pushed_sha(forge: LocalForge, tmp_path: Path) -> None:
    host = forge.host(PAIRBOT)
    repo = checkout(forge, tmp_path / "work")
    git(repo, "switch", "--quiet", "-c", "pair/7")
    local = commit_file(repo, "feature.txt", "one\n")

    pushed = asyncio.run(host.push_branch(repo, "pair/7"))
    assert pushed == local == forge.branch_sha("pair/7")
    assert host.write_count == 1
    assert asyncio.run(host.push_branch(repo, "pair/7")) == local
    assert host.write_count == 1, "pushing what is already there is not a write"

    newer = commit_file(repo, "feature.txt", "two\n")
    assert asyncio.run(host.push_branch(repo, "pair/7")) == newer == forge.branch_sha("pair/7")


def test_push_branch_refuses_a_diverged_branch_unless_forced(
    forge: LocalForge, tmp_path: Path
) -> None:
    host = forge.host(PAIRBOT)
    repo = checkout(forge, tmp_path / "work")
    git(repo, "switch", "--quiet", "-c", "pair/8")
    commit_file(repo, "a.txt", "a\n")
    asyncio.run(host.push_branch(repo, "pair/8"))
    forge.commit("pair/8", {"b.txt": "someone else\n"}, "meanwhile")
    mine = commit_file(repo, "a.txt", "mine\n")

    with pytest.raises(Conflict):
        asyncio.run(host.push_branch(repo, "pair/8"))
    assert asyncio.run(host.push_branch(repo, "pair/8", force=True)) == mine


def test_push_branch_of_a_missing_or_invalid_branch(forge: LocalForge, tmp_path: Path) -> None:
    host = forge.host(PAIRBOT)
    repo = checkout(forge, tmp_path / "work")
    with pytest.raises(NotFound):
        asyncio.run(host.push_branch(repo, "no-such-branch"))
    for bad in ("", "--force", "refs/heads/main", "a..b", "with space"):
        with pytest.raises(NotFound):
            asyncio.run(host.push_branch(repo, bad))


def test_open_pull_on_a_pushed_branch(forge: LocalForge, tmp_path: Path) -> None:
    host = forge.host(PAIRBOT)
    repo = checkout(forge, tmp_path / "work")
    git(repo, "switch", "--quiet", "-c", "pair/9")
    sha = commit_file(repo, "x.txt", "x\n")
    asyncio.run(host.push_branch(repo, "pair/9"))

    first = asyncio.run(host.open_pull("pair/9", "main", "Card 9", "Closes #9"))
    assert (first.head_sha, first.draft, first.state, first.mergeable) == (sha, True, "open", True)
    writes = host.write_count
    second = asyncio.run(host.open_pull("pair/9", "main", "Another title", "Another body"))
    assert second.number == first.number
    assert second.title == "Card 9"
    assert host.write_count == writes

    with pytest.raises(NotFound):
        asyncio.run(host.open_pull("pair/none", "main", "t", "b"))
    with pytest.raises(NotFound):
        asyncio.run(host.open_pull("pair/9", "no-base", "t", "b"))
    with pytest.raises(Conflict):
        asyncio.run(host.open_pull("main", "main", "t", "b"))


def test_a_pull_can_be_reopened_after_close(forge: LocalForge) -> None:
    host = forge.host(PAIRBOT)
    number = forge.seed_pull("pair/10")
    asyncio.run(host.close(Target("pull", number)))
    asyncio.run(host.close(Target("pull", number)))  # closing a closed pull is no write
    assert host.write_count == 1
    again = asyncio.run(host.open_pull("pair/10", "main", "t", "b"))
    assert again.number != number


def parents(forge: LocalForge, sha: str) -> list[str]:
    return git(forge.repo, "rev-list", "--parents", "-n", "1", sha).split()[1:]


def tree(forge: LocalForge, rev: str) -> str:
    return git(forge.repo, "rev-parse", f"{rev}^{{tree}}")


def test_merge_makes_a_two_parent_commit_of_the_pinned_head(forge: LocalForge) -> None:
    host = forge.host(PAIRBOT)
    number = forge.seed_pull("pair/11", draft=True)
    base = forge.branch_sha("main")
    head = forge.head_of(number)
    result = asyncio.run(host.merge(number, head, "merge"))
    assert result.sha == forge.branch_sha("main")
    assert parents(forge, str(result.sha)) == [base, head]
    pull = asyncio.run(host.get_pull(number))
    assert (pull.state, pull.head_sha, pull.draft, pull.mergeable) == ("merged", head, False, None)
    # A later push to the merged branch does not change what the pull says it merged.
    forge.commit("pair/11", {"late.txt": "late\n"}, "late")
    assert asyncio.run(host.get_pull(number)).head_sha == head


def test_squash_makes_one_commit_with_the_heads_tree(forge: LocalForge) -> None:
    host = forge.host(PAIRBOT)
    number = forge.seed_pull("pair/12")
    forge.move_head(number)
    base = forge.branch_sha("main")
    head = forge.head_of(number)
    result = asyncio.run(host.merge(number, head, "squash"))
    assert parents(forge, str(result.sha)) == [base]
    assert tree(forge, str(result.sha)) == tree(forge, head)
    message = git(forge.repo, "log", "-1", "--format=%s", str(result.sha))
    assert message == f"Merge pair/12 (#{number})"


def test_rebase_replays_the_commits_onto_a_moved_base(forge: LocalForge) -> None:
    host = forge.host(PAIRBOT)
    number = forge.seed_pull("pair/13")
    forge.move_head(number)
    forge.commit("main", {"other.txt": "meanwhile on main\n"}, "main moved")
    base = forge.branch_sha("main")
    result = asyncio.run(host.merge(number, forge.head_of(number), "rebase"))
    commits = git(forge.repo, "rev-list", f"{base}..{result.sha}").split()
    assert len(commits) == 2
    assert all(len(parents(forge, c)) == 1 for c in commits)
    listing = git(forge.repo, "ls-tree", "-r", "--name-only", str(result.sha)).split()
    assert {"other.txt", "pair/13.txt", f"moved-{number}.txt"} <= set(listing)
    assert git(forge.repo, "worktree", "list").count("\n") == 0, "the worktree is cleaned up"


@pytest.mark.parametrize("method", ["merge", "squash", "rebase"])
def test_a_conflicting_pull_does_not_merge(forge: LocalForge, method: str) -> None:
    host = forge.host(PAIRBOT)
    forge.commit("main", {"shared.txt": "base\n"}, "initial")
    forge.commit("pair/14", {"shared.txt": "theirs\n"}, "theirs", start="main")
    number = forge.seed_pull("pair/14")
    forge.commit("main", {"shared.txt": "ours\n"}, "ours")
    base = forge.branch_sha("main")
    assert asyncio.run(host.get_pull(number)).mergeable is False
    with pytest.raises(Conflict):
        asyncio.run(host.merge(number, forge.head_of(number), method))  # type: ignore[arg-type]
    assert forge.branch_sha("main") == base
    assert asyncio.run(host.get_pull(number)).state == "open"


def test_merge_rejects_an_unknown_method(forge: LocalForge) -> None:
    number = forge.seed_pull("pair/15")
    with pytest.raises(ValueError, match="merge method"):
        asyncio.run(forge.host().merge(number, forge.head_of(number), "octopus"))  # type: ignore[arg-type]


def test_a_merged_pull_cannot_be_closed(forge: LocalForge) -> None:
    host = forge.host(PAIRBOT)
    number = forge.seed_pull("pair/16")
    asyncio.run(host.merge(number, forge.head_of(number), "merge"))
    with pytest.raises(Conflict):
        asyncio.run(host.close(Target("pull", number)))


# -- statuses, labels, reactions, permissions -----------------------------------------------------


def test_review_status_resets_are_free_and_need_a_real_commit(forge: LocalForge) -> None:
    host = forge.host(PAIRBOT)
    number = forge.seed_pull("pair/17")
    head = forge.head_of(number)
    asyncio.run(host.set_review_status(number, head, "success", "ok"))
    asyncio.run(host.set_review_status(number, head, "success", "ok"))
    assert host.write_count == 1
    asyncio.run(host.set_review_status(number, head, "failure", "r1-1 open"))
    assert host.write_count == 2
    short = asyncio.run(host.get_review_status(number, head[:12]))
    assert short is not None
    assert (short.head_sha, short.state) == (head, "failure")
    with pytest.raises(NotFound):
        asyncio.run(host.set_review_status(number, "f" * 40, "success", "ok"))
    with pytest.raises(NotFound):
        asyncio.run(host.set_review_status(number, "--all", "success", "ok"))
    assert asyncio.run(host.get_review_status(number, "f" * 40)) is None
    with pytest.raises(ValueError, match="review state"):
        asyncio.run(host.set_review_status(number, head, "great", "ok"))  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        asyncio.run(host.get_review_status(UNKNOWN_NUMBER, head))


UNKNOWN_NUMBER = 424_242


def test_state_labels_are_compared_without_case(forge: LocalForge) -> None:
    host = forge.host(PAIRBOT)
    number = forge.seed_card("c", "b", labels=("PR-State:Merged", "pr-state:ready", "Bug"))
    assert asyncio.run(host.set_state_label(Target("card", number), PrState.MERGED)) is True
    assert asyncio.run(host.get_card(number)).labels == ("PR-State:Merged", "Bug")
    assert asyncio.run(host.set_state_label(Target("card", number), PrState.MERGED)) is False


def test_a_target_of_the_wrong_kind_is_not_found(forge: LocalForge) -> None:
    host = forge.host(PAIRBOT)
    card = forge.seed_card("c", "b")
    pull = forge.seed_pull("pair/18")
    with pytest.raises(NotFound):
        asyncio.run(host.list_comments(Target("pull", card)))
    with pytest.raises(NotFound):
        asyncio.run(host.get_card(pull))
    with pytest.raises(NotFound):
        forge.comment_as(HUMAN, Target("card", pull), "x")


def test_reactions_are_recorded_once(forge: LocalForge) -> None:
    host = forge.host(PAIRBOT)
    card = forge.seed_card("c", "b")
    target = Target("card", card)
    comment = forge.comment_as(HUMAN, target, "/pair status")
    asyncio.run(host.react(target, comment, "eyes"))
    asyncio.run(host.react(target, comment, "eyes"))
    asyncio.run(host.react(target, None, "+1"))
    assert forge.reactions(card) == [(comment, "eyes", "pairbot"), (None, "+1", "pairbot")]
    assert host.write_count == 2
    with pytest.raises(NotFound):
        asyncio.run(host.react(target, "999", "eyes"))
    with pytest.raises(ValueError, match="reaction"):
        asyncio.run(host.react(target, comment, "heart"))  # type: ignore[arg-type]


def test_permissions_come_from_collaborators_json(forge: LocalForge) -> None:
    host = forge.host(PAIRBOT)
    assert asyncio.run(host.permission("anyone")) == "none"
    forge.grant("Alice", "maintain")
    forge.grant("bob", "read")
    assert asyncio.run(host.permission("alice")) == "maintain"
    assert asyncio.run(host.permission("bob")) == "read"
    forge.grant("bob", "none")
    assert asyncio.run(host.permission("bob")) == "none"
    (forge.root / "collaborators.json").write_text(json.dumps({"eve": "owner"}))
    with pytest.raises(HostUnavailable, match="unknown permission"):
        asyncio.run(host.permission("eve"))
    with pytest.raises(ValueError, match="permission level"):
        forge.grant("eve", "owner")  # type: ignore[arg-type]


# -- comments, cards and the files ----------------------------------------------------------------


def test_scope_decision_reference_must_exist(forge: LocalForge) -> None:
    host = forge.host(PAIRBOT)
    pull = forge.seed_pull("pair/19")
    with pytest.raises(NotFound):
        asyncio.run(host.read_scope_decision(pull, "12345"))
    with pytest.raises(NotFound):
        asyncio.run(host.read_scope_decision(pull, ""))
    plain = forge.comment_as(HUMAN, Target("pull", pull), "no json here")
    found = asyncio.run(host.read_scope_decision(pull, plain))
    assert found is not None
    assert found.id == plain  # by reference, the comment is returned whatever it holds
    forge.comment_as(HUMAN, Target("pull", pull), '```json\n{"other": 1}\n```')
    assert asyncio.run(host.read_scope_decision(pull)) is None
    broken = forge.comment_as(HUMAN, Target("pull", pull), '```json\n{"schemaVersion": 1,\n```')
    found = asyncio.run(host.read_scope_decision(pull))
    assert found is not None
    assert found.id == broken, "malformed JSON is app/domain's to refuse, not ours to hide"


def test_edits_that_change_nothing_write_nothing(forge: LocalForge) -> None:
    host = forge.host(PAIRBOT)
    card = asyncio.run(host.create_card("t", "b", ("x", "x")))
    assert card.labels == ("x",)
    assert host.write_count == 1
    asyncio.run(host.update_card(card.number, title="t", body="b"))
    asyncio.run(host.update_card(card.number))
    asyncio.run(host.close(Target("card", card.number)))
    asyncio.run(host.close(Target("card", card.number)))
    assert host.write_count == 2


def test_upsert_read_back_mismatch_is_host_unavailable(forge: LocalForge) -> None:
    class LossyStore(Store):
        """A forge whose disk keeps something other than what was written."""

        def write(self, rel: str, data: object) -> None:
            if rel.startswith("comments/") and isinstance(data, list):
                data = [dict(c, body="garbled") for c in data]
            super().write(rel, data)

    host = LocalHost(forge.root, identity=PAIRBOT, store=LossyStore(forge.root))
    card = forge.seed_card("c", "b")
    with pytest.raises(HostUnavailable, match="read back"):
        asyncio.run(host.upsert_comment(Target("card", card), make_marker("x", card), "body"))


def test_the_forge_is_plain_json_and_leaves_no_temp_files(forge: LocalForge) -> None:
    host = forge.host(PAIRBOT)
    card = forge.seed_card("Card", "Body", labels=("bug",))
    asyncio.run(host.upsert_comment(Target("card", card), make_marker("s", card), "hi"))
    saved = json.loads((forge.root / "cards" / f"{card}.json").read_text())
    assert (saved["title"], saved["labels"]) == ("Card", ["bug"])
    assert saved["author"]["login"] == "maintainer"
    comments = json.loads((forge.root / "comments" / f"{card}.json").read_text())
    assert comments[0]["author"]["login"] == "pairbot"
    assert not list(forge.root.rglob(".*.tmp"))
    assert (forge.repo / "HEAD").is_file()


def test_a_corrupt_document_is_host_unavailable(forge: LocalForge) -> None:
    card = forge.seed_card("c", "b")
    (forge.root / "cards" / f"{card}.json").write_text("{not json")
    with pytest.raises(HostUnavailable, match="not valid JSON"):
        asyncio.run(forge.host().get_card(card))


def test_the_default_identities(forge: LocalForge) -> None:
    assert asyncio.run(forge.host().identity()).login == "pairbot"
    card = forge.seed_card("c", "b")
    comment = forge.comment_as(DEFAULT_HUMAN, Target("card", card), "hi")
    forge.edit_comment(Target("card", card), comment, "edited")
    listed = asyncio.run(forge.host().list_comments(Target("card", card)))
    assert [(c.body, c.author.login) for c in listed] == [("edited", "maintainer")]
    with pytest.raises(NotFound):
        forge.edit_comment(Target("card", card), "999", "x")
    forge.set_labels(Target("card", card), ("a", "b"))
    assert asyncio.run(forge.host().get_card(card)).labels == ("a", "b")
    with pytest.raises(ValueError, match="branch name"):
        forge.commit("bad name", {"f": "x"}, "m")


# -- concurrency ----------------------------------------------------------------------------------

UPSERTER = """
import asyncio, sys
from pathlib import Path
from hosts.local import LocalHost
from hosts.markers import make_marker
from hosts.models import Author, Target

async def main(root: str, who: str, card: int, rounds: int) -> None:
    host = LocalHost(Path(root), identity=Author("pairbot", "local:pairbot", True))
    target = Target("card", card)
    for i in range(rounds):
        await host.upsert_comment(target, make_marker("shared", card), f"{who} round {i}")
        await host.upsert_comment(target, make_marker("own", card, run=f"{who}-{i}"), who)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
"""


def test_concurrent_upserts_from_processes_never_lose_or_duplicate(forge: LocalForge) -> None:
    card = forge.seed_card("Busy", "body")
    rounds, workers = 15, 3
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", UPSERTER, str(forge.root), f"w{n}", str(card), str(rounds)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(workers)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err

    comments = asyncio.run(forge.host().list_comments(Target("card", card)))
    shared = [c for c in comments if c.body.startswith(make_marker("shared", card))]
    own = [c for c in comments if c.body.startswith("<!-- pair:own ")]
    assert len(shared) == 1, "one marker, one comment, whatever the race"
    assert len(own) == rounds * workers, "no process lost another's comment"
    assert len({c.id for c in comments}) == len(comments) == rounds * workers + 1


def test_upsert_results_say_what_happened(forge: LocalForge) -> None:
    host = forge.host(PAIRBOT)
    card = forge.seed_card("c", "b")
    target = Target("card", card)
    marker = make_marker("synthesis", card, run="r9")
    outcomes = [
        asyncio.run(host.upsert_comment(target, marker, body)).outcome
        for body in ("a", "a", "b", "b")
    ]
    assert outcomes == [Upserted.CREATED, Upserted.UNCHANGED, Upserted.UPDATED, Upserted.UNCHANGED]
    with pytest.raises(ValueError, match="not a pair marker"):
        asyncio.run(host.upsert_comment(target, "", "x"))


def test_a_branch_moves_only_from_where_it_was(forge: LocalForge) -> None:
    first = forge.commit("main", {"a": "1"}, "one")
    second = forge.commit("main", {"a": "2"}, "two")
    with pytest.raises(Conflict, match="moved meanwhile"):
        Store(forge.root).move_branch("main", first, first)  # main is at `second` now
    assert forge.branch_sha("main") == second


@pytest.mark.parametrize(
    ("body", "holds"),
    [
        pytest.param('```json\n{"schemaVersion": 1}\n```', True, id="json-fence"),
        pytest.param('```JSON\n{"schemaVersion": 1}\n```', True, id="upper-case-tag"),
        pytest.param('```\n{"schemaVersion": 1}\n```', True, id="bare-fence"),
        pytest.param(
            'text\n  ```json\r\n{"schemaVersion": 1}\r\n  ```\n', True, id="indented-crlf"
        ),
        pytest.param('```python\n{"schemaVersion": 1}\n```', False, id="other-language"),
        pytest.param('{"schemaVersion": 1}', False, id="not-fenced"),
        pytest.param('```json\n{"decisions": []}\n```', False, id="no-schema-version"),
        pytest.param('```json\n{}\n```\n"schemaVersion"', False, id="outside-the-fence"),
    ],
)
def test_what_holds_a_scope_decision(body: str, holds: bool) -> None:
    assert holds_scope_decision(body) is holds


def test_scope_decision_discovery_skips_only_pairbots_own() -> None:
    decision = '```json\n{"schemaVersion": 1}\n```'
    comments = [
        Comment("1", decision, HUMAN, created_at="2025-01-01T00:00:01"),
        Comment("2", decision, OTHER_BOT, created_at="2025-01-01T00:00:02"),
        Comment("3", decision, PAIRBOT, created_at="2025-01-01T00:00:03"),
    ]
    assert scope_decision_in(comments, None) == comments[2]
    # Another bot's comment is returned: app/domain refuses it as `author-is-bot`, visibly.
    assert scope_decision_in(comments, None, identity=PAIRBOT) == comments[1]
    assert scope_decision_in(comments, "3", identity=PAIRBOT) == comments[2]
    assert scope_decision_in(comments[2:], None, identity=PAIRBOT) is None


def test_forge_check_reports_are_validated(tmp_path: Path) -> None:
    forge = LocalForge(tmp_path / "forge")
    pull = forge.seed_pull("pair/x")
    head = forge.head_of(pull)
    with pytest.raises(ValueError, match="'green' is not a check state; allowed: success"):
        forge.set_check(head, "build", "green")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pair-review is pairbot's own"):
        forge.set_check(head, "pair-review", "success")
    with pytest.raises(ValueError, match="does not exist on the local forge"):
        forge.set_check("0" * 40, "build", "success")
    forge.set_check(head[:12], "build", "failure", url="https://ci.example/1", required=True)
    checks = asyncio.run(forge.host().head_checks(pull, head))
    assert [(c.name, c.state, c.url, c.required) for c in checks] == [
        ("build", "failure", "https://ci.example/1", True)
    ]
    with pytest.raises(NotFound, match="does not exist on the local forge"):
        asyncio.run(forge.host().head_checks(pull, "f" * 40))
