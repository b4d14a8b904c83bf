"""Running a real agent CLI offline, for the argv-acceptance tests.

The CLIs are the ones `python3 dev.py test` installs with `npm ci` into tests/agents/node_modules
at the versions in package-lock.json. Each run gets a scrubbed environment (no inherited
credentials), an empty HOME in a temporary directory, and the model base URL of each CLI that
sends a request without credentials pointed at a loopback port that is bound but never listens,
so a request is refused at once and nothing reaches the internet (claude and gemini stop at
their credential check before any request). Where the tests run as root, the CLI runs as
`nobody` (setpriv): pairbot never relies on an agent running as root (claude refuses full
autonomy there).

A run ends when the CLI prints its "reached the model" line (its own message about the missing
credentials, or about the refused connection for the CLIs that check no credentials first),
prints an argument-parsing error, exits, or the time bound passes; its process group is killed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

AGENTS_DIR = Path(__file__).resolve().parent
NODE_BIN = AGENTS_DIR / "node_modules" / ".bin"
NOBODY = 65534
RUN_TIMEOUT_S = 90.0


@dataclass(frozen=True)
class Expectation:
    """How one CLI says it got past argument parsing, and how it says it did not."""

    reached: re.Pattern[str]
    rejected: re.Pattern[str]


EXPECTATIONS: Mapping[str, Expectation] = {
    # claude checks credentials before any request: "Not logged in · Please run /login".
    "claude": Expectation(
        re.compile(r"Not logged in"),
        re.compile(r"error: (unknown option|option .* argument .* is invalid)|cannot be used with"),
    ),
    # codex exec sends the turn without checking credentials; the loopback refuses it.
    "codex": Expectation(
        re.compile(r"Connection refused"),
        re.compile(r"^error: |Usage: codex exec", re.MULTILINE),
    ),
    # gemini checks credentials before any request (exit 41).
    "gemini": Expectation(
        re.compile(r"Please set an Auth method"),
        re.compile(r"Unknown argument|Not enough arguments|Invalid values|Usage: gemini"),
    ),
    # opencode runs the loopback provider configured below; its log names the refusal.
    "opencode": Expectation(
        re.compile(r"Cannot connect to API"),
        re.compile(r"^opencode run \[message\.\.\]", re.MULTILINE),
    ),
}


def installed(binary: str) -> Path | None:
    """The installed CLI, or None."""
    path = NODE_BIN / binary
    return path if path.exists() else None


@contextmanager
def refused_port() -> Iterator[int]:
    """A loopback port bound but not listening: every connection to it is refused at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def offline_env(agent: str, home: Path, port: int) -> dict[str, str]:
    """The scrubbed environment for `agent`, every model endpoint on the refused port."""
    base = f"http://127.0.0.1:{port}"
    env = {
        "PATH": f"{NODE_BIN}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "TMPDIR": str(home / "tmp"),
        "LANG": "C.UTF-8",
        "NO_PROXY": "*",
        # These tests prove what the CLIs accept and stream; running them as the agent's own
        # user is proven by tests/runtime/test_isolation*.py. Without this the launcher isolates
        # whenever an earlier test of the run has created that user, and the 0700 temp dirs here
        # are closed to it.
        "PAIR_ISOLATION": "off",
    }
    if agent == "claude":
        env |= {
            "ANTHROPIC_BASE_URL": base,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
        }
    elif agent == "codex":
        codex_home = home / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(f'openai_base_url = "{base}/v1"\n')
        env |= {"CODEX_HOME": str(codex_home), "OPENAI_BASE_URL": f"{base}/v1"}
    # gemini gets no base URL: it stops at its credential check before any request, and
    # GOOGLE_GEMINI_BASE_URL would select its "gateway" auth, refused by another message.
    elif agent == "opencode":
        config = {
            "$schema": "https://opencode.ai/config.json",
            "model": "loopback/m1",
            "autoupdate": False,
            "share": "disabled",
            "provider": {
                "loopback": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "loopback",
                    "options": {"baseURL": f"{base}/v1"},
                    "models": {"m1": {"name": "m1"}},
                }
            },
        }
        env |= {
            "OPENCODE_CONFIG_CONTENT": json.dumps(config),
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        }
    return env


def prepare(
    work: Path, agent: str, port: int, files: Mapping[str, str] | None = None
) -> tuple[dict[str, str], Path]:
    """The offline environment and a git repository under `work` (plus `files`, paths relative
    to HOME), all owned by the user the CLI runs as."""
    home = work / "home"
    repo = work / "repo"
    (home / "tmp").mkdir(parents=True)
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=30)
    for relative, text in (files or {}).items():
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_text(text)
    env = offline_env(agent, home, port)
    if os.geteuid() == 0:
        for path in (work, *work.rglob("*")):
            os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
    return env, repo


@dataclass(frozen=True)
class Run:
    """What a CLI printed (stdout and stderr, interleaved) and how it ended."""

    output: str
    exit_code: int | None  # None: still running when the matching line arrived, then killed
    reached: bool
    rejected: bool


def run_cli(
    agent: str,
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    prompt: str = "Say hi.\n",
    timeout: float = RUN_TIMEOUT_S,
    expect: Expectation | None = None,
) -> Run:
    """Run `argv` with `prompt` on stdin until it reaches the model (or `expect.reached`), is
    rejected, or exits."""
    expect = expect or EXPECTATIONS[agent]
    prefix: list[str] = []
    if os.geteuid() == 0:
        prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    proc = subprocess.Popen(  # the CLI under test, argv built by pairbot
        [*prefix, *argv],
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(prompt.encode())
    proc.stdin.close()
    chunks: list[str] = []
    done = threading.Event()
    stdout = proc.stdout

    def pump() -> None:
        for raw in iter(stdout.readline, b""):
            chunks.append(raw.decode(errors="replace"))
            text = "".join(chunks)
            if expect.reached.search(text) or expect.rejected.search(text):
                break
        done.set()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    done.wait(timeout)
    exit_code = proc.poll()
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    reader.join(timeout=5)
    stdout.close()
    text = "".join(chunks)
    return Run(
        output=text,
        exit_code=exit_code,
        reached=bool(expect.reached.search(text)),
        rejected=bool(expect.rejected.search(text)),
    )
