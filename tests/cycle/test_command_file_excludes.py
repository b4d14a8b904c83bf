"""pairbot's own agent command files stay out of the commits it makes (app/cycle/worktree.py).

The runtime renders `/pair:<step>` command files into the tree before each agent step, for a
person driving that agent by hand (app/runtime/commands.py). Untracked, they must never reach a
card's branch or a plain batch's work line, hence a pull request; a project that tracks them
keeps them. Real git repositories in temp dirs.
"""

from __future__ import annotations

from pathlib import Path

from app.cycle import worktree as wt
from app.domain.review.seal import AGENT_COMMAND_FILES
from app.runtime.commands import STYLES
from tests.support.git import git, init_repo

# Where the runtime renders each style's `apply` command, relative to the tree.
RENDERED = tuple(
    style.path(Path("/tree"), "apply", {}).relative_to("/tree").as_posix()
    for style in STYLES.values()
)


def write(root: Path, relative: str, text: str = "rendered\n") -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_every_rendered_style_is_excluded_and_work_beside_it_is_not(tmp_path: Path) -> None:
    assert len(RENDERED) == len(AGENT_COMMAND_FILES)  # one path per style the runtime renders
    root = tmp_path / "repo"
    init_repo(root, {"README.md": "# project\n"})
    for relative in RENDERED:
        write(root, relative)
    write(root, "src/widget.py", "print('hello')\n")
    write(root, ".claude/commands/mine.md", "a maintainer's own command\n")
    wt.exclude_agent_command_files(root)
    wt.exclude_agent_command_files(root)  # twice: each line once
    end = wt.commit_all(root, "a step")
    committed = git(root, "show", "--name-only", "--format=", end).split()
    assert sorted(committed) == [".claude/commands/mine.md", "src/widget.py"]
    exclude = Path(git(root, "rev-parse", "--git-common-dir"))
    lines = (root / exclude / "info" / "exclude").read_text().splitlines()
    assert sorted(line for line in lines if "pair" in line and "worktrees" not in line) == sorted(
        f"/{pattern}" for pattern in AGENT_COMMAND_FILES
    )


def test_a_project_that_tracks_a_command_file_keeps_it(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    init_repo(root, {"README.md": "# project\n", ".claude/commands/pair/apply.md": "ours\n"})
    wt.exclude_agent_command_files(root)
    write(root, ".claude/commands/pair/apply.md", "ours, edited\n")
    end = wt.commit_all(root, "an edit")
    assert git(root, "show", "--name-only", "--format=", end).split() == [
        ".claude/commands/pair/apply.md"
    ]


def test_a_cards_worktree_never_commits_them(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    init_repo(root, {"README.md": "# project\n"})
    tree = wt.prepare(root, "card-1", "pair/card-1", "main", remote="origin")
    write(tree.path, ".claude/commands/pair/propose.md")
    write(tree.path, "plan.md", "# plan\n")
    end = wt.commit_all(tree.path, "pair: propose")
    assert git(tree.path, "show", "--name-only", "--format=", end).split() == ["plan.md"]
