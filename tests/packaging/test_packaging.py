"""The deliverables around the App, checked statically: Dockerfile, .dockerignore, app.yml, docs.

`docker build` cannot run here, so the image is checked by reading the Dockerfile the way
Docker does (continuation lines, stages, exec-form JSON) and by running what can run outside
it: the entry command's `--help`, the health check against a loopback server, and the
dependency closure that `pip install -c constraints.txt .` resolves, as installed in this venv.
"""

from __future__ import annotations

import ast
import fnmatch
import http.server
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path, PurePosixPath

import pytest
import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
MANIFEST = ROOT / "app.yml"
APP_DOC = ROOT / "docs" / "app.md"
CONSTRAINTS = ROOT / "constraints.txt"
PYPROJECT = ROOT / "pyproject.toml"
PAIRBOT = Path(sys.executable).parent / "pairbot"

SERVE_ARGV = ["pairbot", "serve", "--host", "0.0.0.0", "--port", "8080"]  # noqa: S104 - in-container bind
PACKAGES = ("app", "hosts", "action")

# --------------------------------------------------------------------------------------------
# A small Dockerfile reader: enough of the format for the checks below, strict about the rest.


@dataclass
class Instruction:
    keyword: str  # upper-case: FROM, RUN, COPY, USER, ...
    args: str  # the rest of the logical line, continuations joined
    line: int  # 1-based line where it starts


@dataclass
class Stage:
    image: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def parse_dockerfile(text: str) -> list[Stage]:
    """Logical instructions grouped by stage (`# directive` lines and comments dropped)."""
    instructions: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # a comment inside a continued instruction is dropped, as Docker does
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1].strip())
            continue
        pending.append(stripped)
        keyword, _, args = " ".join(part for part in pending if part).partition(" ")
        instructions.append(Instruction(keyword.upper(), args.strip(), start))
        pending = []
    assert not pending, "the Dockerfile ends inside a continued instruction"
    stages: list[Stage] = []
    for instruction in instructions:
        if instruction.keyword == "FROM":
            words = instruction.args.split()
            words = [w for w in words if not w.startswith("--platform")]
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], name))
        else:
            assert stages, f"line {instruction.line}: {instruction.keyword} before any FROM"
            stages[-1].instructions.append(instruction)
    return stages


def exec_form(instruction: Instruction) -> list[str]:
    """The JSON-array argv of an exec-form instruction; a shell-form one fails the test."""
    try:
        argv = json.loads(instruction.args)
    except json.JSONDecodeError:
        pytest.fail(f"line {instruction.line}: {instruction.keyword} is not in exec (JSON) form")
    assert isinstance(argv, list) and all(isinstance(a, str) for a in argv)
    return argv


def shell_commands(run: Instruction) -> Iterator[list[str]]:
    """Each simple command of a shell-form RUN, split on `&&`, `||`, `;` and `|`."""
    words = shlex.split(run.args, posix=True)
    command: list[str] = []
    for word in words:
        if word in {"&&", "||", ";", "|"}:
            if command:
                yield command
            command = []
        else:
            command.append(word)
    if command:
        yield command


def pip_installs(command: list[str]) -> list[str] | None:
    """The arguments after `install` when `command` runs pip's install, else None."""
    at = next(
        (
            index
            for index, word in enumerate(command)
            if re.fullmatch(r"pip3?(\.\d+)?", PurePosixPath(word).name)
            or (word == "pip" and index > 0 and command[index - 1] == "-m")
        ),
        None,
    )
    if at is None:
        return None
    rest = command[at + 1 :]
    while rest and rest[0].startswith("-"):
        # global options before the verb: `--python PATH`, `--quiet`, ...
        takes_value = rest[0] in {"--python", "--log", "--cache-dir", "--proxy"}
        rest = rest[2:] if takes_value else rest[1:]
    return rest[1:] if rest and rest[0] == "install" else None


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse_dockerfile(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def final(stages: list[Stage]) -> Stage:
    return stages[-1]


def test_every_base_image_is_python_3_11_slim_pinned_by_tag(stages: list[Stage]) -> None:
    names = {stage.name for stage in stages if stage.name}
    bases = [stage.image for stage in stages if stage.image not in names]
    assert bases, "no base image"
    for image in bases:
        assert "$" not in image, f"{image}: a build argument can swap the pinned base image"
        repository, _, tag = image.partition("@")[0].partition(":")
        assert repository in {"python", "docker.io/library/python"}, image
        # A patch release and a Debian release: never `latest`, `3`, `3.11` or `3.11-slim`.
        assert re.fullmatch(r"3\.11\.\d+-slim-[a-z]+", tag), f"{image}: not pinned by tag"


def test_pip_installs_only_this_project_under_the_constraints(stages: list[Stage]) -> None:
    installs: list[tuple[Stage, Instruction, list[str]]] = []
    for stage in stages:
        for run in stage.all("RUN"):
            for command in shell_commands(run):
                for tool in ("uv", "pipx", "poetry", "easy_install", "conda", "pdm"):
                    assert tool not in command, f"line {run.line}: installs with {tool}"
                args = pip_installs(command)
                if args is not None:
                    installs.append((stage, run, args))
    assert installs, "the Dockerfile never runs pip install"
    for stage, run, args in installs:
        where = f"line {run.line}"
        targets: list[str] = []
        constraints: list[str] = []
        rest = list(args)
        while rest:
            word = rest.pop(0)
            if word in {"-c", "--constraint"}:
                constraints.append(rest.pop(0))
            elif word.startswith("--constraint="):
                constraints.append(word.split("=", 1)[1])
            elif word in {"-r", "--requirement", "-e", "--editable"} or word.startswith(
                ("--requirement=", "--editable=")
            ):
                pytest.fail(f"{where}: installs from {word}, not only the project")
            elif word.startswith(("-i", "--index-url", "--extra-index-url", "-f", "--find-links")):
                pytest.fail(f"{where}: {word} points pip at another package source")
            elif word in {"-U", "--upgrade", "--pre", "--no-deps", "--no-index"}:
                pytest.fail(f"{where}: {word} changes what the constraints decide")
            elif word.startswith("-"):
                continue  # --no-cache-dir, --quiet, ... take no value
            else:
                targets.append(word)
        assert targets == [".[postgres]"], (
            f"{where}: installs {targets}, not exactly the project with its PostgreSQL extra "
            "(.[postgres]: one image serves SQLite and replicas on PostgreSQL)"
        )
        assert constraints == ["constraints.txt"], f"{where}: not under -c constraints.txt"
        # The constraints file is in the build context and copied before the install runs.
        copied_before = [
            copy
            for copy in stage.all("COPY")
            if copy.line < run.line and "constraints.txt" in copy.args.split()
        ]
        assert copied_before, f"{where}: constraints.txt is not copied into the stage before"


def _constraints() -> dict[str, str]:
    pins: dict[str, str] = {}
    for raw in CONSTRAINTS.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"constraints.txt: {line!r} is not pinned with =="
            pins[canonicalize_name(name)] = version.strip()
    return pins


def _closure(requirements: list[Requirement]) -> dict[str, str]:
    """Every distribution these requirements pull in, as installed here: name -> version."""

    def applies(req: Requirement, extra: str) -> bool:
        if req.marker is None:
            return not extra
        wants_extra = "extra" in str(req.marker)
        environment = {**default_environment(), "extra": extra}
        return wants_extra == bool(extra) and req.marker.evaluate(environment)

    todo: list[tuple[str, str]] = []  # (distribution, one of its extras or "")
    for req in requirements:
        if applies(req, ""):
            todo += [(req.name, ""), *((req.name, extra) for extra in req.extras)]
    versions: dict[str, str] = {}
    done: set[tuple[str, str]] = set()
    while todo:
        name, extra = todo.pop()
        if (canonicalize_name(name), extra) in done:
            continue
        done.add((canonicalize_name(name), extra))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            pytest.fail(f"{name} is a runtime dependency but is not installed: python3 dev.py test")
        versions[canonicalize_name(name)] = dist.version
        for raw in dist.requires or []:
            child = Requirement(raw)
            if applies(child, extra):
                todo += [(child.name, ""), *((child.name, e) for e in child.extras)]
    return versions


def test_constraints_pin_every_runtime_dependency_at_the_installed_version() -> None:
    """`-c` only constrains what it names: an unpinned transitive dependency would float."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    closure = _closure([Requirement(raw) for raw in project["dependencies"]])
    pins = _constraints()
    unpinned = sorted(set(closure) - set(pins))
    assert not unpinned, f"runtime dependencies missing from constraints.txt: {unpinned}"
    drifted = {name: (closure[name], pins[name]) for name in closure if closure[name] != pins[name]}
    assert not drifted, f"installed != pinned (installed, pinned): {drifted}"


def test_constraints_pin_the_postgres_extra_the_image_installs() -> None:
    """The image installs `.[postgres]`: psycopg and its pool must be locked like the rest."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    extra = project["optional-dependencies"]["postgres"]
    assert {canonicalize_name(Requirement(raw).name) for raw in extra} >= {
        "psycopg",
        "psycopg-pool",
    }
    assert any("binary" in Requirement(raw).extras for raw in extra), "psycopg[binary] wanted"
    closure = _closure([Requirement(raw) for raw in extra])
    pins = _constraints()
    unpinned = sorted(set(closure) - set(pins))
    assert not unpinned, f"the postgres extra's dependencies missing from constraints: {unpinned}"
    drifted = {name: (closure[name], pins[name]) for name in closure if closure[name] != pins[name]}
    assert not drifted, f"installed != pinned (installed, pinned): {drifted}"


def test_the_runtime_stage_runs_as_a_non_root_user(final: Stage) -> None:
    users = final.all("USER")
    assert users, "the final stage never sets USER: the server would run as root"
    user = users[-1].args.split(":", 1)[0]
    assert user not in {"root", "0"}, f"USER {users[-1].args} is root"
    starts = final.all("ENTRYPOINT") + final.all("CMD")
    assert starts and all(users[-1].line < s.line for s in starts), "USER is set after the command"
    created = " ".join(run.args for run in final.all("RUN"))
    if user.isdigit():
        assert re.search(rf"--uid {user}\b", created), f"uid {user} is never created"
    else:
        assert re.search(rf"useradd\b.*\b{re.escape(user)}\b", created), f"{user} is never created"


def test_the_image_serves_the_app_on_8080_with_the_serve_command(final: Stage) -> None:
    entrypoint = final.all("ENTRYPOINT")
    cmd = final.all("CMD")
    assert cmd, "no CMD"
    argv = (exec_form(entrypoint[-1]) if entrypoint else []) + exec_form(cmd[-1])
    assert argv == SERVE_ARGV
    exposed = {port for expose in final.all("EXPOSE") for port in expose.args.split()}
    assert exposed in ({"8080"}, {"8080/tcp"})


def test_pairbot_serve_accepts_host_and_port() -> None:
    result = subprocess.run(
        [str(PAIRBOT), "serve", "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    if result.returncode == 2 and "invalid choice: 'serve'" in result.stderr:
        pytest.skip("`pairbot serve` is not in app/cli/ yet (being added with app/web)")
    assert result.returncode == 0, result.stderr
    for flag in ("--host", "--port"):
        assert flag in result.stdout, f"`pairbot serve --help` does not offer {flag}"


def test_git_is_installed_in_the_runtime_stage(final: Stage) -> None:
    installed = [
        word
        for run in final.all("RUN")
        for command in shell_commands(run)
        if command[:2] == ["apt-get", "install"]
        for word in command[2:]
        if not word.startswith("-")
    ]
    assert "git" in installed
    for instruction in final.instructions:
        for tool in ("curl", "wget"):
            assert tool not in instruction.args, f"line {instruction.line} uses {tool}"


class _Health(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def health_server() -> Iterator[tuple[int, type[_Health]]]:
    handler = type("Handler", (_Health,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_the_healthcheck_asks_healthz_with_python_and_fails_on_an_error(
    final: Stage, health_server: tuple[int, type[_Health]]
) -> None:
    (check,) = final.all("HEALTHCHECK")
    options, _, command = check.args.partition("CMD ")
    argv = json.loads(command)
    assert argv[:2] == ["python", "-c"] and len(argv) == 3, "not `python -c CODE` in exec form"
    code = argv[2]
    ast.parse(code)
    assert "http://127.0.0.1:8080/healthz" in code
    docker_timeout = re.search(r"--timeout=(\d+)s", options)
    urlopen_timeout = re.search(r"timeout=(\d+)\)", code)
    assert docker_timeout and urlopen_timeout
    assert int(urlopen_timeout.group(1)) < int(docker_timeout.group(1)), (
        "urlopen must give up before Docker kills the probe"
    )
    port, handler = health_server
    here = code.replace(":8080/", f":{port}/")

    def probe() -> int:
        return subprocess.run(
            [sys.executable, "-c", here], capture_output=True, timeout=30, check=False
        ).returncode

    handler.status = 200
    assert probe() == 0
    handler.status = 503
    assert probe() != 0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_image_command_serves_healthz_as_the_healthcheck_asks(
    final: Stage, tmp_path: Path
) -> None:
    """The image's argv (on loopback and a free port), its environment, its health check."""
    entrypoint = final.all("ENTRYPOINT")
    argv = (exec_form(entrypoint[-1]) if entrypoint else []) + exec_form(final.all("CMD")[-1])
    port = _free_port()
    argv = [str(PAIRBOT) if argv[0] == "pairbot" else argv[0], *argv[1:]]
    argv[argv.index("--host") + 1] = "127.0.0.1"
    argv[argv.index("--port") + 1] = str(port)
    (check,) = final.all("HEALTHCHECK")
    code = json.loads(check.args.partition("CMD ")[2])[2].replace(":8080/", f":{port}/")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "PYTHONUNBUFFERED": "1",
        "PAIR_STORE": str(tmp_path / "data" / "pairbot.sqlite3"),  # the image's /data/…
        "PAIR_WEBHOOK_SECRET": "test-secret",
    }
    (tmp_path / "data").mkdir()
    server = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 30
        healthy = False
        while time.monotonic() < deadline and server.poll() is None and not healthy:
            probe = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, timeout=30, check=False
            )
            healthy = probe.returncode == 0
            if not healthy:
                time.sleep(0.2)
        assert healthy, "the health check never passed against `pairbot serve`"
        assert (tmp_path / "data" / "pairbot.sqlite3").exists(), "the store is not at PAIR_STORE"
    finally:
        server.send_signal(signal.SIGTERM)  # what `docker stop` sends
        output, _ = server.communicate(timeout=30)
    # uvicorn shuts down gracefully, then re-raises the signal: the exit status says SIGTERM.
    assert server.returncode in {0, -signal.SIGTERM}, output
    assert "Application shutdown complete" in output, output
    assert "Traceback" not in output, output


# --------------------------------------------------------------------------------------------
# .dockerignore, read with Docker's rules: patterns in order, `!` re-includes, the last match
# wins, and a path is excluded when it or any of its parent directories matches.


def _docker_pattern(pattern: str) -> re.Pattern[str]:
    out = ""
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**/", index):
            out += "(?:.*/)?"
            index += 3
            continue
        if pattern.startswith("**", index):
            out += ".*"
            index += 2
            continue
        if char == "*":
            out += "[^/]*"
        elif char == "?":
            out += "[^/]"
        elif char == "[":
            end = pattern.index("]", index)
            out += "[" + pattern[index + 1 : end].replace("\\", "\\\\") + "]"
            index = end
        else:
            out += re.escape(char)
        index += 1
    return re.compile(out + r"\Z")


def _dockerignore() -> list[tuple[bool, re.Pattern[str]]]:
    rules = []
    for raw in DOCKERIGNORE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = str(PurePosixPath(line.removeprefix("!").strip().strip("/")))
        rules.append((negate, _docker_pattern(pattern)))
    return rules


def excluded(path: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    parts = PurePosixPath(path).parts
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    verdict = False
    for negate, pattern in rules:
        if any(pattern.match(candidate) for candidate in candidates):
            verdict = not negate
    return verdict


@pytest.mark.parametrize(
    "path",
    [
        ".git",
        ".git/config",
        "sub/.git/HEAD",
        ".venv/bin/python",
        ".pair/forge/repo.git/HEAD",
        ".pair/batches/b/run/journal.jsonl",
        ".pytest_cache/v/cache/lastfailed",
        ".mypy_cache/3.11/app",
        ".ruff_cache/CACHEDIR.TAG",
        ".hypothesis/examples/x",
        ".coverage",
        "app/__pycache__/cli.cpython-311.pyc",
        "hosts/__pycache__/base.cpython-311.pyc",
        "tests/test_packaging.py",
        "pairbot-demo/.pair/config.yaml",
        "pairbot.egg-info/PKG-INFO",
        "pairbot.env",
        "pairbot.pem",
    ],
)
def test_dockerignore_keeps_state_secrets_and_caches_out_of_the_context(path: str) -> None:
    assert excluded(path, _dockerignore()), f"{path} would be sent to the Docker daemon"


def test_dockerignore_keeps_everything_the_dockerfile_copies(stages: list[Stage]) -> None:
    rules = _dockerignore()
    sources = [
        source
        for stage in stages
        for copy in stage.all("COPY")
        if "--from" not in copy.args
        for source in copy.args.split()[:-1]
    ]
    assert {"constraints.txt", "pyproject.toml", *PACKAGES} <= {
        s.removeprefix("./").rstrip("/") for s in sources
    }
    tracked = subprocess.run(
        ["git", "ls-files", *PACKAGES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for source in sources:
        assert not excluded(source, rules), f"COPY {source}: excluded by .dockerignore"
    for path in tracked:
        assert not excluded(path, rules), f"{path} is tracked but excluded by .dockerignore"


def test_every_data_file_in_the_packages_is_installed_by_a_non_editable_install() -> None:
    """The image installs a built copy: a template or YAML left out of package-data is lost."""
    package_data: dict[str, list[str]] = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"][
        "package-data"
    ]
    tracked = subprocess.run(
        ["git", "ls-files", *PACKAGES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    missing = []
    for path in tracked:
        pure = PurePosixPath(path)
        if pure.suffix == ".py":
            continue
        covered = False
        for package, globs in package_data.items():
            base = PurePosixPath(*package.split(".")) if package != "*" else None
            if base is not None and base not in pure.parents:
                continue
            relative = pure.relative_to(base) if base else PurePosixPath(pure.name)
            covered = covered or any(_glob_match(relative, glob) for glob in globs)
        if not covered:
            missing.append(path)
    assert not missing, f"not in [tool.setuptools.package-data], so not in the image: {missing}"


def _glob_match(path: PurePosixPath, glob: str) -> bool:
    """setuptools' package-data glob: `*` stays within one directory, `**` spans any."""
    if "**" in glob:
        return fnmatch.fnmatch(str(path), glob)
    parts = PurePosixPath(glob).parts
    return len(parts) == len(path.parts) and all(
        fnmatch.fnmatch(name, part) for name, part in zip(path.parts, parts, strict=True)
    )


# --------------------------------------------------------------------------------------------
# app.yml, the GitHub App manifest, and docs/app.md.

# GitHub's manifest parameters ("Registering a GitHub App from a manifest").
MANIFEST_KEYS = {
    "name",
    "url",
    "hook_attributes",
    "redirect_url",
    "callback_urls",
    "setup_url",
    "description",
    "public",
    "default_events",
    "default_permissions",
    "request_oauth_on_install",
    "setup_on_update",
}
# The permission (any one of them) GitHub requires before an App may subscribe to an event.
EVENT_NEEDS = {
    "issue_comment": {"issues", "pull_requests"},
    "issues": {"issues"},
    "pull_request": {"pull_requests"},
}
ALWAYS_DELIVERED = {"installation", "installation_repositories"}


@pytest.fixture(scope="module")
def manifest() -> dict[str, object]:
    loaded = yaml.safe_load(MANIFEST.read_text())
    assert isinstance(loaded, dict)
    return loaded


def _doc_table(heading: str) -> list[list[str]]:
    """The first Markdown table under `## heading`, as rows of cell texts (header dropped)."""
    text = APP_DOC.read_text()
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/app.md has no section '## {heading}'"
    rows: list[list[str]] = []
    for line in match.group(1).splitlines():
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break  # the end of the first table
    assert len(rows) > 2, f"docs/app.md '## {heading}' has no table"
    return rows[2:]


def test_the_manifest_is_what_github_accepts(manifest: dict[str, object]) -> None:
    assert set(manifest) <= MANIFEST_KEYS, f"unknown keys: {set(manifest) - MANIFEST_KEYS}"
    for key in ("name", "url", "hook_attributes", "redirect_url", "default_permissions"):
        assert key in manifest, f"app.yml has no {key}"
    assert manifest["public"] is False
    hook = manifest["hook_attributes"]
    assert isinstance(hook, dict) and set(hook) <= {"url", "active"}
    assert str(hook["url"]).startswith("https://")
    assert str(hook["url"]).endswith("/webhooks/github")
    assert hook.get("active", True) is True
    # GitHub takes the manifest as JSON: it must survive the conversion docs/app.md shows.
    assert json.loads(json.dumps(manifest)) == manifest


def test_the_manifest_subscribes_to_exactly_the_routed_events(manifest: dict[str, object]) -> None:
    from app.web.events import GITHUB_ROUTES

    events = manifest["default_events"]
    permissions = manifest["default_permissions"]
    assert isinstance(events, list) and isinstance(permissions, dict)
    assert not ALWAYS_DELIVERED & set(events), "installation events are not listed in a manifest"
    routed = {event for event, _action in GITHUB_ROUTES} - ALWAYS_DELIVERED - {"ping"}
    assert set(events) == routed, "subscribe to what app/web routes, and to nothing else"
    for event in events:
        assert EVENT_NEEDS[event] & set(permissions), f"{event} needs one of {EVENT_NEEDS[event]}"


def test_the_manifest_asks_exactly_the_permissions_docs_app_md_justifies(
    manifest: dict[str, object],
) -> None:
    permissions = manifest["default_permissions"]
    assert isinstance(permissions, dict)
    documented = {row[0].strip("`"): row[1] for row in _doc_table("Permissions and events")}
    assert permissions == documented
    assert set(permissions.values()) <= {"read", "write"}
    assert permissions["contents"] == "write", "repository_dispatch needs contents: write"
    assert permissions.get("metadata") == "read"
    for never in ("administration", "secrets", "members", "workflows", "actions"):
        assert never not in permissions
    assert permissions.get("checks") == "read", "check runs are read as evidence, never written"


def test_every_manifest_permission_carries_its_reason_in_a_comment() -> None:
    lines = MANIFEST.read_text().splitlines()
    start = lines.index("default_permissions:")
    for index in range(start + 1, len(lines)):
        line = lines[index]
        if line and not line.startswith(" "):
            break
        match = re.fullmatch(r"  (\w+): (read|write)", line)
        if match:
            assert lines[index - 1].lstrip().startswith("#"), f"{match.group(1)} has no reason"


def test_docs_app_md_documents_exactly_the_app_settings() -> None:
    names = {row[0].strip("`") for row in _doc_table("Settings")}
    assert names == {
        "PAIR_APP_ID",
        "PAIR_PRIVATE_KEY",
        "PAIR_PRIVATE_KEY_FILE",
        "PAIR_WEBHOOK_SECRET",
        "PAIR_TRIGGER",
        "PAIR_ALLOWLIST",
        "PAIR_EXECUTION",
        "PAIR_STORE",
        "PAIR_GITHUB_API_URL",
        "PAIR_ADO_USERNAME",
        "PAIR_ADO_PASSWORD",
    }
    text = APP_DOC.read_text()
    assert "pairbot serve --host" in text and "--port" in text
    # Every variable the App's settings read is documented (the rarer ones below the table).
    read = set(re.findall(r"\"(PAIR_[A-Z_]+)\"", (ROOT / "app/web/settings.py").read_text()))
    undocumented = {name for name in read if f"`{name}`" not in text}
    assert not undocumented, f"app/web/settings.py reads {undocumented}; docs/app.md omits them"
    # The image and the docs agree on where the store lives and which volume keeps it.
    dockerfile = DOCKERFILE.read_text()
    store = re.search(r"PAIR_STORE=(\S+)", dockerfile)
    assert store and store.group(1) in text
    store_dir = str(PurePosixPath(store.group(1)).parent)
    volumes = [json.loads(v.args) for v in parse_dockerfile(dockerfile)[-1].all("VOLUME")]
    assert [store_dir] in volumes, f"the store's directory {store_dir} is not a VOLUME"
    assert f":{store_dir} " in text, "the docker run example mounts no volume for the store"


def test_docs_app_md_names_exactly_the_azure_devops_events_the_app_routes() -> None:
    from app.web.events import AZURE_ROUTES

    rows = _doc_table("Walkthrough")  # the first table of the walkthrough is the service hooks
    assert {row[1].strip("`") for row in rows} == set(AZURE_ROUTES)


def test_docs_app_md_names_the_routes_the_app_serves(tmp_path: Path) -> None:
    from app.web.app import create_app
    from app.web.settings import AppSettings

    settings = AppSettings.from_env(
        {"PAIR_WEBHOOK_SECRET": "test-secret", "PAIR_STORE": str(tmp_path / "store.sqlite3")},
        root=tmp_path,
    )
    routes = {
        (route.path, method)
        for route in create_app(settings).routes
        for method in getattr(route, "methods", None) or ()
        if method != "HEAD"
    }
    text = APP_DOC.read_text()
    for path, method in routes:
        assert f"`{method} {path}`" in text, f"docs/app.md does not name {method} {path}"
