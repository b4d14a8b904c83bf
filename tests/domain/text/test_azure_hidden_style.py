"""Azure Boards acts only on text a reader sees: an inline style that hides text (white or
transparent on the white page, tiny, off-screen, clipped, scaled away) hides the command, and
visible styles do not. GitHub strips `style`, so its reading may ignore styles."""

from __future__ import annotations

import pytest

from app.domain.intake.azure_hooks import read_azure_hook
from app.domain.intake.comment_commands import Command
from app.domain.intake.intent import Comment, Ignore, Policy
from app.domain.text.css_hide import PAGE, declarations, look_of, parse_color
from app.domain.text.sanitize import html_paragraphs, reader_text, visible_lines

POLICY = Policy(trigger="pair", app_slug="pairbot", app_id=123456, allowlist=frozenset({42}))

HIDING = [
    "color:#fff", "color:#ffffff", "color: white", "COLOR:WHITE !important",
    "color:rgb(255,255,255)", "color:rgb(255 255 255)", "color:rgb(100%,100%,100%)",
    "color:rgba(0,0,0,0)", "color:rgba(0 0 0 / 0%)", "color:transparent", "color:#0000",
    "color:hsl(0,0%,100%)", "color:hsl(120deg 50% 99%)", "color:hsla(0,0%,0%,0)",
    "color:#fefefe", "color:#f9f9f9", "color:snow", "color:/* x */#fff", "color:#FFFFFF80",
    "-webkit-text-fill-color:#fff",
    "font-size:0", "font-size:1px", "font-size:3px", "font-size:0.2em", "font-size:2pt",
    "font-size:10%", "font:0/0 a", "font: italic 1px serif",
    "opacity:0", "opacity:0.01", "opacity:0%",
    "visibility:hidden", "visibility:collapse", "display:none", "display : NONE",
    "position:absolute;left:-9999px", "position:fixed; top:-5000px",
    "position:absolute;left:-100em", "margin-left:-10000px", "text-indent:-9999px",
    "clip-path:inset(50%)", "clip-path:circle(0)", "clip:rect(0 0 0 0);position:absolute",
    "clip: rect(1px, 1px, 1px, 1px)", "transform:scale(0)", "transform: scale(0.1, 1)",
    "transform:scaleY(0)", "transform:matrix(0,0,0,0,0,0)", "scale:0",
    "transform:translateX(-9999px)", "translate:-5000px 0",
    "height:0;overflow:hidden", "max-height:0", "width:0", "width:1px", "max-width:0px",
    "background:#000;color:#000", "background-color:rgb(10,10,10);color:#0a0a0a",
]  # fmt: skip
VISIBLE = [
    "color:#333", "color:red", "color:#f0f0f0", "font-size:12px", "font-size:0.8em",
    "font-weight:bold", "opacity:0.8", "position:relative;left:-10px", "text-indent:2em",
    "background:#000;color:#fff", "background-color:navy;color:white", "clip-path:none",
    "transform:scale(1.2)", "margin-left:-20px", "height:auto", "color:rgba(0,0,0,0.9)",
    "display:block", "", "color", ";;;", "color:not-a-colour", "/* unterminated",
]  # fmt: skip


@pytest.mark.parametrize("style", HIDING)
def test_a_hiding_style_hides_the_command(style: str) -> None:
    html = f'<div>thanks</div><div><span style="{style}">/pair implement</span></div>'
    assert "implement" not in html_paragraphs(html)
    assert "implement" not in reader_text(html)


@pytest.mark.parametrize("style", VISIBLE)
def test_a_visible_style_keeps_the_command(style: str) -> None:
    html = f'<div>thanks</div><div><span style="{style}">/pair implement</span></div>'
    assert "implement" in html_paragraphs(html)


@pytest.mark.parametrize(
    "html",
    [
        pytest.param('<div><span style="color:#fff">/pair implement</span></div>', id="white"),
        pytest.param("<div><font color=white>/pair implement</font></div>", id="font-white"),
        pytest.param('<div><font color="#FEFEFE">/pair implement</font></div>', id="font-hex"),
        pytest.param(
            '<div style="font-size:50%"><span style="font-size:50%"><span style="font-size:'
            '40%">/pair implement</span></span></div>',
            id="relative-sizes-multiply",
        ),
        pytest.param(
            '<div style="opacity:.3"><span style="opacity:.1">/pair implement</span></div>',
            id="opacities-multiply",
        ),
        pytest.param(
            '<div style="background:#000"><span style="color:#010101">/pair implement</span></div>',
            id="dark-on-inherited-dark",
        ),
        pytest.param(
            '<div style="color:#fff"><b>/pair</b> <i>implement</i></div>', id="inherited-white"
        ),
        pytest.param('<div style="color:&#x23;fff">/pair implement</div>', id="entity-in-style"),
    ],
)
def test_an_azure_comment_hidden_by_style_yields_no_command(html: str) -> None:
    hook = read_azure_hook(_workitem(f"<div>thanks</div>{html}"), POLICY)
    assert isinstance(hook.intent, Ignore), hook.intent


def test_a_visible_azure_comment_still_acts() -> None:
    hook = read_azure_hook(
        _workitem('<div><span style="color:#222">/pair implement</span></div>'), POLICY
    )
    assert isinstance(hook.intent, Comment)
    assert isinstance(hook.intent.command, Command) and hook.intent.command.verb == "implement"


def test_github_s_reading_ignores_styles_as_github_renders_them() -> None:
    body = '<span style="color:#fff">/pair status</span>'
    assert "status" not in "".join(visible_lines(body).lines)  # the default: styles honoured
    assert "/pair status" in visible_lines(body, styles=False).lines[0]
    assert "/pair status" in reader_text(body, styles=False)
    # `hidden` and the elements that never render hide on every host.
    assert "status" not in reader_text("<span hidden>/pair status</span>", styles=False)


def test_the_declaration_parser_is_tolerant() -> None:
    assert declarations("Color : #FFF !IMPORTANT; /* a;b */ font-size:0 ;;x") == {
        "color": "#fff",
        "font-size": "0",
    }
    assert parse_color("hsl(0,0%,100%)") == (255.0, 255.0, 255.0, 1.0)
    assert parse_color("rgb(1 2 3 / 50%)") == (1.0, 2.0, 3.0, 0.5)
    assert parse_color("#12") is None and parse_color("var(--x)") is None
    hidden, look = look_of("font-size:8px", None, PAGE)
    assert not hidden and look.font_px == 8.0
    assert look_of("font-size:0.4em", None, look)[0]  # 3.2 px under an 8 px parent


def test_a_64kb_style_attribute_is_read_in_one_pass() -> None:
    style = "color:#000;" * 6000 + "color:#fff"
    assert "implement" not in html_paragraphs(f'<div style="{style}">/pair implement</div>')
    # An unterminated comment runs to the end of the style: no declaration, nothing hidden.
    assert "implement" in html_paragraphs(f'<div style="/*{"x" * 60_000}">/pair implement</div>')


def _workitem(history: str) -> dict[str, object]:
    """`workitem.commented` as Azure DevOps documents it (as tests/web/test_routing.py)."""
    return {
        "id": "a3f9b1b3-2d4c-4f77-9b8e-3b6c5e0a1c11",
        "eventType": "workitem.commented",
        "publisherId": "tfs",
        "resource": {
            "id": 5,
            "rev": 4,
            "fields": {
                "System.TeamProject": "Fabrikam",
                "System.WorkItemType": "User Story",
                "System.Title": "Some great new idea!",
                "System.ChangedBy": "Jamal Hartnett <fabrikamfiber4@hotmail.com>",
                "System.History": history,
            },
            "url": "https://dev.azure.com/fabrikam/_apis/wit/workItems/5",
        },
    }
