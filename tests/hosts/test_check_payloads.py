"""How each adapter reads another service's check into a `HeadCheck` (pure translation)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from hosts.azure_devops import convert
from hosts.github import payloads


@pytest.mark.parametrize(
    ("run", "state", "summary"),
    [
        pytest.param({"status": "queued"}, "pending", "", id="queued"),
        pytest.param(
            {"status": "completed", "conclusion": "success", "output": {"summary": "all good"}},
            "success",
            "all good",
            id="success-summary-when-no-title",
        ),
        pytest.param({"status": "completed", "conclusion": "skipped"}, "skipped", "", id="skip"),
        pytest.param(
            {"status": "completed", "conclusion": "action_required", "output": None},
            "failure",
            "",
            id="anything-else-fails",
        ),
    ],
)
def test_github_check_runs(run: dict[str, Any], state: str, summary: str) -> None:
    check = payloads.check_run({"name": "ci", **run}, frozenset({"ci"}))
    assert (check.state, check.summary, check.required, check.source) == (
        state,
        summary,
        True,
        "check-run",
    )


def test_github_required_checks_read_contexts_and_checks() -> None:
    data = {"contexts": ["a", 3], "checks": [{"context": "b", "app_id": 1}, "junk", {}]}
    assert payloads.required_checks(data) == frozenset({"a", "b"})
    assert payloads.required_checks({}) == frozenset()


def _record(status: str, **config: Any) -> SimpleNamespace:
    settings = config.pop("settings", {"displayName": "CI", "buildDefinitionId": 3})
    return SimpleNamespace(
        status=status,
        context=config.pop("context", {"buildId": 7}),
        configuration=SimpleNamespace(
            type=SimpleNamespace(id=config.pop("kind", convert.BUILD_POLICY_TYPE)),
            is_enabled=config.pop("enabled", True),
            is_blocking=config.pop("blocking", True),
            settings=settings,
        ),
    )


def test_azure_build_policy_evaluations() -> None:
    web = "https://dev.azure.com/o/p"
    check = convert.build_check(_record("broken"), web)
    assert check is not None
    assert (check.name, check.state, check.required, check.url) == (
        "CI",
        "failure",
        True,
        f"{web}/_build/results?buildId=7",
    )
    assert convert.build_check(_record("approved", enabled=False), web) is None
    assert convert.build_check(_record("approved", kind="other"), web) is None
    unnamed = convert.build_check(
        _record("notApplicable", settings={"buildDefinitionId": 9}, context=None), web
    )
    assert unnamed is not None
    assert (unnamed.name, unnamed.state, unnamed.url) == ("build 9", "skipped", "")
    expired = convert.build_check(_record("approved", context={"isExpired": True}), web)
    assert expired is not None and expired.state == "pending"
    weird = convert.build_check(_record("mystery"), web)
    assert weird is not None and weird.state == "failure"
