"""The permissions translator: the table for every agent and posture, deny union, raw."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.runtime.permissions import (
    BASELINE_DENY,
    WarnOnce,
    effective_deny,
    permission_warning,
    resolve_permission_flags,
)
from app.settings import (
    POSTURES,
    PermissionsSettings,
    Posture,
    ResolvedPermissions,
    merge_permissions,
)

ROOT = "/work/repo"
# What every bounded claude posture lets a step do besides the operator's list: pairbot's report
# command (pairbot named as the agent runs it; the default is the bare name) and, curated,
# edits in the working tree.
REPORT = "Bash(pairbot batch report:*)"
EDITS = "Edit(//work/repo/**)"

# Spelled out, not imported, so a typo in the module cannot hide behind the test.
BASELINE = (
    "Bash(rm -rf *)",
    "Bash(sudo *)",
    "Bash(* > /*)",
    "Bash(curl * | sh)",
    "Bash(curl * | bash)",
    "Bash(wget * | sh)",
    "Bash(wget * | bash)",
)


def policy(
    posture: Posture,
    allow: Sequence[str] = (),
    deny: Sequence[str] = (),
    raw: Mapping[str, Sequence[str]] | None = None,
) -> ResolvedPermissions:
    return ResolvedPermissions(
        posture=posture,
        allow=tuple(allow),
        deny=tuple(deny),
        raw=MappingProxyType({agent: tuple(v) for agent, v in (raw or {}).items()}),
    )


def test_baseline_is_the_seeds_seven_patterns() -> None:
    assert BASELINE_DENY == BASELINE


SEED_TABLE = [
    # claude
    pytest.param(
        "claude",
        "repo-sandboxed-permissive",
        (
            "--permission-mode", "acceptEdits", "--permission-prompts", "none",
            "--add-dir", ROOT, "--allowedTools", "Bash",
            "--disallowedTools", *BASELINE,
        ),
        id="claude-sandboxed",
    ),
    pytest.param(
        "claude",
        "curated-allowlist",
        ("--permission-mode", "manual", "--permission-prompts", "none",
         "--allowedTools", EDITS, REPORT, "--disallowedTools", *BASELINE),
        id="claude-curated",
    ),
    pytest.param(
        "claude", "full-autonomy", ("--permission-mode", "bypassPermissions"), id="claude-full"
    ),
    # gemini
    pytest.param(
        "gemini",
        "repo-sandboxed-permissive",
        ("--approval-mode", "auto_edit"),
        id="gemini-sandboxed",
    ),
    pytest.param(
        "gemini", "curated-allowlist", ("--approval-mode", "default"), id="gemini-curated"
    ),
    pytest.param("gemini", "full-autonomy", ("--approval-mode", "yolo"), id="gemini-full"),
    # codex
    pytest.param(
        "codex",
        "repo-sandboxed-permissive",
        ("--sandbox", "workspace-write"),
        id="codex-sandboxed",
    ),
    pytest.param(
        "codex",
        "curated-allowlist",
        ("--sandbox", "workspace-write"),
        id="codex-curated",
    ),
    pytest.param(
        "codex", "full-autonomy", ("--dangerously-bypass-approvals-and-sandbox",), id="codex-full"
    ),
    # cursor
    pytest.param("cursor", "repo-sandboxed-permissive", (), id="cursor-sandboxed"),
    pytest.param("cursor", "curated-allowlist", (), id="cursor-curated"),
    pytest.param("cursor", "full-autonomy", ("--force",), id="cursor-full"),
    # opencode
    pytest.param("opencode", "repo-sandboxed-permissive", (), id="opencode-sandboxed"),
    pytest.param("opencode", "curated-allowlist", (), id="opencode-curated"),
    pytest.param(
        "opencode", "full-autonomy", ("--auto",), id="opencode-full"
    ),
]  # fmt: skip


@pytest.mark.parametrize(("agent", "posture", "expected"), SEED_TABLE)
def test_seed_table_with_an_empty_policy(
    agent: str, posture: Posture, expected: tuple[str, ...]
) -> None:
    assert resolve_permission_flags(agent, policy(posture), ROOT) == expected


ALLOW = ("Read", "Bash(npm test:*)")
# One operator entry repeats a baseline pattern: it appears once, in the operator's position.
DENY = ("WebFetch", "Bash(sudo *)")
UNION = ("WebFetch", "Bash(sudo *)", *(p for p in BASELINE if p != "Bash(sudo *)"))


@pytest.mark.parametrize(
    ("posture", "expected"),
    [
        pytest.param(
            "repo-sandboxed-permissive",
            (
                "--permission-mode", "acceptEdits", "--permission-prompts", "none",
                "--add-dir", ROOT, "--allowedTools", *ALLOW, REPORT,
                "--disallowedTools", *UNION,
            ),
            id="sandboxed-allow-replaces-bash",
        ),
        pytest.param(
            "curated-allowlist",
            (
                "--permission-mode", "manual", "--permission-prompts", "none",
                "--allowedTools", *ALLOW, EDITS, REPORT,
                "--disallowedTools", *UNION,
            ),
            id="curated",
        ),
        pytest.param(
            "full-autonomy", ("--permission-mode", "bypassPermissions"), id="full-ignores-lists"
        ),
    ],
)  # fmt: skip
def test_claude_with_allow_and_deny(posture: Posture, expected: tuple[str, ...]) -> None:
    assert resolve_permission_flags("claude", policy(posture, ALLOW, DENY), ROOT) == expected


@pytest.mark.parametrize("agent", ["gemini", "codex", "cursor", "opencode"])
@pytest.mark.parametrize("posture", POSTURES)
def test_only_claude_takes_allow_and_deny_on_argv(agent: str, posture: Posture) -> None:
    assert resolve_permission_flags(agent, policy(posture, ALLOW, DENY), ROOT) == (
        resolve_permission_flags(agent, policy(posture), ROOT)
    )


@pytest.mark.parametrize(
    ("posture", "expected"),
    [
        pytest.param("repo-sandboxed-permissive", UNION, id="sandboxed"),
        pytest.param("curated-allowlist", UNION, id="curated"),
        pytest.param("full-autonomy", (), id="full-autonomy"),
    ],
)
def test_effective_deny_is_policy_union_baseline(
    posture: Posture, expected: tuple[str, ...]
) -> None:
    assert effective_deny(policy(posture, deny=DENY)) == expected


def test_deny_merged_across_scopes_keeps_every_scope_and_the_baseline() -> None:
    merged = merge_permissions(
        [
            PermissionsSettings(deny=["Bash(git push *)"]),
            None,
            PermissionsSettings(posture="curated-allowlist", deny=["WebFetch"]),
        ]
    )
    assert resolve_permission_flags("claude", merged, ROOT) == (
        "--permission-mode",
        "manual",
        "--permission-prompts",
        "none",
        "--allowedTools",
        EDITS,
        REPORT,
        "--disallowedTools",
        "Bash(git push *)",
        "WebFetch",
        *BASELINE,
    )


RAW = {"claude": ["--max-turns", "5"], "codex": ["-c", "model_reasoning_effort=high"]}


@pytest.mark.parametrize(
    ("agent", "posture", "expected"),
    [
        pytest.param(
            "claude",
            "full-autonomy",
            ("--permission-mode", "bypassPermissions", "--max-turns", "5"),
            id="claude-raw-after-posture",
        ),
        pytest.param(
            "codex",
            "repo-sandboxed-permissive",
            (
                "--sandbox",
                "workspace-write",
                "-c",
                "model_reasoning_effort=high",
            ),
            id="codex-raw-after-posture",
        ),
        pytest.param(
            "gemini", "full-autonomy", ("--approval-mode", "yolo"), id="others-raw-ignored"
        ),
        pytest.param("cursor", "curated-allowlist", (), id="cursor-no-raw"),
    ],
)
def test_raw_is_appended_only_for_its_agent(
    agent: str, posture: Posture, expected: tuple[str, ...]
) -> None:
    assert resolve_permission_flags(agent, policy(posture, raw=RAW), ROOT) == expected


@pytest.mark.parametrize("posture", POSTURES)
def test_unknown_agent_gets_only_its_raw_entry(posture: Posture) -> None:
    raw = {**RAW, "command": ["--fast"]}
    assert resolve_permission_flags("command", policy(posture, ALLOW, DENY, raw), ROOT) == (
        "--fast",
    )
    assert resolve_permission_flags("aider", policy(posture, ALLOW, DENY, raw), ROOT) == ()


patterns = st.lists(st.text(min_size=1, max_size=12), max_size=5)


@given(
    agent=st.sampled_from(["claude", "codex", "gemini", "cursor", "opencode", "command"]),
    posture=st.sampled_from(POSTURES),
    allow=patterns,
    deny=patterns,
    raw=patterns,
)
def test_property_raw_is_the_suffix_and_claude_denies_the_union(
    agent: str, posture: Posture, allow: list[str], deny: list[str], raw: list[str]
) -> None:
    flags = resolve_permission_flags(agent, policy(posture, allow, deny, {agent: raw}), ROOT)
    assert flags[len(flags) - len(raw) :] == tuple(raw)
    if agent == "claude" and posture != "full-autonomy":
        start = flags.index("--disallowedTools") + 1
        assert set(flags[start : len(flags) - len(raw)]) == {*deny, *BASELINE}


@pytest.mark.parametrize("agent", ["cursor"])
@pytest.mark.parametrize("posture", ["repo-sandboxed-permissive", "curated-allowlist"])
def test_gated_agents_warn_under_bounded_postures(agent: str, posture: Posture) -> None:
    text = permission_warning(agent, posture)
    assert text is not None
    assert agent in text
    assert posture in text
    assert "full-autonomy" in text


@pytest.mark.parametrize(
    ("agent", "posture"),
    [
        pytest.param("cursor", "full-autonomy", id="cursor-full"),
        pytest.param("opencode", "full-autonomy", id="opencode-full"),
        # Bounded by the permission map app/runtime/rules/opencode.py ships.
        pytest.param("opencode", "curated-allowlist", id="opencode-curated"),
        pytest.param("claude", "repo-sandboxed-permissive", id="claude"),
        pytest.param("gemini", "curated-allowlist", id="gemini"),
        pytest.param("codex", "repo-sandboxed-permissive", id="codex"),
        pytest.param("command", "repo-sandboxed-permissive", id="command"),
    ],
)
def test_no_warning_otherwise(agent: str, posture: Posture) -> None:
    assert permission_warning(agent, posture) is None


def test_warn_once_per_agent() -> None:
    warn = WarnOnce()
    # A posture that needs no warning does not use up the agent's one warning.
    assert warn("cursor", "full-autonomy") is None
    first = warn("cursor", "repo-sandboxed-permissive")
    assert first == permission_warning("cursor", "repo-sandboxed-permissive")
    assert warn("cursor", "repo-sandboxed-permissive") is None
    assert warn("cursor", "curated-allowlist") is None
    assert warn("opencode", "curated-allowlist") is None
    assert warn("claude", "curated-allowlist") is None
    # Another process (another registry) warns again.
    assert WarnOnce()("cursor", "repo-sandboxed-permissive") == first


def _docs_posture_table() -> dict[str, list[str]]:
    """docs/runtime.md's posture table: agent -> its three cells, in POSTURES order."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "runtime.md").read_text()
    section = text.split("## Permission postures", 1)[1]
    table = next(part for part in section.split("\n\n") if part.startswith("| agent |"))
    rows: dict[str, list[str]] = {}
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`") and cells[0] != "`command`":
            rows[cells[0].strip("`")] = cells[1:]
    return rows


@pytest.mark.parametrize("agent", ["gemini", "codex", "cursor", "opencode", "claude"])
def test_the_docs_table_matches_the_code(agent: str) -> None:
    header = ["repo-sandboxed-permissive", "curated-allowlist", "full-autonomy"]
    assert list(POSTURES) == header
    for posture, cell in zip(header, _docs_posture_table()[agent], strict=True):
        flags = resolve_permission_flags(agent, policy(posture), ROOT)
        if not flags:
            assert cell.startswith("none")
        elif agent == "claude":
            # claude's cells carry placeholders; the fixed flags lead them.
            ends = [flags.index(f) for f in ("--add-dir", "--allowedTools") if f in flags]
            fixed = " ".join(flags[: min(ends)] if ends else flags)
            assert cell.strip("`").startswith(fixed)
        else:
            # What rules/ adds for a bounded posture follows the flags in the cell.
            assert cell.startswith(f"`{' '.join(flags)}`")


def test_the_report_rule_names_pairbot_as_the_prompt_quotes_it() -> None:
    # A path with a space is quoted in the prompt's report lines; the rule must match them.
    curated = policy("curated-allowlist")
    flags = resolve_permission_flags("claude", curated, ROOT, "/opt/my env/pairbot")
    assert "Bash('/opt/my env/pairbot' batch report:*)" in flags


def test_an_operator_list_with_bash_gets_no_second_report_rule() -> None:
    flags = resolve_permission_flags("claude", policy("repo-sandboxed-permissive", ("Bash",)), ROOT)
    assert not [f for f in flags if "batch report" in f]
