"""Shared fixtures: real git projects in temp dirs, driven by the scripted agent.

`make_project` writes `.pair/config.yaml` (agent `command` running tests/support/scripted_agent.py
with this interpreter), one batch manifest and an optional agent script, and commits it all in
a real git repository. What tests do with the project (`apply_once`, `cli`, `agent_env`) is in
tests/support/project.py: a conftest is pytest's to load, not a module to import.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, settings

from tests.support.git import init_repo
from tests.support.project import AGENT_COMMAND, ONE_PHASE, Project

# Hypothesis' deadline and its "too slow" health check are wall-clock assertions: the suite runs
# with -n auto on two cores beside npm-installed CLIs and browsers, where a slow example is load,
# not a defect. The properties still run every example; only the timing verdicts are off.
settings.register_profile("pairbot", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("pairbot")

SLOW_FIRST = "slow_first"
_OWN_BASETEMP = pytest.StashKey[Path]()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    _own_basetemp(config)
    config.addinivalue_line(
        "markers",
        f"{SLOW_FIRST}(seconds): a long test, started before the short ones; `seconds` is a rough"
        " idle duration on two cores, to start the longest first",
    )


def _own_basetemp(config: pytest.Config) -> None:
    """A base temp directory of this session's own, unless one was given (xdist hands its
    workers theirs, under the controller's).

    pytest's default, /tmp/pytest-of-<user>, is shared by every session of the user, and each
    new session strips its group and other bits. Under the product's defaults the agent user
    reaches a test's files through an ACL entry pairbot puts on each closed directory above
    them (`setfacl -m u:pairbot-agent:x`, app/runtime/isolation.py), that one included;
    stripping the group bits zeroes the ACL's mask, so another session starting (another run,
    a helper's test) while an agent works fails the agent with EACCES. A directory of our own
    is touched by no other session.
    """
    if config.option.basetemp is not None or hasattr(config, "workerinput"):
        return
    config.option.basetemp = tempfile.mkdtemp(prefix="pytest-pairbot-")  # pytest makes it 0700
    config.stash[_OWN_BASETEMP] = Path(config.option.basetemp)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Remove this session's own base temp directory once every test passed; a failed run
    keeps it to look at."""
    own = session.config.stash.get(_OWN_BASETEMP, None)
    if own is not None and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        shutil.rmtree(own, ignore_errors=True)


def _start_order(item: pytest.Item) -> tuple[int, float]:
    """Longest first: `slow_first` tests by their rough seconds, then `slow` ones, then the rest.

    xdist's `loadgroup` hands tests out in collection order (ungrouped tests are one unit each,
    and units of equal size keep their order), so a long test collected last starts last and
    leaves one worker running it alone while the other idles. Starting the long ones first lets
    the many short tests fill in around them. The sort is stable and the same on every worker,
    as xdist requires. Moving a test away from its module's others sets a module-scoped fixture
    up twice: mark whole modules (`pytestmark`) that have one.
    """
    marker = item.get_closest_marker(SLOW_FIRST)
    if marker is not None:
        return (0, -float(marker.args[0]) if marker.args else 0.0)
    return (1 if item.get_closest_marker("slow") is not None else 2, 0.0)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_start_order)


def build_project(
    root: Path,
    manifest: Mapping[str, Any] | None = None,
    *,
    batch: str = "demo",
    config: Mapping[str, Any] | None = None,
    script: Mapping[str, list[str]] | None = None,
) -> Project:
    """What `make_project` makes, at `root`."""
    (root / ".pair" / "batches" / batch).mkdir(parents=True)
    base_config: dict[str, Any] = {
        "batch": {
            "agent": "command",
            "agentCommand": list(AGENT_COMMAND),
            "agentTimeoutMs": 60_000,
        }
    }
    extra = dict(config or {})
    base_config["batch"].update(extra.pop("batch", {}))  # merged: keeps the scripted agent
    base_config.update(extra)
    (root / ".pair" / "config.yaml").write_text(yaml.safe_dump(base_config))
    (root / ".pair" / "batches" / batch / "batch.yaml").write_text(
        yaml.safe_dump(dict(manifest or ONE_PHASE), sort_keys=False)
    )
    init_repo(root)
    project = Project(root=root, batch=batch)
    if script is not None:
        project.script(script)
    return project


@pytest.fixture
def make_project(tmp_path: Path) -> Callable[..., Project]:
    """A project at `tmp_path / "repo"` (see the module's docstring)."""

    def make(
        manifest: Mapping[str, Any] | None = None,
        *,
        batch: str = "demo",
        config: Mapping[str, Any] | None = None,
        script: Mapping[str, list[str]] | None = None,
    ) -> Project:
        return build_project(tmp_path / "repo", manifest, batch=batch, config=config, script=script)

    return make


@pytest.fixture(scope="session")
def project_builder() -> Callable[..., Project]:
    """`build(root, manifest=None, *, batch="demo", config=None, script=None)`: what
    `make_project` makes, at any `root`, for a fixture of a wider scope that builds a project
    once and hands each test a copy."""
    return build_project


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another OS user (the agent's, a posture's) can reach: pytest's own tmp is
    private to the user running the suite."""
    path = Path(tempfile.mkdtemp(prefix="pairbot-shared-test-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
