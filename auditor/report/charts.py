"""Charts for the report as inline SVG strings: no images to fetch, same bytes every render."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

WIDTH = 640
BAR = "#3b5b92"
ALT = "#c8a04a"
GRID = "#d9d9d9"
TEXT = "#333333"


def _fmt(x: float) -> str:
    return f"{x:.1f}"


def _nothing(title: str, why: str) -> str:
    """A chart with nothing to draw: its title and why, one line."""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="40" role="img">'
        f'<text x="0" y="25" font-size="11" fill="{TEXT}">{escape(title)}: {why}</text></svg>'
    )


def _opening(height: int, title: str) -> list[str]:
    """A chart's svg element and its title."""
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'role="img" aria-label="{escape(title)}">',
        f'<text x="0" y="13" font-size="11" font-weight="bold" fill="{TEXT}">'
        f"{escape(title)}</text>",
    ]


def bar_chart(
    labels: Sequence[str],
    values: Sequence[float],
    title: str,
    height: int = 180,
    value_format: str = "{:g}",
) -> str:
    """Vertical bars, one per label; an empty series says so instead of drawing nothing."""
    if not values or max(values) <= 0:
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="40" role="img">'
            f'<text x="0" y="25" font-size="11" fill="{TEXT}">{escape(title)}: none</text></svg>'
        )
    top, bottom, left = 22, 34, 34
    plot_h = height - top - bottom
    plot_w = WIDTH - left - 8
    step = plot_w / len(values)
    peak = max(values)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'role="img" aria-label="{escape(title)}">',
        f'<text x="0" y="13" font-size="11" font-weight="bold" fill="{TEXT}">'
        f"{escape(title)}</text>",
        f'<line x1="{left}" y1="{top + plot_h}" x2="{WIDTH - 8}" y2="{top + plot_h}" '
        f'stroke="{GRID}"/>',
        f'<text x="{left - 4}" y="{top + 8}" font-size="9" text-anchor="end" fill="{TEXT}">'
        f"{escape(value_format.format(peak))}</text>",
    ]
    for i, (label, v) in enumerate(zip(labels, values, strict=True)):
        h = plot_h * v / peak
        x = left + i * step + step * 0.15
        w = step * 0.7
        parts.append(
            f'<rect x="{_fmt(x)}" y="{_fmt(top + plot_h - h)}" width="{_fmt(w)}" '
            f'height="{_fmt(h)}" fill="{BAR}"/>'
        )
        if v:
            parts.append(
                f'<text x="{_fmt(x + w / 2)}" y="{_fmt(top + plot_h - h - 2)}" font-size="8" '
                f'text-anchor="middle" fill="{TEXT}">{escape(value_format.format(v))}</text>'
            )
        parts.append(
            f'<text x="{_fmt(x + w / 2)}" y="{top + plot_h + 12}" font-size="8" '
            f'text-anchor="middle" fill="{TEXT}">{escape(label)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def paired_bars(
    labels: Sequence[str],
    observed: Sequence[float],
    expected: Sequence[float],
    title: str,
    legend: tuple[str, str] = ("observed", "exact"),
    height: int = 190,
) -> str:
    """Observed against expected shares (0-1), side by side per label."""
    top, bottom, left = 44, 30, 34  # the tallest bar's label clears the legend (y 19-28)
    plot_h = height - top - bottom
    plot_w = WIDTH - left - 8
    step = plot_w / max(len(labels), 1)
    peak = max([*observed, *expected, 0.01])
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'role="img" aria-label="{escape(title)}">',
        f'<text x="0" y="13" font-size="11" font-weight="bold" fill="{TEXT}">'
        f"{escape(title)}</text>",
        f'<rect x="{left}" y="19" width="9" height="9" fill="{BAR}"/>'
        f'<text x="{left + 13}" y="27" font-size="9" fill="{TEXT}">{escape(legend[0])}</text>',
        f'<rect x="{left + 90}" y="19" width="9" height="9" fill="{ALT}"/>'
        f'<text x="{left + 103}" y="27" font-size="9" fill="{TEXT}">{escape(legend[1])}</text>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{WIDTH - 8}" y2="{top + plot_h}" '
        f'stroke="{GRID}"/>',
    ]
    for i, label in enumerate(labels):
        for j, (v, colour) in enumerate(((observed[i], BAR), (expected[i], ALT))):
            h = plot_h * v / peak
            w = step * 0.3
            x = left + i * step + step * 0.18 + j * w
            parts.append(
                f'<rect x="{_fmt(x)}" y="{_fmt(top + plot_h - h)}" width="{_fmt(w)}" '
                f'height="{_fmt(h)}" fill="{colour}"/>'
                f'<text x="{_fmt(x + w / 2)}" y="{_fmt(top + plot_h - h - 2)}" font-size="8" '
                f'text-anchor="middle" fill="{TEXT}">{v * 100:.1f}%</text>'
            )
        parts.append(
            f'<text x="{_fmt(left + i * step + step / 2)}" y="{top + plot_h + 13}" '
            f'font-size="9" text-anchor="middle" fill="{TEXT}">{escape(label)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


# A timeline lane: table name, spans (start, end as 0-1 of the window, procedure), notice
# marks (position, label) and closes (position, label).
Lane = tuple[
    str,
    Sequence[tuple[float, float, str]],
    Sequence[tuple[float, str]],
    Sequence[tuple[float, str]],
]
TICK_FONT = 8
CHAR_WIDTH = 0.62  # of the font size: DejaVu Sans digits are 0.64 em, a colon 0.34


def timeline(
    rows: Sequence[Lane],
    ticks: Sequence[tuple[float, str]],
    title: str,
) -> str:
    """One lane per table: spans (start, end as 0-1 of the shift, label), notice marks
    (position, label) and closes (position, label), with hour ticks under the lanes.

    The plot stops short of the right edge by half the widest tick label, so the last label
    (the end of the shift) is drawn whole instead of clipped by the SVG's edge. Where a
    table closes its lane is empty and says "closed" with the time, so a closed table is
    never read as playing under its last procedure.
    """
    lane, left, top = 20, 70, 22
    widest = max((len(label) for _, label in ticks), default=0)
    right = max(8, int(widest * TICK_FONT * CHAR_WIDTH / 2) + 3)
    height = top + lane * len(rows) + 28
    plot_w = WIDTH - left - right
    palette = {"1": "#3b5b92", "2": "#6a9f58", "3": "#c8a04a", "4": "#a35d8e"}
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'role="img" aria-label="{escape(title)}">',
        f'<text x="0" y="13" font-size="11" font-weight="bold" fill="{TEXT}">'
        f"{escape(title)}</text>",
    ]
    for r, (name, spans, marks, closes) in enumerate(rows):
        y = top + r * lane
        parts.append(
            f'<text x="{left - 4}" y="{y + 13}" font-size="9" text-anchor="end" '
            f'fill="{TEXT}">{escape(name)}</text>'
        )
        for start, end, label in spans:
            x = left + plot_w * start
            w = max(plot_w * (end - start), 0.5)
            parts.append(
                f'<rect x="{_fmt(x)}" y="{y + 3}" width="{_fmt(w)}" height="{lane - 6}" '
                f'fill="{palette.get(label, "#999999")}"/>'
            )
            if w > 24:
                parts.append(
                    f'<text x="{_fmt(x + 3)}" y="{y + 13}" font-size="8" fill="#ffffff">'
                    f"procedure {escape(label)}</text>"
                )
        for pos, label in closes:
            x = left + plot_w * pos
            parts.append(
                f'<line x1="{_fmt(x)}" y1="{y + 2}" x2="{_fmt(x)}" y2="{y + lane - 2}" '
                f'stroke="{TEXT}" stroke-width="1.2"/>'
            )
            # The label only where the lane stays empty long enough to hold it.
            room = min([s for s, _, _ in spans if s > pos] + [1.0]) - pos
            if plot_w * room > len(label) * 8 * CHAR_WIDTH + 6:
                parts.append(
                    f'<text x="{_fmt(x + 3)}" y="{y + 13}" font-size="8" fill="{TEXT}">'
                    f"{escape(label)}</text>"
                )
        for pos, label in marks:
            x = left + plot_w * pos
            parts.append(
                f'<path d="M{_fmt(x)} {y + 1} l4 -5 h-8 z" fill="#b22222">'
                f"<title>{escape(label)}</title></path>"
            )
    base = top + lane * len(rows) + 4
    for pos, label in ticks:
        x = left + plot_w * pos
        parts.append(
            f'<line x1="{_fmt(x)}" y1="{top}" x2="{_fmt(x)}" y2="{base}" stroke="{GRID}"/>'
            f'<text x="{_fmt(x)}" y="{base + 11}" font-size="{TICK_FONT}" '
            f'text-anchor="middle" fill="{TEXT}">{escape(label)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _axis_top(peak: float) -> float:
    """A round top for an axis from 0 to at least `peak`: 1, 2, 2.5 or 5 times a power of
    ten."""
    if peak <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(peak))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= peak)


def gap_line(
    labels: Sequence[str],
    values: Sequence[float | None],
    title: str,
    reference: float | None = None,
    reference_label: str = "",
    height: int = 200,
) -> str:
    """A line over evenly spaced points (a day each), each point labelled with its value;
    None is no data: a shaded gap that breaks the line, never a zero. `reference` is drawn
    as a dashed level across the plot. Every other label is written under the axis when
    there are more than 16 points."""
    known = [v for v in values if v is not None]
    if not known:
        return _nothing(title, "no data")
    top, bottom, left, right = 34, 30, 34, 8
    plot_h = height - top - bottom
    plot_w = WIDTH - left - right
    step = plot_w / max(len(values), 1)
    peak = _axis_top(max([*known, reference or 0.0]))
    base = top + plot_h

    def x_of(i: int) -> float:
        return left + step * (i + 0.5)

    def y_of(v: float) -> float:
        return base - plot_h * v / peak

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'role="img" aria-label="{escape(title)}">',
        f'<text x="0" y="13" font-size="11" font-weight="bold" fill="{TEXT}">'
        f"{escape(title)}</text>",
        f'<rect x="{left}" y="19" width="9" height="9" fill="{GRID}"/>'
        f'<text x="{left + 13}" y="27" font-size="9" fill="{TEXT}">no rounds</text>',
    ]
    if reference is not None:
        parts.append(
            f'<line x1="{left + 80}" y1="23.5" x2="{left + 98}" y2="23.5" stroke="{ALT}" '
            f'stroke-width="1.5" stroke-dasharray="4 2"/>'
            f'<text x="{left + 102}" y="27" font-size="9" fill="{TEXT}">'
            f"{escape(reference_label)}</text>"
        )
    parts += [
        f'<line x1="{left}" y1="{base}" x2="{WIDTH - right}" y2="{base}" stroke="{GRID}"/>',
        f'<text x="{left - 4}" y="{top + 4}" font-size="8" text-anchor="end" fill="{TEXT}">'
        f"{peak:g}</text>",
        f'<text x="{left - 4}" y="{base}" font-size="8" text-anchor="end" fill="{TEXT}">0</text>',
    ]
    for i, v in enumerate(values):
        if v is None:
            parts.append(
                f'<rect x="{_fmt(left + step * i)}" y="{top}" width="{_fmt(step)}" '
                f'height="{plot_h}" fill="{GRID}" fill-opacity="0.5"/>'
            )
    if reference is not None:
        parts.append(
            f'<line x1="{left}" y1="{_fmt(y_of(reference))}" x2="{WIDTH - right}" '
            f'y2="{_fmt(y_of(reference))}" stroke="{ALT}" stroke-width="1.5" '
            f'stroke-dasharray="4 2"/>'
        )
    run: list[str] = []  # the points of the current unbroken stretch
    for i, v in enumerate([*values, None]):
        if v is not None:
            run.append(f"{_fmt(x_of(i))},{_fmt(y_of(v))}")
        elif run:
            if len(run) > 1:
                parts.append(
                    f'<polyline points="{" ".join(run)}" fill="none" stroke="{BAR}" '
                    f'stroke-width="1.5"/>'
                )
            run = []
    every = 1 if len(values) <= 16 else 2
    for i, (label, v) in enumerate(zip(labels, values, strict=True)):
        if v is not None:
            parts.append(
                f'<circle cx="{_fmt(x_of(i))}" cy="{_fmt(y_of(v))}" r="2.2" fill="{BAR}"/>'
                f'<text x="{_fmt(x_of(i))}" y="{_fmt(y_of(v) - 4)}" font-size="6.5" '
                f'text-anchor="middle" fill="{TEXT}">{v:.1f}</text>'
            )
        if (len(values) - 1 - i) % every == 0:  # the last day always has its label
            parts.append(
                f'<text x="{_fmt(x_of(i))}" y="{base + 11}" font-size="7" '
                f'text-anchor="middle" fill="{TEXT}">{escape(label)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def scatter(
    points: Sequence[tuple[float, float]],
    label: str,
    x_label: str,
    y_label: str,
    height: int = 170,
    width: int = 420,
) -> str:
    """Points (x, y) on axes from their range (x through 0, y from 0); a point at y = 0 is
    drawn pale (a round without a wager), the others solid. Points that fall on the same
    spot are drawn once, so a long series stays a small SVG. `label` names the chart to a
    reader of the SVG; the page gives its title (as text the PDF carries)."""
    top, bottom, left, right = 8, 30, 44, 10
    plot_h = height - top - bottom
    plot_w = width - left - right
    xs = [x for x, _ in points] or [0.0]
    lo, hi = min(min(xs), 0.0), max(max(xs), 0.0)
    if hi - lo < 1:
        lo, hi = lo - 0.5, hi + 0.5
    peak = _axis_top(max((y for _, y in points), default=0.0))
    base = top + plot_h

    def x_of(x: float) -> float:
        return left + plot_w * (x - lo) / (hi - lo)

    def y_of(y: float) -> float:
        return base - plot_h * y / peak

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(label)}">',
        f'<line x1="{left}" y1="{base}" x2="{width - right}" y2="{base}" stroke="{GRID}"/>',
        f'<line x1="{_fmt(x_of(0))}" y1="{top}" x2="{_fmt(x_of(0))}" y2="{base}" '
        f'stroke="{GRID}"/>',
        f'<text x="{_fmt(x_of(0))}" y="{base + 11}" font-size="8" text-anchor="middle" '
        f'fill="{TEXT}">0</text>' if left + 20 < x_of(0) < width - right - 20 else "",
        f'<text x="{left - 4}" y="{top + 4}" font-size="8" text-anchor="end" fill="{TEXT}">'
        f"{peak:g}</text>",
        f'<text x="{left - 4}" y="{base}" font-size="8" text-anchor="end" fill="{TEXT}">0</text>',
        f'<text x="{left}" y="{base + 11}" font-size="8" fill="{TEXT}">{lo:g}</text>',
        f'<text x="{width - right}" y="{base + 11}" font-size="8" text-anchor="end" '
        f'fill="{TEXT}">{hi:g}</text>',
        f'<text x="{_fmt(left + plot_w / 2)}" y="{base + 24}" font-size="8" '
        f'text-anchor="middle" fill="{TEXT}">{escape(x_label)}</text>',
        f'<text x="10" y="{_fmt(top + plot_h / 2)}" font-size="8" text-anchor="middle" '
        f'fill="{TEXT}" transform="rotate(-90 10 {_fmt(top + plot_h / 2)})">'
        f"{escape(y_label)}</text>",
    ]
    drawn: set[tuple[str, str]] = set()
    for x, y in points:
        spot = (_fmt(x_of(x)), _fmt(y_of(y)))
        if spot in drawn:
            continue
        drawn.add(spot)
        style = f'fill="{GRID}"' if y == 0 else f'fill="{BAR}" fill-opacity="0.7"'
        parts.append(f'<circle cx="{spot[0]}" cy="{spot[1]}" r="2" {style}/>')
    parts.append("</svg>")
    return "".join(parts)


def p_chart(
    labels: Sequence[str],
    rates: Sequence[float],
    uppers: Sequence[float],
    center: float,
    title: str,
    height: int = 210,
) -> str:
    """A p-chart, one column per dealer: the dealer's rate (a dot, red above its limit), its
    upper control limit (a short bar: the limit narrows as the rounds grow) and the centre
    line p̄ dashed across. Values per 1,000 rounds."""
    if not labels:
        return _nothing(title, "no dealers")
    top, bottom, left, right = 34, 40, 34, 8
    plot_h = height - top - bottom
    step = (WIDTH - left - right) / len(labels)
    peak = _axis_top(max([*rates, *uppers, center]))
    base = top + plot_h

    def y_of(v: float) -> float:
        return base - plot_h * v / peak

    parts = [
        *_opening(height, title),
        f'<line x1="{left}" y1="23.5" x2="{left + 18}" y2="23.5" stroke="{ALT}" '
        f'stroke-width="1.5" stroke-dasharray="4 2"/><text x="{left + 22}" y="27" font-size="9" '
        f'fill="{TEXT}">p&#772; {center:.1f}</text>',
        f'<rect x="{left + 80}" y="22" width="12" height="3" fill="{TEXT}"/>'
        f'<text x="{left + 96}" y="27" font-size="9" fill="{TEXT}">upper limit</text>',
        f'<line x1="{left}" y1="{base}" x2="{WIDTH - right}" y2="{base}" stroke="{GRID}"/>',
        f'<text x="{left - 4}" y="{top + 4}" font-size="8" text-anchor="end" fill="{TEXT}">'
        f"{peak:g}</text>",
        f'<text x="{left - 4}" y="{base}" font-size="8" text-anchor="end" fill="{TEXT}">0</text>',
        f'<line x1="{left}" y1="{_fmt(y_of(center))}" x2="{WIDTH - right}" '
        f'y2="{_fmt(y_of(center))}" stroke="{ALT}" stroke-width="1.5" stroke-dasharray="4 2"/>',
    ]
    for i, (label, rate, upper) in enumerate(zip(labels, rates, uppers, strict=True)):
        x = left + step * (i + 0.5)
        colour = "#a30000" if rate > upper else BAR
        parts.append(
            f'<rect x="{_fmt(x - min(step * 0.3, 9))}" y="{_fmt(y_of(upper) - 1)}" '
            f'width="{_fmt(min(step * 0.6, 18))}" height="2" fill="{TEXT}"/>'
            f'<circle cx="{_fmt(x)}" cy="{_fmt(y_of(rate))}" r="3" fill="{colour}"/>'
            f'<text x="{_fmt(x)}" y="{_fmt(y_of(rate) - 5)}" font-size="7" text-anchor="middle" '
            f'fill="{TEXT}">{rate:.1f}</text>'
            f'<text x="{_fmt(x)}" y="{base + 11}" font-size="7" text-anchor="middle" '
            f'fill="{TEXT}">{escape(label)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
