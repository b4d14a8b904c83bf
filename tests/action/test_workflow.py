"""Workflow-command I/O: outputs, the job summary, masks, groups and the command-free agent log.

The expectations are what the runner parses: the heredoc output format of `GITHUB_OUTPUT`, and
the `::command::data` lines of the log with `%`, CR and LF escaped.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from action.workflow import (
    agent_log,
    append_summary,
    escape_data,
    escape_property,
    group,
    issue_command,
    mask,
    set_outputs,
    stop_commands,
)

# Shaped like a PEM key, not a real one.
KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEpAIBAAKCAQEAnotarealkeynotarealkey\n"
    "c2Vjb25kbGluZW9mdGhlZmFrZWtleQ==\n"
    "-----END RSA PRIVATE KEY-----"
)


def parse_outputs(text: str) -> dict[str, str]:
    """Read a GITHUB_OUTPUT file the way the runner does (heredoc form only)."""
    outputs: dict[str, str] = {}
    lines = iter(text.split("\n"))
    for line in lines:
        if not line:
            continue
        name, delimiter = line.split("<<", 1)
        value: list[str] = []
        for body in lines:
            if body == delimiter:
                break
            value.append(body)
        outputs[name] = "\n".join(value)
    return outputs


def test_outputs_are_written_in_heredoc_form_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "output"
    set_outputs(path, {"status": "advanced", "card": "42", "pr": ""})
    set_outputs(path, {"transition": "verify\nwith a second line"})
    text = path.read_text(encoding="utf-8")
    assert re.fullmatch(r"status<<ghadelimiter_[0-9a-f]{32}", text.split("\n")[0])
    assert parse_outputs(text) == {
        "status": "advanced",
        "card": "42",
        "pr": "",
        "transition": "verify\nwith a second line",
    }


def test_a_value_holding_the_delimiter_gets_another_one(tmp_path: Path) -> None:
    # The value tries to close its own block and forge a second output.
    forged = "done\nEOF\nstatus<<EOF\nmerged"
    draws: Iterator[str] = iter(["EOF", "ghadelimiter_fresh"])
    path = tmp_path / "output"
    set_outputs(path, {"transition": forged}, new_delimiter=lambda: next(draws))
    text = path.read_text(encoding="utf-8")
    assert text == f"transition<<ghadelimiter_fresh\n{forged}\nghadelimiter_fresh\n"
    assert parse_outputs(text) == {"transition": forged}


def test_a_delimiter_that_always_collides_is_an_error_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "output"
    with pytest.raises(ValueError, match="no delimiter found"):
        set_outputs(path, {"a": "x", "b": "EOF"}, new_delimiter=lambda: "EOF")
    assert not path.exists()


@pytest.mark.parametrize("name", ["", "bad name", "a<<b", "x\ny", "1st"])
def test_an_output_name_must_be_an_identifier(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="is not an output name"):
        set_outputs(tmp_path / "output", {name: "v"})


def test_without_an_output_file_nothing_is_written() -> None:
    set_outputs(None, {"status": "advanced"})
    assert append_summary(None, "# summary")


def test_the_summary_is_appended_with_a_newline(tmp_path: Path) -> None:
    path = tmp_path / "summary"
    assert append_summary(path, "## Step")
    assert append_summary(path, "- advanced\n")
    assert path.read_text(encoding="utf-8") == "## Step\n- advanced\n"


def test_an_oversized_summary_is_cut_on_a_character_boundary_with_a_notice(
    tmp_path: Path,
) -> None:
    path = tmp_path / "summary"
    path.write_text("x" * 50, encoding="utf-8")
    assert not append_summary(path, "é" * 100, limit=200)
    data = path.read_bytes()
    assert len(data) <= 200
    text = data.decode("utf-8")  # still valid UTF-8: no split character
    assert text.startswith("x" * 50 + "é")
    assert text.endswith("(truncated by pairbot: the job summary is limited to 1 MiB)\n")


def test_a_full_summary_takes_nothing_more(tmp_path: Path) -> None:
    path = tmp_path / "summary"
    path.write_text("x" * 200, encoding="utf-8")
    assert not append_summary(path, "more", limit=200)
    assert path.read_bytes() == b"x" * 200


def test_escaping_matches_what_the_runner_unescapes() -> None:
    assert escape_data("50% done\r\n::x") == "50%25 done%0D%0A::x"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def test_a_command_line() -> None:
    stream = io.StringIO()
    issue_command("error", "failed:\nsee above", stream, {"title": "pairbot: step"})
    assert stream.getvalue() == "::error title=pairbot%3A step::failed:%0Asee above\n"
    with pytest.raises(ValueError, match="is not a workflow command name"):
        issue_command("set-output name=x", "", stream)


def test_a_multi_line_key_is_masked_whole_and_line_by_line() -> None:
    stream = io.StringIO()
    mask(KEY, stream)
    lines = stream.getvalue().splitlines()
    # The whole value (escaped: one command line), then each line of it, each once.
    assert lines[0] == "::add-mask::" + escape_data(KEY)
    assert lines[1:] == [f"::add-mask::{line}" for line in KEY.split("\n")]


def test_a_key_with_crlf_line_ends_is_masked_per_line_without_the_cr() -> None:
    stream = io.StringIO()
    mask("line-one\r\nline-two\r\n", stream)
    masked = stream.getvalue().splitlines()
    assert "::add-mask::line-one" in masked
    assert "::add-mask::line-two" in masked


def test_a_one_line_secret_is_masked_once_and_a_blank_one_never() -> None:
    stream = io.StringIO()
    mask("ghs_token%0A", stream)
    mask("   ", stream)
    mask("", stream)
    # `%` is escaped, so the runner masks the literal text, not a decoded newline.
    assert stream.getvalue() == "::add-mask::ghs_token%250A\n"


def test_a_group_title_cannot_start_a_command_or_break_its_line() -> None:
    stream = io.StringIO()
    with group("card #7\n::add-mask::x %0A ::set-output", stream):
        stream.write("inside\n")
    lines = stream.getvalue().splitlines()
    assert lines == [
        "::group::card #7%0A: :add-mask: :x %250A : :set-output",
        "inside",
        "::endgroup::",
    ]


def test_a_group_is_closed_when_its_body_raises() -> None:
    stream = io.StringIO()
    with pytest.raises(RuntimeError), group("step", stream):
        raise RuntimeError("agent crashed")
    assert stream.getvalue().splitlines()[-1] == "::endgroup::"


def test_stop_commands_resumes_only_with_its_own_token() -> None:
    stream = io.StringIO()
    with stop_commands(stream) as token:
        stream.write("::stop-commands::other\n")
    assert re.fullmatch(r"pairbot-[0-9a-f]{32}", token)
    assert stream.getvalue() == (f"::stop-commands::{token}\n::stop-commands::other\n::{token}::\n")


def test_agent_output_is_grouped_and_cannot_issue_commands() -> None:
    stream = io.StringIO()
    with agent_log("apply: card #7", stream) as log:
        log.write("")  # nothing, and no stray newline
        log.line("::endgroup::")
        log.line("::add-mask::everything")
        log.write("partial line without newline ::error::x")
    lines = stream.getvalue().splitlines()
    token = lines[1].removeprefix("::stop-commands::")
    assert lines == [
        "::group::apply: card #7",
        f"::stop-commands::{token}",
        "::endgroup::",
        "::add-mask::everything",
        "partial line without newline ::error::x",
        f"::{token}::",  # on a line of its own although the output ended mid-line
        "::endgroup::",
    ]
    assert token.startswith("pairbot-")


def test_every_agent_log_has_a_fresh_token() -> None:
    tokens = set()
    for _ in range(3):
        stream = io.StringIO()
        with agent_log("x", stream):
            pass
        tokens.add(stream.getvalue().splitlines()[1])
    assert len(tokens) == 3


def test_the_agent_log_closes_when_the_agent_raises() -> None:
    stream = io.StringIO()
    with pytest.raises(TimeoutError), agent_log("verify", stream) as log:
        log.write("half")
        raise TimeoutError
    lines = stream.getvalue().splitlines()
    assert lines[-3:] == [
        "half",
        lines[1].replace("::stop-commands::", "::") + "::",
        "::endgroup::",
    ]
