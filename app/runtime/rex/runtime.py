"""`RexRuntime`: one agent per `spawn` through a swerex runtime at a locus (loci.py).

`spawn` connects (the locus's `connect`), makes a private run directory, writes the prompt,
the environment script and the launcher into it and starts the agent (protocol.py's steps 1
and 2), then follows it (follow.py) to its end. `spawn_with_rules` does the same after writing
the step's rule files into the run directory (rulefiles.py), the agent pointed at them.
Whatever fails becomes a `RexError` (errors.py) and then an `error` event plus a non-zero
result, never an exception; a run left behind by a failure or a cancellation is stopped and
removed (its rule files with it), and the connection is always released.
"""

from __future__ import annotations

import base64
import dataclasses
import uuid
from pathlib import PurePosixPath

from app.engine.agent import AgentSpawnRequest, AgentSpawnResult, EventSink, RunAs
from app.proc import START_FAILURE_EXIT_CODE
from app.runtime.rex.connection import DEFAULT_REQUEST_TIMEOUT_S, RexConnection
from app.runtime.rex.errors import RexError
from app.runtime.rex.follow import (
    DEFAULT_KILL_GRACE_S,
    DEFAULT_LOST_CONTACT_S,
    DEFAULT_POLL_INTERVAL_S,
    DEFAULT_START_TIMEOUT_S,
    Collector,
    Pace,
    RunDir,
    follow,
    redactor,
)
from app.runtime.rex.loci import RexLocus
from app.runtime.rex.protocol import launch_command, launcher_script
from app.runtime.rex.rulefiles import write_rules
from app.runtime.rules import RulesFor
from app.settings import Locus

__all__ = ["RexRuntime"]


class RexRuntime:
    """Runs one agent per `spawn` through a swerex runtime at `locus` (see module docstring)."""

    def __init__(
        self,
        locus: RexLocus,
        *,
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
        kill_grace_s: float = DEFAULT_KILL_GRACE_S,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        lost_contact_s: float = DEFAULT_LOST_CONTACT_S,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
    ) -> None:
        self._locus = locus
        self._poll_interval_s = poll_interval_s
        self._request_timeout_s = request_timeout_s
        self._pace = Pace(poll_interval_s, kill_grace_s, lost_contact_s, start_timeout_s)

    @property
    def locus(self) -> Locus:
        """Where this runtime runs agents."""
        return self._locus.name

    async def spawn(self, request: AgentSpawnRequest, on_event: EventSink) -> AgentSpawnResult:
        """Start the agent, stream its stdout lines to `on_event`, and return how it ended."""
        return await self.spawn_with_rules(request, None, on_event)

    async def spawn_with_rules(
        self, request: AgentSpawnRequest, rules_for: RulesFor | None, on_event: EventSink
    ) -> AgentSpawnResult:
        """`spawn`, the agent given the rules `rules_for` makes for a directory on its side,
        their files written there first (a write that fails: the agent never starts)."""
        events = Collector(on_event, redactor(self._locus.secret))
        run_id = uuid.uuid4().hex[:12]
        connection: RexConnection | None = None
        run: RunDir | None = None
        try:
            cwd = self._locus.agent_cwd(request.cwd)
            connection = await self._connect(run_id)
            run = await self._make_run_dir(connection, request.run_as)
            if rules_for is not None:
                rules = await write_rules(run, rules_for)
                request = dataclasses.replace(
                    request, args=(*request.args, *rules.args), env={**request.env, **rules.env}
                )
            await self._launch(run, request, cwd)
            return await follow(run, request, events, self._pace)
        except RexError as err:
            return self._failed(err, events)
        finally:
            if connection is not None:
                if run is not None and not run.swept:
                    await run.abandon()
                await connection.release()

    async def _connect(self, run_id: str) -> RexConnection:
        try:
            return await self._locus.connect(run_id)
        except RexError:
            raise
        except Exception as exc:  # a failure swerex did not fold into a response
            raise RexError(f"could not start the {self._locus.name} runtime: {exc}") from None

    def _failed(self, err: RexError, events: Collector) -> AgentSpawnResult:
        exit_code = 1 if err.started else START_FAILURE_EXIT_CODE
        message = events.redact(f"pairbot: {err}")
        events.error(message)
        events.exit(exit_code)
        return AgentSpawnResult(
            exit_code=exit_code, signal=None, stdout="\n".join(events.lines), stderr=message + "\n"
        )

    async def _make_run_dir(self, connection: RexConnection, run_as: RunAs | None) -> RunDir:
        # mktemp: a fresh 0700 directory, so the env file is private before it is even written.
        # Another OS user cannot reach pairbot's own TMPDIR (often private): /tmp it is.
        parent = "/tmp" if run_as is not None else "${TMPDIR:-/tmp}"  # noqa: S108
        made = await connection.execute(
            "create the run directory",
            f'mktemp -d "{parent}/pairbot-run-XXXXXXXXXX"',
            self._request_timeout_s,
        )
        run_dir = made.stdout.strip()
        if not PurePosixPath(run_dir).is_absolute():
            raise RexError(f"could not create the run directory: mktemp printed {run_dir!r}")
        return RunDir(connection, run_dir, run_as, self._request_timeout_s)

    async def _launch(self, run: RunDir, request: AgentSpawnRequest, cwd: str) -> None:
        timeout = self._request_timeout_s
        contain = request.contain(run.path) if request.contain is not None else ()
        files = {
            "prompt": request.instructions,
            "env": self._locus.agent_env(request.env),
            "run": launcher_script(
                run.path, cwd, (request.command, *request.args), record_group=contain == ()
            ),
        }
        for name, text in files.items():
            encoded = base64.b64encode(text.encode("utf-8")).decode("ascii")
            await run.connection.write_file(
                f"write the agent's {name} file", f"{run.path}/{name}.b64", encoded, timeout
            )
        script = launch_command(
            run.path, isolated_env=self._locus.isolated_env, run_as=run.run_as, contain=contain
        )
        await run.connection.execute("start the agent", script, timeout)
