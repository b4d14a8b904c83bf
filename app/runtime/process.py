"""The plain local process locus: run one agent as a child process of pairbot.

`ProcessRuntime` implements the `AgentRuntime` seam (app/engine/agent.py) without SWE-ReX: it
starts the agent's argv directly, feeds the instructions on stdin, streams complete stdout lines
as events, and applies the per-agent timeout (SIGTERM to the process group, then SIGKILL after a
grace). The SWE-ReX loci (local, docker, remote) arrive later and share this contract: a start
failure or a timeout is a result with the message in `stderr`, never an exception.

Stopping the process group, naming signals and draining pipes come from `app.proc`, the leaf
module the proof-of-work runner shares. What a timed-out step says (`timeout_note`) is written
here once and used by the SWE-ReX loci too (app/runtime/rex/follow.py).
"""

from __future__ import annotations

import asyncio
import codecs
import signal
from collections.abc import Callable

from app.engine.agent import AgentEvent, AgentSpawnRequest, AgentSpawnResult, EventSink
from app.proc import START_FAILURE_EXIT_CODE, read_into, signal_name, terminate_process_group

_CHUNK_BYTES = 64 * 1024


async def _stream_lines(stream: asyncio.StreamReader, emit: Callable[[str], None]) -> None:
    # StreamReader.readline() fails on lines over its 64 KiB limit and agents print long JSON
    # lines, so split chunks ourselves. The incremental decoder keeps a multi-byte character that
    # straddles two chunks intact.
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    partial: list[str] = []
    while chunk := await stream.read(_CHUNK_BYTES):
        *complete, tail = decoder.decode(chunk).split("\n")
        if complete:
            emit("".join([*partial, complete[0]]))
            for line in complete[1:]:
                emit(line)
            partial = []
        if tail:
            partial.append(tail)
    partial.append(decoder.decode(b"", final=True))
    last = "".join(partial)
    if last:
        emit(last)


async def _feed_stdin(stdin: asyncio.StreamWriter, text: str) -> None:
    try:
        stdin.write(text.encode("utf-8"))
        await stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # The agent exited or closed stdin unread; its exit status tells the story.
    finally:
        stdin.close()


class ProcessRuntime:
    """Runs the agent as a local child process in its own session (process group)."""

    def __init__(self, *, kill_grace_s: float = 2.0) -> None:
        self._kill_grace_s = kill_grace_s

    async def spawn(self, request: AgentSpawnRequest, on_event: EventSink) -> AgentSpawnResult:
        """Start the agent, stream its stdout lines to `on_event`, and return how it ended."""
        try:
            proc = await _start(request)
        except OSError as exc:  # missing binary, not executable, bad cwd, exec format error
            return _start_failure(request, exc, on_event)

        lines: list[str] = []

        def emit_line(line: str) -> None:
            lines.append(line)
            on_event(AgentEvent(kind="stdout", line=line))

        stderr_bytes = bytearray()
        sent = await self._follow(proc, request, emit_line, stderr_bytes)
        stderr_text = stderr_bytes.decode("utf-8", errors="replace")
        returncode = proc.returncode
        exit_code: int | None
        if sent is not None:
            exit_code, ended_by = None, sent
            note = timeout_note(request.timeout_ms, sent, self._kill_grace_s)
            on_event(AgentEvent(kind="error", message=note))
            stderr_text = add_line(stderr_text, note)
        elif returncode is not None and returncode < 0:
            exit_code, ended_by = None, signal_name(returncode)
        else:
            exit_code, ended_by = returncode, None

        on_event(AgentEvent(kind="exit", exit_code=exit_code))
        return AgentSpawnResult(
            exit_code=exit_code, signal=ended_by, stdout="\n".join(lines), stderr=stderr_text
        )

    async def _follow(
        self,
        proc: asyncio.subprocess.Process,
        request: AgentSpawnRequest,
        emit_line: Callable[[str], None],
        stderr_bytes: bytearray,
    ) -> str | None:
        """Feed stdin, stream stdout, drain stderr until the agent ends or times out; the
        signal the timeout sent (None: it ended by itself). The group is gone afterwards."""
        stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr
        if stdin is None or stdout is None or stderr is None:  # pragma: no cover - PIPE sets all
            raise RuntimeError("asyncio returned a subprocess without the requested pipes")
        writer = asyncio.create_task(_feed_stdin(stdin, request.instructions))
        # stderr is drained concurrently with stdout: a chatty stderr would otherwise fill its
        # pipe and block the agent while we wait for stdout.
        watched = {
            asyncio.create_task(_stream_lines(stdout, emit_line)),
            asyncio.create_task(read_into(stderr, stderr_bytes)),
            asyncio.create_task(proc.wait()),
        }
        sent: str | None = None
        try:
            done, pending = await asyncio.wait(
                watched,
                timeout=request.timeout_ms / 1000,
                return_when=asyncio.FIRST_EXCEPTION,
            )
            for task in done:
                if (failure := task.exception()) is not None:
                    raise failure  # on_event raised; `finally` stops the agent
            if pending:
                sent = await terminate_process_group(proc, self._kill_grace_s)
                # The dead group closes the pipes, so the readers finish; the bound covers a
                # process that left the group (setsid) and still holds one open.
                await asyncio.wait(watched, timeout=self._kill_grace_s)
        finally:
            if proc.returncode is None:
                await terminate_process_group(proc, 0)
            for task in (*watched, writer):
                task.cancel()
            await asyncio.gather(*watched, writer, return_exceptions=True)
        return sent


async def _start(request: AgentSpawnRequest) -> asyncio.subprocess.Process:
    """The agent's process, in a session of its own; OSError when it cannot start."""
    # As another OS user: setpriv/runuser keep the environment given here (sudo would
    # reset it: this minimal runtime is for root, the SWE-ReX loci handle sudo). In a
    # PID namespace where there is one: nothing the agent detaches outlives it.
    switch = request.run_as.switch if request.run_as is not None else ()
    if request.contain is not None:
        switch = request.contain("")
    return await asyncio.create_subprocess_exec(
        *switch,
        request.command,
        *request.args,
        cwd=request.cwd,
        env=dict(request.env),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )


def _start_failure(
    request: AgentSpawnRequest, exc: OSError, on_event: EventSink
) -> AgentSpawnResult:
    message = (
        f"pairbot: cannot start agent command {request.command!r} in {request.cwd!r}: "
        f"{exc.strerror or exc}"
    )
    on_event(AgentEvent(kind="error", message=message))
    on_event(AgentEvent(kind="exit", exit_code=START_FAILURE_EXIT_CODE))
    return AgentSpawnResult(
        exit_code=START_FAILURE_EXIT_CODE, signal=None, stdout="", stderr=message
    )


def timeout_note(timeout_ms: int, sent: str, kill_grace_s: float) -> str:
    """What a timed-out step says: the timeout, and the signals it took (both runtimes)."""
    note = f"pairbot: agent timed out after {timeout_ms} ms; sent SIGTERM"
    if sent == signal.SIGKILL.name:
        note += f", then SIGKILL after {kill_grace_s:g} s grace"
    return note


def add_line(text: str, line: str) -> str:
    """`text` with `line` appended as a line of its own."""
    if text and not text.endswith("\n"):
        text += "\n"
    return text + line + "\n"
