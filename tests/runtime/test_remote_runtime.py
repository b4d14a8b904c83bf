"""The remote locus against a real `swerex-remote` on 127.0.0.1: refusals, failures, secrecy.

The streaming contract itself runs on this locus in tests/runtime/test_rex_runtime.py. Here:
what the agent's environment and working directory become on the server, the scheme and token rules
(refused before any request), and every way the server can fail — wrong token, nothing
listening, a server that never answers, one that dies mid-run, a swerexception — each ending as
an actionable failed spawn, never an exception, with the token nowhere in what comes out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from app.engine.agent import AgentEvent, AgentSpawnRequest, AgentSpawnResult
from app.runtime.remote_url import RemoteUrlError, is_loopback_host, remote_base_url
from app.runtime.rex import RemoteLocus, RexError, RexRuntime
from app.settings import RemoteSettings
from tests.support.swerex_server import HOST, SwerexServer, free_port, swerex_server

BASE_ENV = {"PYTHONCOERCECLOCALE": "0"}
FAST_POLL_S = 0.02
FAILS_FAST_S = 20  # a loose sanity bound: "no hang", not a performance claim


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SwerexServer]:
    with swerex_server(tmp_path_factory.mktemp("swerex")) as running:
        yield running


def request_for(
    code: str, cwd: Path, *, env: dict[str, str] | None = None, timeout_ms: int = 30_000
) -> AgentSpawnRequest:
    return AgentSpawnRequest(
        command=sys.executable,
        args=("-c", code),
        instructions="the instructions",
        cwd=str(cwd),
        env=BASE_ENV if env is None else env,
        timeout_ms=timeout_ms,
    )


def run(
    runtime: RexRuntime, request: AgentSpawnRequest
) -> tuple[AgentSpawnResult, list[AgentEvent]]:
    events: list[AgentEvent] = []
    result = asyncio.run(runtime.spawn(request, events.append))
    return result, events


def assert_failed_spawn(
    result: AgentSpawnResult, events: list[AgentEvent], *, exit_code: int = 127
) -> str:
    """The shape of every refusal and transport failure; returns the message."""
    assert (result.exit_code, result.signal, result.stdout) == (exit_code, None, "")
    assert [e.kind for e in events] == ["error", "exit"]
    message = events[0].message
    assert message is not None and message.startswith("pairbot: ")
    assert result.stderr == message + "\n"
    assert events[1] == AgentEvent(kind="exit", exit_code=exit_code)
    return message


def assert_no_token(
    token: str,
    result: AgentSpawnResult,
    events: list[AgentEvent],
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The token is in no event, no result field, nothing printed and no log record."""
    printed = capfd.readouterr()
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for text in (repr(result), repr(events), printed.out, printed.err, logged):
        assert token not in text
    # Nothing but our events may reach the terminal: swerex stays quiet.
    assert printed.out == "" and printed.err == ""


# --- a working server -----------------------------------------------------------------------------


def test_a_run_streams_and_exits_without_the_token_anywhere(
    server: SwerexServer,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("DEBUG")
    code = "import sys; print('hello'); print(sys.stdin.read()); sys.exit(4)"
    runtime = RexRuntime(RemoteLocus(server.settings(), tmp_path), poll_interval_s=FAST_POLL_S)
    result, events = run(runtime, request_for(code, tmp_path))
    assert (result.exit_code, result.stdout) == (4, "hello\nthe instructions")
    assert events[-1] == AgentEvent(kind="exit", exit_code=4)
    assert_no_token(server.token, result, events, capfd, caplog)


def test_this_machines_path_and_home_stay_here(server: SwerexServer, tmp_path: Path) -> None:
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    env = {
        **BASE_ENV,
        "PATH": "/only/on/the/pairbot/host/bin",
        "HOME": "/only/on/the/pairbot/host/home",
        "TMPDIR": "/only/on/the/pairbot/host/tmp",
        "PAIR_CHANGE": "alpha",
    }
    runtime = RexRuntime(RemoteLocus(server.settings(), tmp_path), poll_interval_s=FAST_POLL_S)
    result, _ = run(runtime, request_for(code, tmp_path, env=env))
    seen = json.loads(result.stdout)
    assert seen["PAIR_CHANGE"] == "alpha"
    assert "/only/on/the/pairbot/host" not in json.dumps(seen)
    assert seen["PATH"]  # the server's own PATH, which found nothing of ours


def test_the_project_root_maps_to_the_remote_workdir(server: SwerexServer, tmp_path: Path) -> None:
    here = tmp_path / "checkout-here"
    there = tmp_path / "checkout-on-server"
    (there / "sub").mkdir(parents=True)
    here.mkdir()
    code = "import os; print(os.getcwd()); print(os.environ['PAIR_ROOT'])"
    settings = server.settings(workdir=str(there))
    runtime = RexRuntime(RemoteLocus(settings, here), poll_interval_s=FAST_POLL_S)
    env = {**BASE_ENV, "PAIR_ROOT": str(here)}
    result, _ = run(runtime, request_for(code, here / "sub", env=env))
    cwd, root = result.stdout.split("\n")
    assert Path(cwd).resolve() == (there / "sub").resolve()
    assert root == str(there)


# --- refused before any request -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "insecure", "expected"),
    [
        pytest.param("localhost", False, "http://localhost", id="bare-localhost"),
        pytest.param("127.0.0.1", False, "http://127.0.0.1", id="bare-ipv4-loopback"),
        pytest.param("127.8.9.10", False, "http://127.8.9.10", id="bare-127-8"),
        pytest.param("::1", False, "http://[::1]", id="bare-ipv6-loopback"),
        pytest.param("[::1]", False, "http://[::1]", id="bracketed-ipv6-loopback"),
        pytest.param("rex.example.com", False, "https://rex.example.com", id="bare-remote"),
        pytest.param("10.0.0.5", False, "https://10.0.0.5", id="bare-private-address"),
        pytest.param("2001:db8::1", False, "https://[2001:db8::1]", id="bare-ipv6-remote"),
        pytest.param("https://rex.example.com", False, "https://rex.example.com", id="https"),
        pytest.param("HTTPS://Rex.example.com", False, "https://Rex.example.com", id="case"),
        pytest.param("https://localhost", False, "https://localhost", id="https-loopback"),
        pytest.param("http://127.0.0.1", False, "http://127.0.0.1", id="http-loopback"),
        pytest.param("http://rex.example.com", True, "http://rex.example.com", id="insecure"),
    ],
)
def test_scheme_rules(host: str, insecure: bool, expected: str) -> None:
    assert remote_base_url(host, insecure=insecure) == expected


@pytest.mark.parametrize(
    ("host", "words"),
    [
        pytest.param("http://rex.example.com", "insecure: true", id="http-to-remote"),
        pytest.param("http://10.0.0.5", "insecure: true", id="http-to-private-address"),
        pytest.param("ftp://rex.example.com", "scheme", id="other-scheme"),
        pytest.param("rex.example.com:8000", "remote.port", id="port-in-host"),
        pytest.param("https://rex.example.com/api", "no path", id="path"),
        pytest.param("https://user@rex.example.com", "no path", id="userinfo"),
        pytest.param("https://", "no path", id="no-host"),
    ],
)
def test_scheme_rules_refuse(host: str, words: str) -> None:
    with pytest.raises(RemoteUrlError, match=words):
        remote_base_url(host, insecure=False)


def test_loopback_detection() -> None:
    assert all(map(is_loopback_host, ["localhost", "LOCALHOST", "127.0.0.1", "127.255.0.1", "::1"]))
    unspecified = ["0.0.0.0", "::"]  # noqa: S104  # addresses compared, nothing is bound
    assert not any(map(is_loopback_host, ["localhost.example.com", "10.0.0.1", *unspecified]))


def test_http_to_a_non_local_host_is_a_failed_spawn_without_a_request(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    token = "tok-" + os.urandom(8).hex()
    # 192.0.2.1 is TEST-NET-1: a request there would wait out the is_alive timeout (set far
    # beyond the bound below) instead of failing at once with the refusal.
    settings = RemoteSettings(host="http://192.0.2.1", port=8000, auth_token=SecretStr(token))
    runtime = RexRuntime(RemoteLocus(settings, tmp_path, is_alive_timeout_s=600))
    started = time.monotonic()
    result, events = run(runtime, request_for("print(1)", tmp_path))
    message = assert_failed_spawn(result, events)
    assert "refusing plain http://" in message and "insecure: true" in message
    assert time.monotonic() - started < FAILS_FAST_S
    assert_no_token(token, result, events, capfd, caplog)


@pytest.mark.parametrize("token", [None, ""], ids=["missing", "empty"])
def test_a_missing_or_empty_token_is_refused(
    server: SwerexServer, tmp_path: Path, token: str | None
) -> None:
    # The model refuses an empty token already; model_construct goes around it, as a caller
    # building settings by hand could.
    settings = RemoteSettings.model_construct(
        host=HOST,
        port=server.port,
        auth_token=None if token is None else SecretStr(token),
        insecure=False,
        workdir=None,
    )
    result, events = run(RexRuntime(RemoteLocus(settings, tmp_path)), request_for("", tmp_path))
    message = assert_failed_spawn(result, events)
    assert "no auth token" in message and "remote.authToken" in message


def test_missing_remote_settings_are_refused(tmp_path: Path) -> None:
    result, events = run(RexRuntime(RemoteLocus(None, tmp_path)), request_for("", tmp_path))
    assert "no `remote:` settings" in assert_failed_spawn(result, events)


def test_a_relative_workdir_is_refused(server: SwerexServer, tmp_path: Path) -> None:
    locus = RemoteLocus(server.settings(workdir="relative/dir"), tmp_path)
    result, events = run(RexRuntime(locus), request_for("", tmp_path))
    assert "must be an absolute path" in assert_failed_spawn(result, events)


# --- a server that fails --------------------------------------------------------------------------


def test_a_wrong_token_is_an_actionable_failed_spawn(
    server: SwerexServer,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("DEBUG")
    wrong = "wrong-" + os.urandom(8).hex()
    runtime = RexRuntime(RemoteLocus(server.settings(token=wrong), tmp_path))
    result, events = run(runtime, request_for("print(1)", tmp_path))
    message = assert_failed_spawn(result, events)
    assert "rejected pairbot's auth token (HTTP 401)" in message
    assert "remote.authToken" in message
    assert_no_token(wrong, result, events, capfd, caplog)
    assert_no_token(server.token, result, events, capfd, caplog)


def test_nothing_listening_fails_fast(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    token = "tok-" + os.urandom(8).hex()
    settings = RemoteSettings(host=HOST, port=free_port(), auth_token=SecretStr(token))
    started = time.monotonic()
    result, events = run(RexRuntime(RemoteLocus(settings, tmp_path)), request_for("", tmp_path))
    message = assert_failed_spawn(result, events)
    assert f"cannot reach the swerex-remote server at http://{HOST}:{settings.port}" in message
    assert "swerex-remote is running" in message
    assert time.monotonic() - started < FAILS_FAST_S
    assert_no_token(token, result, events, capfd, caplog)


@contextlib.contextmanager
def silent_listener() -> Iterator[int]:
    """A loopback port that accepts connections and never answers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((HOST, 0))
    sock.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                accepted.append(sock.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        sock.close()


def test_a_server_that_never_answers_is_alive_fails_after_the_short_timeout(
    tmp_path: Path,
) -> None:
    with silent_listener() as port:
        settings = RemoteSettings(host=HOST, port=port, auth_token=SecretStr("t0ken-x"))
        runtime = RexRuntime(RemoteLocus(settings, tmp_path, is_alive_timeout_s=0.5))
        started = time.monotonic()
        result, events = run(runtime, request_for("", tmp_path))
    message = assert_failed_spawn(result, events)
    assert "cannot reach the swerex-remote server" in message
    assert time.monotonic() - started < FAILS_FAST_S


def test_a_server_dying_mid_run_ends_the_spawn_instead_of_hanging(tmp_path: Path) -> None:
    pid_file = tmp_path / "agent.pid"
    code = (
        "import os, time\n"
        # The pid and the run directory (where stdin comes from), for the cleanup below.
        "from pathlib import Path\n"
        "where = Path('/proc/self/fd/0').readlink()\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()) + ' ' + str(where))\n"
        "print('started', flush=True)\n"
        "time.sleep(60)\n"
    )
    events: list[AgentEvent] = []

    async def scenario(running: SwerexServer, stop_server: threading.Event) -> AgentSpawnResult:
        runtime = RexRuntime(
            RemoteLocus(running.settings(), tmp_path),
            poll_interval_s=FAST_POLL_S,
            lost_contact_s=1.0,
            request_timeout_s=2.0,
        )

        def on_event(event: AgentEvent) -> None:
            events.append(event)
            if event.kind == "stdout":
                stop_server.set()

        return await runtime.spawn(request_for(code, tmp_path), on_event)

    stop_server = threading.Event()
    try:
        with swerex_server(tmp_path) as running:

            def kill_when_told() -> None:
                stop_server.wait(30)
                running.kill()  # the server's group only: the agent has a session of its own

            killer = threading.Thread(target=kill_when_told, daemon=True)
            killer.start()
            started = time.monotonic()
            result = asyncio.run(scenario(running, stop_server))
            killer.join(5)
        assert (result.exit_code, result.signal) == (1, None)
        assert result.stdout == "started"
        assert [e.kind for e in events] == ["stdout", "error", "exit"]
        assert "lost contact with the agent" in (events[1].message or "")
        assert "may still be running" in result.stderr
        assert time.monotonic() - started < FAILS_FAST_S
    finally:
        # With its server dead nobody else can stop this agent or remove its run directory.
        with contextlib.suppress(ProcessLookupError, ValueError, FileNotFoundError):
            pid, prompt = pid_file.read_text().split(" ", 1)
            os.kill(int(pid), signal.SIGKILL)
            shutil.rmtree(Path(prompt).parent, ignore_errors=True)


def test_a_swerexception_is_surfaced_quietly(
    server: SwerexServer,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> str:
        connection = await RemoteLocus(server.settings(), tmp_path).connect("swerexception")
        try:
            await connection.write_file(
                "write a file", "/proc/definitely/not/writable", "x", timeout_s=10
            )
        except RexError as err:
            return str(err)
        finally:
            await connection.release()
        raise AssertionError("write_file into /proc succeeded")

    message = asyncio.run(scenario())
    assert message.startswith("could not write a file: the swerex-remote server at")
    assert "reported" in message and "Error" in message
    printed = capfd.readouterr()
    assert (printed.out, printed.err) == ("", "")  # swerex's client would print the class
    assert server.token not in message
