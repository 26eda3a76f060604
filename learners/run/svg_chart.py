"""Line charts as inline SVG text, drawn in Python with no dependency (used by the run report).

A series is ``(label, steps, values)`` where a ``None`` value is a gap: the line stops before it and
starts again after it; a point with gaps on both sides is drawn as a dot. Coordinates are in the SVG's
own ``viewBox`` units, so the chart scales with its container.

Example:
    >>> svg = line_chart_svg([Series("reward/mean", [1, 2, 3, 4], [0.5, None, 0.7, 0.9])], x_range=(0, 4))
    >>> svg.startswith("<svg") and svg.count(" M") + svg.count('"M') == 2  # two segments around the gap
    True
    >>> nice_ticks(0.0, 1.0)
    [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

#: Line colours, in order (colour-blind-friendly Okabe-Ito hues).
COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")

WIDTH, HEIGHT = 440, 210
LEFT, RIGHT, TOP, BOTTOM = 52, 10, 8, 24  # plot margins (tick labels left and below)


@dataclass(frozen=True)
class Series:
    """One line: ``label`` (the metric key), ``steps`` and ``values`` (``None`` = gap), same length."""

    label: str
    steps: Sequence[int]
    values: Sequence[float | None]

    def __post_init__(self) -> None:
        if len(self.steps) != len(self.values):
            raise ValueError(f"Series {self.label!r}: {len(self.steps)} steps but {len(self.values)} values")


def nice_ticks(lo: float, hi: float, max_ticks: int = 6) -> list[float]:
    """Round tick values covering ``[lo, hi]`` (steps of 1, 2 or 5 times a power of ten), at most
    ``max_ticks`` of them, all inside the range."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / max(1, max_ticks - 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9)
    ticks = []
    k = first
    while k * step <= hi + step * 1e-9:
        ticks.append(round(k * step, 12))
        k += 1
    return ticks


def format_number(v: float) -> str:
    """A short label: ``0.135``, ``4950``, ``1.2e-06``, ``-0.65``.

    Example:
        >>> [format_number(v) for v in (0.135, 4949.8, 1.2e-06, -0.6484375, 0.0, 200.0)]
        ['0.135', '4950', '1.2e-06', '-0.648', '0', '200']
    """
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        return f"{v:.2g}"
    if a >= 100:
        return f"{v:.0f}"
    return f"{v:.3g}"


def value_range(series: Sequence[Series]) -> tuple[float, float]:
    """The y range that shows every value of ``series`` with a small margin (``(0, 1)`` when empty)."""
    vals = [v for s in series for v in s.values if v is not None]
    if not vals:
        return 0.0, 1.0
    lo, hi = min(vals), max(vals)
    if hi == lo:
        pad = abs(lo) * 0.1 or 0.5
        return lo - pad, hi + pad
    pad = (hi - lo) * 0.05
    return lo - pad, hi + pad


def line_chart_svg(series: Sequence[Series], *, x_range: tuple[float, float],
                   y_range: tuple[float, float] | None = None, shade: Sequence[tuple[int, int]] = (),
                   label: str = "") -> str:
    """An ``<svg>`` line chart of ``series`` over steps ``x_range``.

    Args:
        series: the lines, coloured in :data:`COLORS` order.
        x_range: first and last step of the x axis (shared by every chart of a report, so they align).
        y_range: fixed y limits (e.g. ``(0, 1)`` for a share); default: the data's range.
        shade: inclusive step spans drawn as grey bands (steps whose batch was empty).
        label: accessible name of the chart.

    The ``<svg>`` carries ``data-x0``/``data-x1`` (the step range), ``data-px0``/``data-px1`` (where those
    steps sit in viewBox units) and ``data-y0``/``data-y1``/``data-py0``/``data-py1`` likewise, so a
    script (or a test) can map positions back to steps and values.
    """
    x0, x1 = x_range
    if x1 <= x0:
        x0, x1 = x0 - 0.5, x0 + 0.5
    y0, y1 = y_range if y_range is not None else value_range(series)
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return round(LEFT + (x - x0) / (x1 - x0) * pw, 1)

    def py(y: float) -> float:
        return round(TOP + (1 - (y - y0) / (y1 - y0)) * ph, 1)

    parts = [f'<svg class="chart-svg" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(label)}" '
             f'data-x0="{x0}" data-x1="{x1}" data-px0="{px(x0)}" data-px1="{px(x1)}" '
             f'data-y0="{y0}" data-y1="{y1}" data-py0="{py(y0)}" data-py1="{py(y1)}">',
             f'<rect class="plot-bg" x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}"/>']
    for first, last in shade:
        a, b = max(px(first - 0.5), LEFT), min(px(last + 0.5), LEFT + pw)
        if b > a:
            parts.append(f'<rect class="gap-band" x="{a}" y="{TOP}" width="{round(b - a, 1)}" height="{ph}" '
                         f'data-first="{first}" data-last="{last}"><title>steps {first}-{last}: empty batch'
                         '</title></rect>')
    for t in nice_ticks(y0, y1, 5):
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{LEFT + pw}" y1="{py(t)}" y2="{py(t)}"/>'
                     f'<text class="tick" x="{LEFT - 4}" y="{py(t) + 3}" text-anchor="end">{format_number(t)}</text>')
    for t in nice_ticks(x0, x1, 7):
        parts.append(f'<text class="tick" x="{px(t)}" y="{HEIGHT - 8}" text-anchor="middle">{format_number(t)}</text>')
    parts.append(f'<line class="axis" x1="{LEFT}" x2="{LEFT + pw}" y1="{TOP + ph}" y2="{TOP + ph}"/>')
    for i, s in enumerate(series):
        parts.append(_series_svg(s, COLORS[i % len(COLORS)], px, py))
    parts.append(f'<line class="cursor" x1="0" x2="0" y1="{TOP}" y2="{TOP + ph}" visibility="hidden"/></svg>')
    return "".join(parts)


def _segments(steps: Sequence[int], values: Sequence[float | None]) -> list[list[tuple[int, float]]]:
    """Runs of consecutive non-gap points."""
    segs: list[list[tuple[int, float]]] = [[]]
    for x, y in zip(steps, values):
        if y is None:
            if segs[-1]:
                segs.append([])
        else:
            segs[-1].append((x, y))
    return [s for s in segs if s]


def _series_svg(s: Series, color: str, px, py) -> str:  # noqa: ANN001 (the chart's coordinate maps)
    segs = _segments(s.steps, s.values)
    d = " ".join("M" + " L".join(f"{px(x)},{py(y)}" for x, y in seg) for seg in segs)
    out = [f'<g class="series" data-key="{escape(s.label)}" stroke="{color}" fill="{color}">']
    if d:
        out.append(f'<path d="{d}" fill="none" stroke-width="1.6" stroke-linejoin="round"/>')
    few = sum(len(seg) for seg in segs) <= 40
    for seg in segs:
        for x, y in seg if few or len(seg) == 1 else ():
            out.append(f'<circle cx="{px(x)}" cy="{py(y)}" r="2.4"/>')
    out.append("</g>")
    return "".join(out)


__all__ = ["COLORS", "Series", "format_number", "line_chart_svg", "nice_ticks", "value_range"]
