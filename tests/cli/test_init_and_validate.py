"""`pairbot init`, `pairbot card new` and `pairbot validate`'s agent checks, in-process.

`init` writes what a run here would infer (the binding from the origin remote, pytest from the
tracked files) and a config the loader accepts; `validate` says, one line each, every agent
pairbot could not start; `card new` opens a card on the PM host and prints its number.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from app.cli import run
from app.cli.init import IGNORED, Inferred, render_config
from app.engine.manifest import load_project_config
from app.errors import ConfigError, UserError
from tests.support.git import git, init_repo


def _repo(tmp_path: Path, files: dict[str, str] | None = None, origin: str | None = None) -> Path:
    root = tmp_path / "repo"
    init_repo(root, {"README.md": "# r\n", **(files or {})})
    if origin is not None:
        git(root, "remote", "add", "origin", origin)
    return root


def _init(root: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert run(["--root", str(root), "init", *extra], {}) == 0
    return capsys.readouterr().out


def test_init_on_a_github_checkout_with_pytest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo(tmp_path, {"pyproject.toml": "[project]\nname = 'r'\n"}, "git@github.com:o/r.git")
    out = _init(root, capsys)
    text = (root / ".pair" / "config.yaml").read_text()
    assert "# hosts: {pm: github, code: github}" in text
    assert "inferred from the origin remote github.com/o/r" in text
    pytest_line = 'tests: {command: "pytest -q --junitxml=.pair/junit.xml", junit: .pair/junit.xml}'
    assert pytest_line in text
    config = load_project_config(root)
    assert "hosts" not in config.model_fields_set  # inferred at each run, never pinned
    assert config.tests.command == "pytest -q --junitxml=.pair/junit.xml"
    assert "hosts: pm=github code=github" in out
    assert "tests: `pytest -q --junitxml=.pair/junit.xml` (detected)" in out
    assert (root / ".pair" / ".gitignore").read_text() == IGNORED


def test_init_suggests_other_runners_and_refuses_to_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    package = json.dumps({"scripts": {"test": "jest"}})
    root = _repo(tmp_path, {"package.json": package, "go.mod": "module r\n"})
    (root / ".pair").mkdir()
    (root / ".pair" / ".gitignore").write_text("mine\n")
    out = _init(root, capsys)
    text = (root / ".pair" / "config.yaml").read_text()
    assert "# Detected `npm test` (package.json scripts.test)" in text
    assert "# Detected `go test ./...` (go.mod)" in text
    assert load_project_config(root).tests.command is None
    assert "no command set, so no test gate applies" in out
    assert "git add .pair/config.yaml\n" in out  # the user's own .gitignore is theirs
    assert (root / ".pair" / ".gitignore").read_text() == "mine\n"
    with pytest.raises(UserError, match="already exists"):
        run(["--root", str(root), "init"], {})
    (root / ".pair" / "config.yaml").write_text("trigger: bot\n")
    _init(root, capsys, "--force")
    assert load_project_config(root).trigger == "pair"


def test_init_on_a_forge_no_adapter_serves_says_to_declare_hosts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo(tmp_path, origin="https://gitlab.com/o/r.git")
    out = _init(root, capsys)
    text = (root / ".pair" / "config.yaml").read_text()
    assert "# hosts: no binding could be inferred here: the origin remote is on gitlab.com" in text
    assert "# hosts: {pm: github, code: github}" in text
    assert "hosts: none inferred; the origin remote is on gitlab.com, which no" in out
    assert "No test runner detected" in text


def test_the_rendered_config_is_always_a_valid_config(tmp_path: Path) -> None:
    for inferred in (Inferred(None, "why"),):
        data = yaml.safe_load(render_config(inferred, ()))
        assert data is None  # everything commented out: every default


def _config(root: Path, batch: dict[str, object]) -> None:
    (root / ".pair").mkdir(exist_ok=True)
    (root / ".pair" / "config.yaml").write_text(yaml.safe_dump({"batch": batch}))


def _validate(root: Path, capsys: pytest.CaptureFixture[str], env: dict[str, str]) -> list[str]:
    code = run(["--root", str(root), "validate"], env)
    err = capsys.readouterr().err.splitlines()
    assert (code == 0) == (not err)
    return err


@pytest.mark.parametrize(
    ("batch", "expected"),
    [
        pytest.param(
            {"agent": "claud"},
            "unknown agent 'claud' (every stage); the agents that exist: claude, codex, command",
            id="unknown-agent",
        ),
        pytest.param({"agent": "command"}, "needs `agentCommand`", id="no-command"),
        pytest.param(
            {"agent": "command", "agentCommand": ["no-such-agent-binary"]},
            "agentCommand program 'no-such-agent-binary' is not on PATH",
            id="not-on-path",
        ),
        pytest.param(
            {"agent": "command", "agentCommand": ["./bin/agent"]},
            "agentCommand program './bin/agent' is not a file",
            id="no-program-file",
        ),
        pytest.param(
            {"agent": "command", "agentCommand": [sys.executable, ".pair/missing.py"]},
            "agentCommand names '.pair/missing.py', which is not a file in",
            id="no-script",
        ),
        pytest.param(
            {"agent": "command", "agentCommand": [sys.executable, ".pair/agent.py"]},
            "'.pair/agent.py', which is not committed: a card's agent runs in a worktree",
            id="uncommitted-script",
        ),
        pytest.param(
            {"agent": "command", "agentCommand": ["./.pair/agent.py", "--fast"]},
            "'./.pair/agent.py', which is not committed",
            id="uncommitted-program",
        ),
        pytest.param(
            {"agent": "command", "agentCommand": [sys.executable, "/nonexistent/agent.py"]},
            "agentCommand names '/nonexistent/agent.py', which is not a file",
            id="absolute-script",
        ),
    ],
)
def test_validate_names_each_agent_it_could_not_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], batch: dict[str, object], expected: str
) -> None:
    root = _repo(tmp_path)
    _config(root, batch)
    (root / ".pair" / "agent.py").write_text("print('hi')\n")  # present, never committed
    lines = _validate(root, capsys, {"PATH": "/usr/bin:/bin"})
    assert len(lines) == 1, lines
    assert lines[0].startswith("pairbot: .pair/config.yaml: ")
    assert expected in lines[0]


def test_validate_accepts_a_committed_agent_and_checks_each_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo(tmp_path, {".pair/agent.py": "print('hi')\n"})
    _config(root, {"agent": "command", "agentCommand": ["python3", "./.pair/agent.py"]})
    assert _validate(root, capsys, {"PATH": str(Path(sys.executable).parent) + ":/usr/bin"}) == []
    manifest = {"phases": [{"name": "p", "changes": ["a"]}], "settings": {"agent": "codx"}}
    (root / ".pair" / "batches" / "b").mkdir(parents=True)
    (root / ".pair" / "batches" / "b" / "batch.yaml").write_text(yaml.safe_dump(manifest))
    plain = {"phases": [{"name": "p", "changes": ["a"]}]}
    (root / ".pair" / "batches" / "c").mkdir(parents=True)
    (root / ".pair" / "batches" / "c" / "batch.yaml").write_text(yaml.safe_dump(plain))
    lines = _validate(root, capsys, {"PATH": str(Path(sys.executable).parent)})
    assert lines == [
        "pairbot: batch b: unknown agent 'codx' (every stage); the agents that exist: claude, "
        "codex, command, cursor, gemini, opencode",
    ]


def test_validate_leaves_a_docker_agent_to_doctor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo(tmp_path)
    _config(root, {"agent": "command", "agentCommand": ["in-image-agent"], "locus": "docker"})
    assert _validate(root, capsys, {"PATH": "/usr/bin:/bin"}) == []


def test_a_typod_host_is_refused_naming_it_and_the_adapters(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    (root / ".pair").mkdir()
    (root / ".pair" / "config.yaml").write_text("hosts: {pm: gitlab}\n")
    with pytest.raises(ConfigError) as info:
        run(["--root", str(root), "validate"], {})
    message = str(info.value)
    assert "hosts.pm" in message and "'gitlab'" in message
    assert "github, azure-devops, local" in message


def test_card_new_opens_a_card_and_refuses_an_empty_title(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _repo(tmp_path)
    (root / ".pair").mkdir()
    assert run(["--root", str(root), "card", "new", "Add it", "--json"], {}) == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == {"card": 1, "title": "Add it", "host": "local"}
    assert out.err.startswith("pairbot: hosts pm=local code=local")
    card = json.loads((root / ".pair" / "forge" / "cards" / "1.json").read_text())
    assert (card["title"], card["body"]) == ("Add it", "")
    with pytest.raises(UserError, match="a card needs a title"):
        run(["--root", str(root), "card", "new", "  "], {})
    with pytest.raises(SystemExit) as exit_info:
        run(["--root", str(root), "card", "new"], {})
    assert exit_info.value.code == 2


def test_card_new_on_github_needs_its_credentials(tmp_path: Path) -> None:
    root = _repo(tmp_path, origin="https://github.com/o/r.git")
    (root / ".pair").mkdir()
    with pytest.raises(ConfigError, match="the github host needs GITHUB_TOKEN"):
        run(["--root", str(root), "card", "new", "Add it"], {})
