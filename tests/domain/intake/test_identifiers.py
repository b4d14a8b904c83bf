"""The identifiers a delivery may carry (app.domain.intake.identifiers): the hosts' own rules,
never narrower than what a host really sends, and one bounded line for what is refused."""

from __future__ import annotations

from typing import Any

import pytest

from app.domain.intake.identifiers import (
    azure_invalid,
    azure_name_problem,
    full_name_problem,
    github_invalid,
    sha_problem,
)


@pytest.mark.parametrize(
    "name",
    [
        "octocat/Hello-World",
        "a/b",
        "my_org-1/repo.name_2",
        "o" * 100 + "/" + "r" * 100,
        "x/.github",
    ],
)
def test_real_full_names_pass(name: str) -> None:
    assert full_name_problem(name, "repository.full_name") is None


@pytest.mark.parametrize(
    "name",
    [
        "../../etc",
        "a/b/c",
        "",
        "a",
        "a/",
        "/b",
        "a/..",
        "a/.",
        "-a/b",
        "_a/b",
        "a b/c",
        "a/b\n",
        "a/b\u202e",
        "o" * 101 + "/r",
        "o/" + "r" * 101,
        None,
        5,
    ],
)
def test_hostile_full_names_are_refused_in_one_bounded_line(name: Any) -> None:
    problem = full_name_problem(name, "repository.full_name")
    assert problem is not None and problem.startswith("repository.full_name")
    assert "allowed: owner/name" in problem and "\n" not in problem and len(problem) < 300


def test_commits_are_sha1_or_sha256_hex() -> None:
    assert sha_problem("0" * 40, "sha") is None and sha_problem("f" * 64, "sha") is None
    for bad in ("0" * 39, "0" * 63, "0" * 65, "F" * 40, "main", "", None):
        assert sha_problem(bad, "sha") is not None


@pytest.mark.parametrize("name", ["Fabrikam", "Fabrikam Fiber", "My-Project.2", "café", "a"])
def test_real_azure_names_pass(name: str) -> None:
    assert azure_name_problem(name, "project") is None


@pytest.mark.parametrize(
    "name", ["a/b", "..", "a..b", "_a", ".a", "a.", "a\\b", "a:b", "a\x00", "a\x85", "", "x" * 65]
)
def test_hostile_azure_names_are_refused(name: str) -> None:
    problem = azure_name_problem(name, "project")
    assert problem is not None and "allowed: 1-64 characters" in problem and "\n" not in problem


def test_absent_fields_are_left_to_the_routing_and_present_ones_checked() -> None:
    assert github_invalid("issue_comment", {}) is None
    assert github_invalid("ping", {"installation": None, "repository": None}) is None
    invalid = github_invalid("issue_comment", {"installation": {"id": -3}})
    assert invalid is not None and invalid.field == "installation.id"
    assert invalid.reason == "issue_comment: installation.id must be a positive integer, got -3"
    assert azure_invalid({"eventType": "git.push", "resource": {"id": -1}}) is None
    refused = azure_invalid({"eventType": "workitem.commented", "resource": {"workItemId": 0}})
    assert refused is not None and refused.field == "resource.workItemId"
