"""The plain local process runtime, exercised with real child Pythons (no fakes, no patches)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from app.engine.agent import AgentEvent, AgentRuntime, AgentSpawnRequest, AgentSpawnResult
from app.proc import signal_name
from app.runtime.process import ProcessRuntime

# Without it the child Python may coerce a C locale by adding LC_CTYPE to its own environment
# (PEP 538), which would muddy the "exactly this env" check.
BASE_ENV = {"PYTHONCOERCECLOCALE": "0"}


def _spawn(
    code: str,
    cwd: Path,
    *,
    instructions: str = "",
    env: Mapping[str, str] = BASE_ENV,
    timeout_ms: int = 30_000,
    kill_grace_s: float = 2.0,
    command: str = sys.executable,
) -> tuple[AgentSpawnResult, list[AgentEvent]]:
    events: list[AgentEvent] = []
    runtime: AgentRuntime = ProcessRuntime(kill_grace_s=kill_grace_s)
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


def _stdout_lines(events: list[AgentEvent]) -> list[str | None]:
    return [e.line for e in events if e.kind == "stdout"]


def test_lines_stream_in_order_and_none_are_lost(tmp_path: Path) -> None:
    code = "import sys\nfor i in range(5000): sys.stdout.write(f'line {i}\\n')"
    result, events = _spawn(code, tmp_path)
    expected = [f"line {i}" for i in range(5000)]
    assert _stdout_lines(events) == expected
    assert result.stdout == "\n".join(expected)
    assert events[-1] == AgentEvent(kind="exit", exit_code=0)
    assert (result.exit_code, result.signal) == (0, None)


def test_long_lines_and_split_multibyte_characters_survive(tmp_path: Path) -> None:
    # 200 000 characters of "é" spans several read chunks and splits two-byte sequences.
    code = "import sys\nsys.stdout.write('é' * 200000 + '\\nshort\\n')"
    _, events = _spawn(code, tmp_path)
    assert _stdout_lines(events) == ["é" * 200_000, "short"]


def test_trailing_partial_line_is_emitted_at_eof(tmp_path: Path) -> None:
    result, events = _spawn("import sys; sys.stdout.write('one\\ntwo')", tmp_path)
    assert _stdout_lines(events) == ["one", "two"]
    assert result.stdout == "one\ntwo"


def test_blank_lines_are_kept(tmp_path: Path) -> None:
    result, events = _spawn("print('a'); print(); print('b')", tmp_path)
    assert _stdout_lines(events) == ["a", "", "b"]
    assert result.stdout == "a\n\nb"


def test_invalid_utf8_is_replaced(tmp_path: Path) -> None:
    _, events = _spawn("import sys; sys.stdout.buffer.write(b'a\\xffb\\n')", tmp_path)
    assert _stdout_lines(events) == ["a\ufffdb"]


def test_instructions_arrive_on_stdin(tmp_path: Path) -> None:
    code = "import sys; data = sys.stdin.read(); print(len(data)); print(data[:5])"
    instructions = "hello" + "x" * 300_000  # larger than a pipe buffer
    result, _ = _spawn(code, tmp_path, instructions=instructions)
    assert result.stdout == f"{len(instructions)}\nhello"


def test_a_child_that_ignores_stdin_is_fine(tmp_path: Path) -> None:
    result, _ = _spawn("print('no reading')", tmp_path, instructions="x" * 300_000)
    assert (result.exit_code, result.stdout) == (0, "no reading")


def test_env_is_exactly_the_given_env_and_cwd_is_honoured(tmp_path: Path) -> None:
    code = "import json, os; print(json.dumps(dict(os.environ))); print(os.getcwd())"
    env = {**BASE_ENV, "PAIRBOT_MARKER": "m-1"}
    result, _ = _spawn(code, tmp_path, env=env)
    env_line, cwd_line = result.stdout.split("\n")
    assert json.loads(env_line) == env
    assert Path(cwd_line).resolve() == tmp_path.resolve()


def test_non_zero_exit_and_stderr(tmp_path: Path) -> None:
    code = "import sys; print('out'); sys.stderr.write('bad thing\\n'); sys.exit(3)"
    result, events = _spawn(code, tmp_path)
    assert (result.exit_code, result.signal) == (3, None)
    assert result.stderr == "bad thing\n"
    assert events == [
        AgentEvent(kind="stdout", line="out"),
        AgentEvent(kind="exit", exit_code=3),
    ]


def test_large_stderr_does_not_deadlock(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.stderr.write('e' * 2_000_000)\n"
        "for i in range(1000): print(i)\n"
        "sys.stderr.write('end')\n"
    )
    result, events = _spawn(code, tmp_path, timeout_ms=60_000)
    assert result.exit_code == 0
    assert result.stderr == "e" * 2_000_000 + "end"
    assert len(_stdout_lines(events)) == 1000


def test_missing_binary_is_exit_127_with_an_error_event(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-agent")
    result, events = _spawn("", tmp_path, command=missing)
    assert (result.exit_code, result.signal, result.stdout) == (127, None, "")
    assert missing in result.stderr
    assert [e.kind for e in events] == ["error", "exit"]
    assert events[0].message == result.stderr
    assert events[1].exit_code == 127


def test_non_executable_binary_is_exit_127(tmp_path: Path) -> None:
    script = tmp_path / "agent"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    result, events = _spawn("", tmp_path, command=str(script))
    assert result.exit_code == 127
    assert events[0].kind == "error"


def test_killed_by_a_signal_reports_the_signal(tmp_path: Path) -> None:
    code = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    result, events = _spawn(code, tmp_path)
    assert (result.exit_code, result.signal) == (None, "SIGKILL")
    assert events[-1] == AgentEvent(kind="exit", exit_code=None)


def test_timeout_sends_sigterm_to_a_child_that_honours_it(tmp_path: Path) -> None:
    code = (
        "import sys, time\n"
        "print('working', flush=True)\n"
        "sys.stderr.write('busy')\n"  # no newline: the timeout note must start on its own line
        "sys.stderr.flush()\n"
        "time.sleep(30)\n"
    )
    started = time.monotonic()
    result, events = _spawn(code, tmp_path, timeout_ms=1000, kill_grace_s=5)
    assert (result.exit_code, result.signal) == (None, "SIGTERM")
    assert result.stdout == "working"
    assert result.stderr == "busy\npairbot: agent timed out after 1000 ms; sent SIGTERM\n"
    assert "SIGKILL" not in result.stderr
    assert [e.kind for e in events] == ["stdout", "error", "exit"]
    assert time.monotonic() - started < 20  # loose: the SIGTERM, not the sleep, ended it


def test_timeout_sigkills_a_child_that_ignores_sigterm(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    code = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        # A grandchild in the same group that also ignores SIGTERM must not outlive the run.
        "child = subprocess.Popen([sys.executable, '-c', "
        "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(30)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "print('ignoring', flush=True)\n"
        "time.sleep(30)\n"
    )
    result, _ = _spawn(code, tmp_path, timeout_ms=1500, kill_grace_s=0.2)
    assert (result.exit_code, result.signal) == (None, "SIGKILL")
    assert result.stdout == "ignoring"
    assert "timed out after 1500 ms; sent SIGTERM, then SIGKILL after 0.2 s grace" in (
        result.stderr
    )
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie only awaits reaping


def test_a_raising_event_sink_stops_the_agent(tmp_path: Path) -> None:
    pid_file = tmp_path / "agent.pid"
    code = (
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "print('first', flush=True)\n"
        "time.sleep(30)\n"
    )

    class SinkError(Exception):
        pass

    def sink(event: AgentEvent) -> None:
        raise SinkError

    request = AgentSpawnRequest(
        command=sys.executable,
        args=("-c", code),
        instructions="",
        cwd=str(tmp_path),
        env=BASE_ENV,
        timeout_ms=30_000,
    )
    try:
        asyncio.run(ProcessRuntime().spawn(request, sink))
    except SinkError:
        pass
    else:  # pragma: no cover - the assertion below explains
        raise AssertionError("the sink's error should propagate")
    assert not _alive(int(pid_file.read_text()))


def test_runtime_environment_is_not_inherited(tmp_path: Path) -> None:
    assert "PATH" in os.environ  # the parent has one ...
    result, _ = _spawn("import os; print('PATH' in os.environ)", tmp_path)
    assert result.stdout == "False"  # ... and the child does not


def test_signal_names() -> None:
    assert signal_name(-15) == "SIGTERM"
    assert signal_name(-9) == "SIGKILL"
    assert signal_name(-1000) == "SIG1000"  # no such signal: still a readable name
