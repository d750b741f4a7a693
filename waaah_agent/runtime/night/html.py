"""`waaah report --html FILE`: the night on one self-contained page (plotly.js inline, no network).

A timeline of the agent's state per session with every intervention marked (its cause on
hover), the share of the night in each state, tokens over time, and tables of tasks, nudges,
restarts and `waaah run` trees. The figures are plotly's; the rest is plain HTML, escaped, with
the control characters of the data shown (core/printable.py). Plotly renders its texts (axis
labels and ticks, hover texts, titles, legend names) as a pseudo-HTML of its own: each text
from the data is escaped for it (:func:`_text`), so a session folder named ``<a href=...>`` is
shown as its name, never as a link. However long the night, the page stays small enough to
open (plotly.js is most of it): the night comes bounded (core/night_report.py), and the runs
table keeps its first :data:`RUN_ROWS` rows.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from datetime import datetime
from typing import Any

from waaah_agent.core.night.records import KINDS, TEXT_CAP, Night
from waaah_agent.core.night.report import duration
from waaah_agent.core.printable import one_line

#: A colour per kind (the legend's order is KINDS).
COLOURS = {
    "working": "#2e7d32",
    "in the loop": "#1565c0",
    "idle": "#9e9e9e",
    "needs someone": "#ef6c00",
    "usage limit": "#6a1b9a",
    "restarting": "#c62828",
    "starting": "#80cbc4",
}
MARKER_COLOURS = {
    "nudge": "#fbc02d",
    "restart": "#c62828",
    "Esc on a stall": "#d84315",
    "prompt typed again": "#6a1b9a",
}
RUN_ROWS = 500


def _when(t: float) -> datetime:
    return datetime.fromtimestamp(t).astimezone()


def _text(value: str) -> str:
    """A text for plotly to render: one line, its ``<``, ``>`` and ``&`` escaped (plotly shows the
    entities as the characters; quotes mean nothing outside its tags)."""
    return html.escape(one_line(value), quote=False)


def timeline_figure(night: Night) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    for kind in KINDS:
        parts = [s for s in night.stretches if s.kind == kind]
        if not parts:
            continue
        fig.add_trace(
            go.Bar(
                name=_text(kind),
                orientation="h",
                y=[_text(s.session) for s in parts],
                base=[_when(s.start) for s in parts],
                x=[s.seconds * 1000 for s in parts],  # a date axis counts in milliseconds
                marker_color=COLOURS[kind],
                hovertext=[_text(f"{kind} for {duration(s.seconds)}: {s.why}"[:300]) for s in parts],
                hoverinfo="text",
            )
        )
    if night.markers:
        fig.add_trace(
            go.Scatter(
                name="interventions",
                mode="markers",
                y=[_text(m.session) for m in night.markers],
                x=[_when(m.t) for m in night.markers],
                marker={
                    "symbol": "triangle-down",
                    "size": 12,
                    "color": [MARKER_COLOURS.get(m.kind, "#212121") for m in night.markers],
                    "line": {"width": 1, "color": "#000"},
                },
                hovertext=[_text(f"{m.kind}: {m.cause}"[:300]) for m in night.markers],
                hoverinfo="text",
            )
        )
    fig.update_layout(
        barmode="overlay",
        xaxis={"type": "date", "title": "time"},
        yaxis={"title": ""},
        height=180 + 60 * max(1, len(night.sessions)),
        margin={"l": 20, "r": 20, "t": 30, "b": 40},
        legend={"orientation": "h"},
        title="The agent's state, and what waaah did (hover for the cause)",
    )
    return fig


def tokens_figure(night: Night) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    times = [_when(t) for t, _, _ in night.tokens]
    fig.add_trace(go.Scatter(name="input", x=times, y=[i for _, i, _ in night.tokens], mode="lines+markers"))
    fig.add_trace(go.Scatter(name="output", x=times, y=[o for _, _, o in night.tokens], mode="lines+markers"))
    if night.costs:  # the user keeps a price table: the cost on a second axis
        fig.add_trace(
            go.Scatter(
                name="cost (USD)",
                x=[_when(t) for t, _ in night.costs],
                y=[usd for _, usd in night.costs],
                mode="lines",
                line={"dash": "dot"},
                yaxis="y2",
            )
        )
        fig.update_layout(yaxis2={"title": "US dollars", "overlaying": "y", "side": "right"})
    fig.update_layout(
        title="Tokens and cost over the night (running totals)"
        if night.costs
        else "Tokens over the night (running totals)",
        height=320,
        margin={"l": 20, "r": 20, "t": 40, "b": 40},
    )
    return fig


def page(night: Night, title: str, clock: Callable[[float], str], runs: list[dict[str, Any]]) -> str:
    """The whole page as text."""
    import plotly.io as pio

    e = html.escape
    shares, seconds = night.shares(), night.seconds()
    rows = "".join(
        f'<tr data-kind="{e(k)}"><td><span class="swatch" style="background:{COLOURS[k]}"></span>{e(k)}</td>'
        f'<td class="share">{v * 100:.1f} %</td><td>{e(duration(seconds[k]))}</td></tr>'
        for k, v in shares.items()
    )
    answered = night.count("answered")
    tokens = night.tokens[-1] if night.tokens else (0, 0, 0)
    numbers = (
        f'<ul id="numbers"><li>tasks served: <b data-n="tasks">{night.count("tasks")}</b></li>'
        f'<li>nudges: <b data-n="nudges">{night.count("nudges")}</b> ({answered} answered)</li>'
        f'<li>restarts: <b data-n="restarts">{night.count("restarts")}</b></li>'
        f'<li>tokens: <b data-n="tokens-in">{tokens[1]:,}</b> in, <b data-n="tokens-out">{tokens[2]:,}</b> out</li>'
        + (
            f'<li>cost: <b data-n="cost">${night.costs[-1][1]:,.2f}</b> at your prices</li>'
            if night.costs
            else ""
        )
        + "</ul>"
    )
    timeline = pio.to_html(timeline_figure(night), full_html=False, include_plotlyjs=True, div_id="timeline")
    charts = timeline
    if night.tokens:
        charts += pio.to_html(tokens_figure(night), full_html=False, include_plotlyjs=False, div_id="tokens")
    tasks = _table(
        "tasks",
        ["started", "task", "took", "outcome"],
        [
            [clock(t.start), t.task_id, duration(t.end - t.start) if t.end else "-", t.outcome]
            for t in night.tasks
        ],
        night.count("tasks"),
    )
    nudges = _table(
        "nudges",
        ["at", "kind", "why", "answered"],
        [[clock(n.t), n.kind, n.reason, "yes" if n.answered else "no"] for n in night.nudges],
        night.count("nudges"),
    )
    restarts = _table(
        "restarts",
        ["at", "after", "why"],
        [[clock(r.t), r.after, r.reason] for r in night.restarts],
        night.count("restarts"),
    )
    tree = _table(
        "runs",
        ["run", "agent", "outcome", "took", "tokens in/out"],
        [[r["indent"] + r["id"], r["agent"], r["outcome"], r["took"], r["tokens"]] for r in runs[:RUN_ROWS]],
        len(runs),
    )
    window = f"{clock(night.start)} to {clock(night.end)} ({duration(night.end - night.start)})"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{e(one_line(title))}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.5em; color: #212121; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; }}
td, th {{ border-bottom: 1px solid #ddd; padding: 0.2em 0.8em; text-align: left; }}
.swatch {{ display: inline-block; width: 0.9em; height: 0.9em; margin-right: 0.4em; vertical-align: middle; }}
</style></head><body>
<h1>{e(one_line(title))}</h1>
<p id="window">{e(window)}</p>
<h2>Where the night went</h2>
<table id="utilisation"><tr><th>state</th><th>share</th><th>time</th></tr>{rows}</table>
{numbers}
{charts}
<h2>Tasks served</h2>{tasks}
<h2>Nudges</h2>{nudges}
<h2>Restarts</h2>{restarts}
<h2>waaah run trees</h2>{tree}
</body></html>
"""


def _table(name: str, head: list[str], rows: list[list[str]], total: int) -> str:
    """The rows (a sample of ``total``, said when not all are there), each cell escaped and cut."""
    e = html.escape
    if not rows:
        return f'<p id="{name}">none</p>'
    top = "".join(f"<th>{e(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{e(one_line(c)[:TEXT_CAP])}</td>" for c in row) + "</tr>" for row in rows
    )
    note = (
        f'<p class="sample">{len(rows)} of {total} shown, spread over the night</p>'
        if total > len(rows)
        else ""
    )
    return f'<table id="{name}"><tr>{top}</tr>{body}</table>{note}'
