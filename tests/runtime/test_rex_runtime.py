"""The SWE-ReX runtime's streaming contract, run for real on the local and remote loci.

Every behavioural test runs twice: once through swerex's in-process `LocalRuntime`, once
through a real `swerex-remote` server on 127.0.0.1 (tests/support/swerex_server.py). The agents
are small child Pythons; nothing is mocked or patched. Pure helpers (line assembly, exit
statuses, the env script) are checked directly, the line assembler with a Hypothesis property.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.engine.agent import AgentEvent, AgentRuntime, AgentSpawnRequest, AgentSpawnResult
from app.runtime.rex import (
    DEFAULT_POLL_INTERVAL_S,
    LineAssembler,
    LocalLocus,
    RemoteLocus,
    RexRuntime,
    env_script,
    exit_from_status,
    launcher_script,
    map_project_path,
)
from app.runtime.select import select_runtime
from app.settings import resolve_settings
from tests.support.swerex_server import SwerexServer, swerex_server

# Without it the child Python may coerce a C locale by adding LC_CTYPE to its own environment.
BASE_ENV = {"PYTHONCOERCECLOCALE": "0"}
FAST_POLL_S = 0.02

MakeRuntime = Callable[..., RexRuntime]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SwerexServer]:
    with swerex_server(tmp_path_factory.mktemp("swerex")) as running:
        yield running


@pytest.fixture(params=["local", "remote"])
def make_runtime(request: pytest.FixtureRequest, tmp_path: Path) -> MakeRuntime:
    """Builds a RexRuntime for the locus under test; keyword arguments go to RexRuntime."""
    if request.param == "local":
        return lambda **options: RexRuntime(LocalLocus(), **options)
    running: SwerexServer = request.getfixturevalue("server")
    return lambda **options: RexRuntime(RemoteLocus(running.settings(), tmp_path), **options)


def spawn(
    runtime: AgentRuntime,
    code: str,
    cwd: Path,
    *,
    instructions: str = "",
    env: Mapping[str, str] = BASE_ENV,
    timeout_ms: int = 30_000,
    command: str = sys.executable,
) -> tuple[AgentSpawnResult, list[AgentEvent]]:
    events: list[AgentEvent] = []
    request = AgentSpawnRequest(
        command=command,
        args=("-c", code),
        instructions=instructions,
        cwd=str(cwd),
        env=env,
        timeout_ms=timeout_ms,
    )
    result = asyncio.run(runtime.spawn(request, events.append))
    return result, events


def lines_of(events: list[AgentEvent]) -> list[str | None]:
    return [e.line for e in events if e.kind == "stdout"]


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"  # a zombie has stopped running


def wait_gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while not _gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# --- streaming ------------------------------------------------------------------------------------


def test_a_burst_of_thousands_of_lines_arrives_in_order_exactly_once(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    code = "import sys\nsys.stdout.write(''.join(f'line {i}\\n' for i in range(5000)))"
    result, events = spawn(make_runtime(poll_interval_s=FAST_POLL_S), code, tmp_path)
    expected = [f"line {i}" for i in range(5000)]
    assert lines_of(events) == expected
    assert result.stdout == "\n".join(expected)
    assert events[-1] == AgentEvent(kind="exit", exit_code=0)
    assert (result.exit_code, result.signal) == (0, None)


def test_output_larger_than_one_poll_read_is_complete(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    # 3.4 MB at once: more than one poll's read cap, so the cursor walks through full reads.
    code = (
        "import sys\n"
        "sys.stdout.write(''.join(f'{i:08d}' + 'x' * 100 + '\\n' for i in range(31000)))"
    )
    _, events = spawn(make_runtime(poll_interval_s=FAST_POLL_S), code, tmp_path)
    assert lines_of(events) == [f"{i:08d}" + "x" * 100 for i in range(31000)]


def test_lines_written_over_time_stream_in_order(make_runtime: MakeRuntime, tmp_path: Path) -> None:
    code = (
        "import time\n"
        "for burst in range(5):\n"
        "    for i in range(200): print(f'{burst}-{i}')\n"
        "    time.sleep(0.05)\n"
    )
    _, events = spawn(make_runtime(poll_interval_s=FAST_POLL_S), code, tmp_path)
    assert lines_of(events) == [f"{b}-{i}" for b in range(5) for i in range(200)]


def test_a_partial_line_is_completed_later_not_emitted_early(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    code = (
        "import sys, time\n"
        "w = sys.stdout\n"
        "w.write('abc'); w.flush(); time.sleep(0.3)\n"
        "w.write('def\\ngh'); w.flush(); time.sleep(0.3)\n"
        "w.write('i\\n\\nlast'); w.flush()\n"
    )
    result, events = spawn(make_runtime(poll_interval_s=FAST_POLL_S), code, tmp_path)
    assert lines_of(events) == ["abcdef", "ghi", "", "last"]
    assert result.stdout == "abcdef\nghi\n\nlast"


def test_a_final_line_without_newline_is_emitted_once(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    code = "import sys; sys.stdout.write('one\\ntwo')"
    result, events = spawn(make_runtime(poll_interval_s=FAST_POLL_S), code, tmp_path)
    assert lines_of(events) == ["one", "two"]
    assert [e.kind for e in events] == ["stdout", "stdout", "exit"]
    assert result.stdout == "one\ntwo"


def test_a_multibyte_character_split_across_polls_survives(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    # "é" is b"\xc3\xa9" and "✓" is b"\xe2\x9c\x93": each is written in two parts, a few polls
    # apart, so the first poll ends inside the character.
    code = (
        "import sys, time\n"
        "b = sys.stdout.buffer\n"
        "b.write(b'caf\\xc3'); b.flush(); time.sleep(0.3)\n"
        "b.write(b'\\xa9 \\xe2'); b.flush(); time.sleep(0.3)\n"
        "b.write(b'\\x9c\\x93\\n'); b.flush()\n"
        "b.write('é'.encode() * 100000 + b'\\nbad \\xff end\\n')\n"
    )
    _, events = spawn(make_runtime(poll_interval_s=FAST_POLL_S), code, tmp_path)
    assert lines_of(events) == ["café ✓", "é" * 100_000, "bad \ufffd end"]


def test_the_default_300_ms_poll_streams_everything(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    code = (
        "import sys, time\n"
        "for i in range(6):\n"
        "    print(f'tick {i}', flush=True); time.sleep(0.1)\n"
        "sys.stdout.write('tail')\n"
    )
    runtime = make_runtime()
    assert runtime._poll_interval_s == DEFAULT_POLL_INTERVAL_S == 0.3
    result, events = spawn(runtime, code, tmp_path)
    assert lines_of(events) == [f"tick {i}" for i in range(6)] + ["tail"]
    assert result.exit_code == 0


# --- what the agent gets --------------------------------------------------------------------------


def test_instructions_arrive_on_stdin_and_the_run_directory_is_removed(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    code = (
        "import os, sys\n"
        "data = sys.stdin.read()\n"
        "print(len(data)); print(data[:7]); print(os.readlink('/proc/self/fd/0'))\n"
    )
    instructions = "héllo ✓" + "x" * 300_000  # larger than one shell argument may be
    result, _ = spawn(
        make_runtime(poll_interval_s=FAST_POLL_S), code, tmp_path, instructions=instructions
    )
    length, head, prompt_path = result.stdout.split("\n")
    assert (int(length), head) == (len(instructions), "héllo ✓")
    run_dir = Path(prompt_path).parent
    assert run_dir.name.startswith("pairbot-run-")
    assert not run_dir.exists()


def test_env_is_delivered_quoted_and_cwd_is_honoured(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    code = "import json, os; print(json.dumps(dict(os.environ))); print(os.getcwd())"
    tricky = 'it\'s $HOME `id` "q" \\ ✓\nsecond line'
    env = {**BASE_ENV, "PAIRBOT_MARKER": tricky, "EMPTY": "", "bad-name": "skipped"}
    result, _ = spawn(make_runtime(poll_interval_s=FAST_POLL_S), code, tmp_path, env=env)
    env_line, cwd_line = result.stdout.split("\n")
    seen = json.loads(env_line)
    assert seen["PAIRBOT_MARKER"] == tricky
    assert seen["EMPTY"] == ""
    assert "bad-name" not in seen
    assert Path(cwd_line).resolve() == tmp_path.resolve()


def test_a_local_agent_gets_only_the_requested_env(tmp_path: Path) -> None:
    # pairbot's own environment (forge credentials among it) must not leak into the agent: only
    # the request's variables, plus what /bin/sh itself sets, reach it.
    code = "import json, os; print(json.dumps(sorted(os.environ)))"
    env = {**BASE_ENV, "ONLY_THIS": "1"}
    result, _ = spawn(
        RexRuntime(LocalLocus(), poll_interval_s=FAST_POLL_S), code, tmp_path, env=env
    )
    names = set(json.loads(result.stdout))
    assert set(env) <= names
    assert names - set(env) <= {"PWD", "OLDPWD", "SHLVL", "_", "LC_CTYPE"}
    assert "HOME" in os.environ and "HOME" not in names


def test_a_missing_working_directory_fails_the_run(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere"
    result, events = spawn(make_runtime(poll_interval_s=FAST_POLL_S), "print(1)", missing)
    assert (result.exit_code, result.signal, result.stdout) == (127, None, "")
    assert f"cannot enter the working directory {missing}" in result.stderr
    assert events[-1] == AgentEvent(kind="exit", exit_code=127)


# --- how it ended ---------------------------------------------------------------------------------


def test_non_zero_exit_and_real_stderr(make_runtime: MakeRuntime, tmp_path: Path) -> None:
    code = "import sys; print('out'); sys.stderr.write('bad thing\\n'); sys.exit(3)"
    result, events = spawn(make_runtime(poll_interval_s=FAST_POLL_S), code, tmp_path)
    assert (result.exit_code, result.signal) == (3, None)
    assert result.stdout == "out"
    assert result.stderr == "bad thing\n"
    assert events == [AgentEvent(kind="stdout", line="out"), AgentEvent(kind="exit", exit_code=3)]


def test_a_missing_command_is_exit_127(make_runtime: MakeRuntime, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-agent")
    result, _ = spawn(make_runtime(poll_interval_s=FAST_POLL_S), "", tmp_path, command=missing)
    assert (result.exit_code, result.signal, result.stdout) == (127, None, "")
    assert "no-such-agent" in result.stderr


def test_killed_by_a_signal_reports_the_signal(make_runtime: MakeRuntime, tmp_path: Path) -> None:
    code = "import os, signal; print('bye', flush=True); os.kill(os.getpid(), signal.SIGKILL)"
    result, events = spawn(make_runtime(poll_interval_s=FAST_POLL_S), code, tmp_path)
    assert (result.exit_code, result.signal) == (None, "SIGKILL")
    assert result.stdout == "bye"
    assert events[-1] == AgentEvent(kind="exit", exit_code=None)


def test_timeout_sends_sigterm_to_an_agent_that_honours_it(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    code = (
        "import sys, time\n"
        "print('working', flush=True)\n"
        "sys.stderr.write('busy'); sys.stderr.flush()\n"
        "time.sleep(30)\n"
    )
    started = time.monotonic()
    runtime = make_runtime(poll_interval_s=FAST_POLL_S, kill_grace_s=5)
    result, events = spawn(runtime, code, tmp_path, timeout_ms=800)
    assert (result.exit_code, result.signal) == (None, "SIGTERM")
    assert result.stdout == "working"
    assert result.stderr == "busy\npairbot: agent timed out after 800 ms; sent SIGTERM\n"
    assert [e.kind for e in events] == ["stdout", "error", "exit"]
    assert time.monotonic() - started < 20  # loose: the SIGTERM, not the sleep, ended it


def test_timeout_sigkills_an_agent_that_ignores_sigterm(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    code = (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        # A child in the same group that also ignores SIGTERM must not outlive the run.
        "child = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(30)'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
        "print('ignoring', flush=True)\n"
        "time.sleep(30)\n"
    )
    runtime = make_runtime(poll_interval_s=FAST_POLL_S, kill_grace_s=0.3)
    result, events = spawn(runtime, code, tmp_path, timeout_ms=1000)
    assert (result.exit_code, result.signal) == (None, "SIGKILL")
    assert result.stdout == "ignoring"
    assert result.stderr.endswith(
        "pairbot: agent timed out after 1000 ms; sent SIGTERM, then SIGKILL after 0.3 s grace\n"
    )
    assert [e.kind for e in events] == ["stdout", "error", "exit"]
    for pid in map(int, pids.read_text().split()):
        assert wait_gone(pid)


def test_an_agent_exiting_leaves_no_background_process(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    pid_file = tmp_path / "straggler.pid"
    code = (
        "import subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'],"
        " stdout=subprocess.DEVNULL)\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
    )
    result, _ = spawn(make_runtime(poll_interval_s=FAST_POLL_S), code, tmp_path)
    assert result.exit_code == 0
    assert wait_gone(int(pid_file.read_text()))


def test_an_event_sink_that_raises_propagates_and_stops_the_agent(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    pid_file = tmp_path / "agent.pid"
    code = (
        "import os, time\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "print('first', flush=True); time.sleep(30)\n"
    )

    def sink(event: AgentEvent) -> None:
        raise RuntimeError(f"sink broke on {event.kind}")

    request = AgentSpawnRequest(
        command=sys.executable,
        args=("-c", code),
        instructions="",
        cwd=str(tmp_path),
        env=BASE_ENV,
        timeout_ms=30_000,
    )
    runtime = make_runtime(poll_interval_s=FAST_POLL_S)
    with pytest.raises(RuntimeError, match="sink broke on stdout"):
        asyncio.run(runtime.spawn(request, sink))
    assert wait_gone(int(pid_file.read_text()))


def test_cancelling_the_spawn_stops_the_agent(make_runtime: MakeRuntime, tmp_path: Path) -> None:
    pid_file = tmp_path / "agent.pid"
    code = (
        "import os, time\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "print('up', flush=True); time.sleep(30)\n"
    )
    events: list[AgentEvent] = []
    request = AgentSpawnRequest(
        command=sys.executable,
        args=("-c", code),
        instructions="",
        cwd=str(tmp_path),
        env=BASE_ENV,
        timeout_ms=30_000,
    )
    runtime = make_runtime(poll_interval_s=FAST_POLL_S)

    async def cancel_once_running() -> None:
        running = asyncio.Event()

        def on_event(event: AgentEvent) -> None:
            events.append(event)
            running.set()

        task = asyncio.create_task(runtime.spawn(request, on_event))
        await running.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_once_running())
    assert lines_of(events) == ["up"]
    assert wait_gone(int(pid_file.read_text()))


# --- pure helpers ---------------------------------------------------------------------------------


@given(
    text=st.text(alphabet=st.sampled_from(["a", "é", "✓", "\n", "\U0001f600", " "]), max_size=60),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_line_assembler_gives_each_line_once_however_the_bytes_are_cut(
    text: str, cuts: list[int]
) -> None:
    data = text.encode()
    points = sorted({min(c, len(data)) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    assembler = LineAssembler()
    got = [line for chunk in chunks for line in assembler.feed(chunk)] + assembler.finish()
    expected = text.split("\n")
    if expected[-1] == "":
        expected.pop()
    assert got == expected


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(0, (0, None), id="success"),
        pytest.param(3, (3, None), id="failure"),
        pytest.param(127, (127, None), id="not-found"),
        pytest.param(128, (128, None), id="128-is-a-code"),
        pytest.param(137, (None, "SIGKILL"), id="sigkill"),
        pytest.param(143, (None, "SIGTERM"), id="sigterm"),
        pytest.param(128 + 40, (None, "SIG40"), id="realtime-signal"),
        pytest.param(255, (255, None), id="beyond-signals"),
    ],
)
def test_exit_from_status(status: int, expected: tuple[int | None, str | None]) -> None:
    assert exit_from_status(status) == expected


def test_env_script_round_trips_through_sh_and_drops_what_it_must(tmp_path: Path) -> None:
    env = {"A": "x'y", "B": "$(touch boom)", "PATH": "/host/bin", "ROOT": "/proj", "n-o": "1"}
    script = env_script(env, drop=frozenset({"PATH"}), value_map={"/proj": "/workspace"})
    (tmp_path / "env").write_text(script)
    shown = subprocess.run(
        [
            "/bin/sh",
            "-c",
            f'. {shlex.quote(str(tmp_path / "env"))}; printf \'%s|%s|%s\' "$A" "$B" "$ROOT"',
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
    ).stdout
    assert shown == "x'y|$(touch boom)|/workspace"
    assert "PATH" not in script and "n-o" not in script
    assert not (tmp_path / "boom").exists()


def test_launcher_quotes_argv_and_paths() -> None:
    script = launcher_script("/tmp/run dir", "/proj 1", ("agent", "--flag", "a b; rm -rf /"))
    assert "'agent' --flag 'a b; rm -rf /'" in script or "agent --flag 'a b; rm -rf /'" in script
    assert "cd '/proj 1'" in script
    assert ". '/tmp/run dir'/env" in script


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param("/home/me/proj", "/workspace", id="root"),
        pytest.param("/home/me/proj/sub/dir", "/workspace/sub/dir", id="below"),
        pytest.param("/home/me/project", None, id="sibling-with-common-prefix"),
        pytest.param("/home/me", None, id="above"),
    ],
)
def test_map_project_path(path: str, expected: str | None) -> None:
    assert map_project_path(path, "/home/me/proj", "/workspace") == expected


# --- selection ------------------------------------------------------------------------------------


@pytest.mark.parametrize("locus", ["local", "docker", "remote"])
def test_select_runtime_follows_the_locus(locus: str, tmp_path: Path) -> None:
    settings = resolve_settings(env={"PAIR_LOCUS": locus}, manifest=None, project=None)
    runtime: Any = select_runtime(settings, tmp_path)
    assert isinstance(runtime, RexRuntime)
    assert runtime.locus == locus


def test_selecting_a_runtime_module_does_not_import_swerex() -> None:
    code = (
        "import sys, app.runtime.select, app.settings\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('swerex', 'aiohttp')))"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout
    assert shown.strip() == "[]"
