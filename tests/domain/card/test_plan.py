"""`count_tasks`: which lines of a plan.md are tasks, and which of them are checked."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.card.plan import TaskCount, count_tasks


@pytest.mark.parametrize(
    ("text", "total", "complete"),
    [
        pytest.param("", 0, 0, id="empty"),
        pytest.param("# Plan\n\nSome prose.\n", 0, 0, id="no-tasks"),
        pytest.param("- [ ] one\n", 1, 0, id="open"),
        pytest.param("- [x] one\n", 1, 1, id="checked-lower"),
        pytest.param("- [X] one\n", 1, 1, id="checked-upper"),
        pytest.param("* [x] one\n+ [ ] two\n", 2, 1, id="star-and-plus-bullets"),
        pytest.param("  - [x] nested\n\t- [ ] tabbed\n", 2, 1, id="indented"),
        pytest.param("- [ ] a\n- [x] b\n- [x] c\n", 3, 2, id="mixed"),
        pytest.param("-[x] no space after bullet\n", 0, 0, id="bullet-needs-space"),
        pytest.param("- [x]no space after box\n", 0, 0, id="box-needs-space"),
        pytest.param("- [y] other mark\n", 0, 0, id="other-mark-not-a-task"),
        pytest.param("- [] empty box\n", 0, 0, id="empty-box-not-a-task"),
        pytest.param("1. [x] numbered\n", 0, 0, id="numbered-list-not-a-task"),
        pytest.param("text - [x] mid-line\n", 0, 0, id="mid-line-not-a-task"),
        pytest.param("```\n- [ ] example\n```\n- [x] real\n", 1, 1, id="backtick-fence-skipped"),
        pytest.param("~~~\n- [ ] example\n~~~\n- [ ] real\n", 1, 0, id="tilde-fence-skipped"),
        pytest.param("```md\n- [x] example\n```\n", 0, 0, id="fence-with-info-string"),
        pytest.param("  ```\n- [x] example\n  ```\n- [ ] real\n", 1, 0, id="indented-fence"),
        pytest.param("```\n- [x] never closed\n", 0, 0, id="unclosed-fence-hides-the-rest"),
        pytest.param(
            "```\n~~~\n- [ ] example\n~~~\n```\n- [x] real\n", 1, 1, id="tilde-inside-backticks"
        ),
        pytest.param(
            "````\n```\n- [ ] example\n```\n````\n- [ ] real\n",
            1,
            0,
            id="shorter-fence-inside-longer",
        ),
        pytest.param(
            "```\n- [ ] a\n```\n- [x] b\n```\n- [ ] c\n```\n", 1, 1, id="two-fenced-blocks"
        ),
        pytest.param(
            "```\n```python\n- [ ] example\n```\n- [x] real\n",
            1,
            1,
            id="fence-with-info-string-does-not-close",
        ),
        pytest.param("```\n- [ ] example\n`````\n- [x] real\n", 1, 1, id="longer-fence-closes"),
        pytest.param("- [x] one\r\n- [ ] two\r\n", 2, 1, id="crlf"),
    ],
)
def test_count_tasks(text: str, total: int, complete: int) -> None:
    assert count_tasks(text) == TaskCount(total=total, complete=complete)


@given(st.lists(st.tuples(st.booleans(), st.sampled_from(["-", "*", "+"])), max_size=30))
def test_counts_match_the_lines_written(tasks: list[tuple[bool, str]]) -> None:
    text = "\n".join(
        f"{bullet} [{'x' if done else ' '}] task {i}" for i, (done, bullet) in enumerate(tasks)
    )
    assert count_tasks(text) == TaskCount(total=len(tasks), complete=sum(d for d, _ in tasks))
