"""Whether an element's inline style hides its text from a reader. Pure; linear in the style.

Azure Boards renders a work item's description and comments as HTML with their inline styles,
on a white background; text a reader cannot see there must not act (a `/pair` command) or reach
an agent. An element hides its text when its style (or a `<font color>`) makes it:

- not rendered: `display:none`, `visibility:hidden|collapse`;
- transparent or faint: `opacity` ≤ 0.05 (multiplied down the tree), a text colour with
  alpha ≤ 0.1 or `transparent`;
- the colour of what is behind it: text whose colour is within 8 of the background's on every
  RGB channel (the background an ancestor or the element sets, white by default: so `#fff`,
  `white`, `rgb(255,255,255)`, `hsl(0,0%,100%)`, `#fefefe` — lightness ≥ ~97% — hide);
- tiny: a font size under 4 px (relative sizes followed down the tree: `em`, `%`, `smaller`),
  `font:` shorthand included, `transform: scale(…)` or `scale:` under 0.3;
- off-screen or clipped: `position:absolute|fixed` with `left`/`top`/`right`/`bottom`
  at -100 px or beyond, `margin-left|top` or `text-indent` at -100 px or beyond, a
  `translate` of 100 px or more to the left or top, any `clip-path` but `none`, any
  `clip: rect(…)`;
- boxed away: `height`, `max-height`, `width` or `max-width` under 4 px.

The declarations are read by a small tolerant parser (any case, spaces, `/* */` comments and
`!important` ignored, unknown properties and values skipped) rather than a CSS library: none
is a dependency (tinycss2 would be a new one for a few dozen lines), and the rule above needs
only declarations, never selectors. When in doubt the text counts as hidden: a command styled
so is not one a maintainer writes, and text hidden from an agent is text it did not need.
"""

from __future__ import annotations

import colorsys
import re
from dataclasses import dataclass
from typing import Final

RGBA = tuple[float, float, float, float]  # 0-255 channels, alpha 0-1

WHITE: Final[RGBA] = (255.0, 255.0, 255.0, 1.0)
BLACK: Final[RGBA] = (0.0, 0.0, 0.0, 1.0)
BASE_PX: Final = 16.0
MIN_PX: Final = 4.0
MIN_OPACITY: Final = 0.05
MIN_ALPHA: Final = 0.1
MIN_SCALE: Final = 0.3
OFF_SCREEN_PX: Final = -100.0
SAME_COLOUR: Final = 8.0  # per RGB channel, out of 255 (about 3%)

_COMMENT = re.compile(r"/\*.*?(?:\*/|\Z)", re.DOTALL)
_IMPORTANT = re.compile(r"!\s*important\s*$")
_LENGTH = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)([a-z%]*)$")
_FUNCTION = re.compile(r"([a-z-]+)\(([^()]*)\)")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?(?:%|deg|turn|rad|[a-z]+)?")
# CSS named colours light enough to vanish on white, and the usual dark ones a background uses.
_NAMED: Final = {
    "white": "ffffff", "snow": "fffafa", "ivory": "fffff0", "ghostwhite": "f8f8ff",
    "mintcream": "f5fffa", "azure": "f0ffff", "honeydew": "f0fff0", "floralwhite": "fffaf0",
    "seashell": "fff5ee", "whitesmoke": "f5f5f5", "aliceblue": "f0f8ff",
    "lavenderblush": "fff0f5", "black": "000000", "gray": "808080", "grey": "808080",
    "red": "ff0000", "green": "008000", "blue": "0000ff", "navy": "000080",
    "yellow": "ffff00", "silver": "c0c0c0", "maroon": "800000", "purple": "800080",
}  # fmt: skip
_KEYWORD_PX: Final = {
    "xx-small": 9.0, "x-small": 10.0, "small": 13.0, "medium": 16.0, "large": 18.0,
    "x-large": 24.0, "xx-large": 32.0, "xxx-large": 48.0,
}  # fmt: skip


@dataclass(frozen=True)
class Look:
    """What an element passes on to its content: text colour, background, font size, opacity."""

    color: RGBA = BLACK
    background: RGBA = WHITE
    font_px: float = BASE_PX
    opacity: float = 1.0


PAGE: Final = Look()  # Azure Boards: black text on a white page


def declarations(style: str) -> dict[str, str]:
    """`name: value` pairs of an inline style, lower-cased, comments and `!important` gone."""
    found: dict[str, str] = {}
    for part in _COMMENT.sub(" ", style).lower().split(";"):
        name, colon, value = part.partition(":")
        if colon:
            found[name.strip()] = _IMPORTANT.sub("", value).strip()
    return found


def look_of(style: str, font_color: str | None, parent: Look) -> tuple[bool, Look]:
    """Whether an element with this inline style (and `<font color>`) hides its text, and the
    look its content inherits."""
    decl = declarations(style) if style else {}
    color = parent.color
    for value in (font_color, decl.get("color"), decl.get("-webkit-text-fill-color")):
        parsed = parse_color(value.strip().lower()) if value else None
        if parsed is not None:
            color = parsed
    background = parent.background
    for name in ("background", "background-color"):
        if name in decl:
            parsed = _background(decl[name])
            if parsed is not None:
                background = parsed
    font_px = _font_px(decl, parent.font_px)
    opacity = parent.opacity * _opacity(decl.get("opacity", ""))
    look = Look(color, background, font_px, opacity)
    return _hides(decl, look), look


def _hides(decl: dict[str, str], look: Look) -> bool:
    if decl.get("display") == "none" or decl.get("visibility") in ("hidden", "collapse"):
        return True
    if look.opacity <= MIN_OPACITY or look.color[3] <= MIN_ALPHA or look.font_px < MIN_PX:
        return True
    if all(
        abs(a - b) <= SAME_COLOUR for a, b in zip(look.color[:3], look.background[:3], strict=True)
    ):
        return True
    if _off_screen(decl) or _scaled_away(decl) or _clipped(decl):
        return True
    return any(
        (px := _px(decl.get(name, ""), look.font_px)) is not None and px < MIN_PX
        for name in ("height", "max-height", "width", "max-width")
    )


def parse_color(value: str) -> RGBA | None:
    """A CSS colour (named, `#rgb[a]`, `#rrggbb[aa]`, `rgb[a]()`, `hsl[a]()`,
    `transparent`), or None when it is not one read here."""
    if value == "transparent":
        return (0.0, 0.0, 0.0, 0.0)
    if value in _NAMED:
        value = "#" + _NAMED[value]
    if value.startswith("#"):
        return _hex(value[1:])
    match = _FUNCTION.fullmatch(value)
    if match is None or match.group(1) not in ("rgb", "rgba", "hsl", "hsla"):
        return None
    args = _NUMBER.findall(match.group(2))
    if len(args) < 3:
        return None
    alpha = _unit(args[3], 1.0) if len(args) > 3 else 1.0
    if match.group(1).startswith("rgb"):
        red, green, blue = (_unit(arg, 255.0) * 255.0 for arg in args[:3])
        return (red, green, blue, alpha)
    hue = _angle(args[0])
    red, green, blue = colorsys.hls_to_rgb(hue, _unit(args[2], 1.0), _unit(args[1], 1.0))
    return (red * 255.0, green * 255.0, blue * 255.0, alpha)


def _hex(digits: str) -> RGBA | None:
    if len(digits) in (3, 4):
        digits = "".join(d * 2 for d in digits)
    if len(digits) not in (6, 8) or any(d not in "0123456789abcdef" for d in digits):
        return None
    channels = [int(digits[i : i + 2], 16) for i in range(0, len(digits), 2)]
    alpha = channels[3] / 255.0 if len(channels) == 4 else 1.0
    return (float(channels[0]), float(channels[1]), float(channels[2]), alpha)


def _unit(arg: str, scale: float) -> float:
    """A colour argument as a fraction of its range: `50%` → 0.5, `128` of 255 → 0.5."""
    try:
        number = float(arg.rstrip("%")) / (100.0 if arg.endswith("%") else scale)
    except ValueError:
        return 1.0
    return min(1.0, max(0.0, number))


def _angle(arg: str) -> float:
    number = _LENGTH.match(arg)
    if number is None:
        return 0.0
    value, unit = float(number.group(1)), number.group(2)
    turns = {"turn": value, "rad": value / 6.283185307179586}.get(unit, value / 360.0)
    return turns % 1.0


def _background(value: str) -> RGBA | None:
    """The colour a `background` or `background-color` paints, if it is one solid colour."""
    for word in _FUNCTION.sub(lambda m: m.group().replace(" ", ""), value).split():
        colour = parse_color(word)
        if colour is not None:
            return colour if colour[3] >= 1.0 else None
    return None


def _px(value: str, font_px: float) -> float | None:
    """A length in px (`em` against the font size, `rem` against 16 px, `%` as unknown)."""
    match = _LENGTH.match(value.strip())
    if match is None:
        return None
    number, unit = float(match.group(1)), match.group(2)
    factor = {"": 1.0 if number == 0 else None, "px": 1.0, "pt": 4 / 3, "pc": 16.0,
              "in": 96.0, "cm": 37.8, "mm": 3.78, "q": 0.945, "em": font_px,
              "rem": BASE_PX, "ex": font_px / 2, "ch": font_px / 2, "vw": 10.0,
              "vh": 10.0}.get(unit)  # fmt: skip
    return None if factor is None else number * factor


def _font_px(decl: dict[str, str], parent_px: float) -> float:
    size = decl.get("font-size")
    if size is None and "font" in decl:
        # The shorthand's size is its first length, before any `/line-height`.
        for word in decl["font"].replace("/", " / ").split():
            if _LENGTH.match(word) or word in _KEYWORD_PX:
                size = word
                break
    if size is None:
        return parent_px
    if size in _KEYWORD_PX:
        return _KEYWORD_PX[size]
    if size in ("smaller", "larger"):
        return parent_px * (0.83 if size == "smaller" else 1.2)
    if size.endswith("%"):
        match = _LENGTH.match(size)
        return parent_px * float(match.group(1)) / 100.0 if match else parent_px
    px = _px(size, parent_px)
    return parent_px if px is None else max(0.0, px)


def _opacity(value: str) -> float:
    match = _LENGTH.match(value.strip())
    if match is None or match.group(2) not in ("", "%"):
        return 1.0
    number = float(match.group(1)) / (100.0 if match.group(2) == "%" else 1.0)
    return min(1.0, max(0.0, number))


def _off_screen(decl: dict[str, str]) -> bool:
    names = ["margin-left", "margin-top", "text-indent"]
    if decl.get("position") in ("absolute", "fixed"):
        names += ["left", "top", "right", "bottom", "inset"]
    for name in names:
        px = _px(decl.get(name, "").split(" ")[0], BASE_PX)
        if px is not None and px <= OFF_SCREEN_PX:
            return True
    shifts = decl.get("translate", "").split()
    for function, args in _FUNCTION.findall(decl.get("transform", "")):
        if function in ("translate", "translatex", "translatey", "translate3d"):
            shifts += args.replace(",", " ").split()[:2]
    return any((px := _px(arg, BASE_PX)) is not None and px <= OFF_SCREEN_PX for arg in shifts)


def _scaled_away(decl: dict[str, str]) -> bool:
    factors: list[str] = decl.get("scale", "").split()
    for function, args in _FUNCTION.findall(decl.get("transform", "")):
        if function in ("scale", "scalex", "scaley", "scale3d"):
            factors += args.replace(",", " ").split()
        elif function == "matrix":
            parts = args.replace(",", " ").split()
            factors += [parts[0], parts[3]] if len(parts) == 6 else []
    for factor in factors:
        match = _LENGTH.match(factor)
        if match is not None and match.group(2) in ("", "%"):
            value = float(match.group(1)) / (100.0 if match.group(2) == "%" else 1.0)
            if abs(value) < MIN_SCALE:
                return True
    return False


def _clipped(decl: dict[str, str]) -> bool:
    clip_path = decl.get("clip-path", "none")
    if clip_path not in ("none", "initial", "unset", "inherit", "revert", ""):
        return True
    return decl.get("clip", "").startswith("rect")
