"""`waaah report` of a scripted night: the terminal summary, and the HTML page rendered by a real
headless Chromium (Debian's package), checked in its DOM and its pixels."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.doubles.scripted_night import EXPECTED, PRICES, SESSION, write_night
from tests.runtime.helpers import WAAAH, retry_until

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium() -> str:
    if CHROMIUM is None:
        pytest.fail("chromium is not installed: run `make browser` (make test installs it)")
    return CHROMIUM


def waaah(ws: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(ws.parent / "home"), "TZ": "UTC"}
    return subprocess.run(
        [WAAAH, *args],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def night(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    write_night(ws)
    prices = tmp_path / "home" / ".config" / "waaah-agent" / "prices.toml"
    prices.parent.mkdir(parents=True)
    prices.write_text(PRICES)  # the user keeps a price table: the report shows the cost too
    return ws


def test_the_terminal_summary_tells_the_night(night):
    done = waaah(night, "report")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert SESSION in out and "from Mon 20:00:00 to Tue 04:00:00 (8h 00m)" in out
    assert re.search(r"usage limit\s+12\.\d %  1h 00m", out), out
    assert f"tasks served: {EXPECTED['tasks']}" in out and "task-2  blocked" in out
    assert f"nudges: {EXPECTED['nudges']} ({EXPECTED['answered']} answered" in out
    assert "after exit code 1" in out and "tokens: 300,000 in, 8,000 out" in out
    assert f"cost: {EXPECTED['cost']} at your price table's prices" in out
    assert waaah(night, "report", SESSION[:12]).stdout == out  # a unique start of the id
    assert waaah(night, "report", "--since", "100000d").returncode == 0


def test_the_html_page_renders_its_timeline_and_numbers_in_chromium(night, tmp_path):
    page = tmp_path / "night.html"
    done = waaah(night, "report", "--html", str(page))
    assert done.returncode == 0 and f"wrote {page}" in done.stdout, done.stderr
    text = page.read_text()
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", text)  # nothing to fetch when viewed
    browser = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    browser += ["--virtual-time-budget=5000", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(
        [*browser, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    ).stdout
    # plotly drew the timeline (one group of bars per state seen, the markers) and the tokens.
    timeline = dom[dom.index('id="timeline"') : dom.index('id="tokens"')]
    assert timeline.count('class="trace bars"') == 6, timeline.count('class="trace bars"')
    assert timeline.count('class="scatterpts"') >= 1 and "interventions" in timeline
    for kind in ("working", "in the loop", "usage limit", "restarting"):
        assert (
            f'class="legendtext" text-anchor="start" x="40" y="4.680000000000001" data-unformatted="{kind}"'
            in timeline
            or kind in timeline
        )
    numbers = dict(re.findall(r'data-n="([a-z-]+)">([\d,]+)<', dom))
    assert numbers == {
        "tasks": "2",
        "nudges": "3",
        "restarts": "1",
        "tokens-in": "300,000",
        "tokens-out": "8,000",
    }
    assert f'data-n="cost">{EXPECTED["cost"]}<' in dom and "cost (USD)" in dom
    assert re.search(r'data-kind="usage limit">.*?<td class="share">12\.\d %</td>', dom)

    shot = tmp_path / "night.png"
    subprocess.run([*browser, "--window-size=1280,1400", f"--screenshot={shot}", page.as_uri()],
                   capture_output=True, timeout=120)  # fmt: skip
    retry_until(lambda: shot.exists() and shot.stat().st_size > 0, timeout=10)
    from PIL import Image

    pixels = Image.open(shot).convert("RGB")
    counts = {colour: n for n, colour in pixels.getcolors(maxcolors=1 << 24) or []}
    loop, limit = counts.get((21, 101, 192), 0), counts.get((106, 27, 154), 0)  # the timeline's bars
    # The bars' areas tell the night: 5 h 21 min in the loop, 1 h 00 min waiting out a limit.
    assert limit > 2000, limit
    assert 4.0 < loop / limit < 6.5, (loop, limit)


def test_no_session_bad_since_and_a_fifo_for_events(tmp_path, night):
    empty = tmp_path / "empty"
    empty.mkdir()
    done = waaah(empty, "report")
    assert done.returncode == 7 and "no sessions" in done.stderr
    done = waaah(night, "report", "--since", "yesterday")
    assert done.returncode == 2 and "12h" in done.stderr
    done = waaah(night, "report", "nonesuch")
    assert done.returncode == 7 and "waaah sessions" in done.stderr
    events = night / ".waaah" / "sessions" / SESSION / "events.jsonl"
    events.unlink()
    os.mkfifo(events)
    done = waaah(night, "report", timeout=20)
    assert done.returncode == 0 and "no events" in done.stdout and "note: skipped" in done.stdout
    missing = tmp_path / "missing-dir"
    done = waaah(night, "report", "--html", str(missing / "x.html"))
    assert done.returncode == 8 and "Traceback" not in done.stderr
    # The page's own path and a fix that works as pasted, never the temporary file beside it.
    assert done.stderr == (
        f"waaah: cannot write {missing / 'x.html'}: No such file or directory; "
        f"its folder does not exist: create it (mkdir -p {missing})\n"
    )
    subprocess.run(["sh", "-c", f"mkdir -p {missing}"], check=True)
    assert waaah(night, "report", "--html", str(missing / "x.html")).returncode == 0
    done = waaah(night, "report", "--html", str(missing))  # a folder: the page needs a file name
    assert done.returncode == 2 and done.stderr == (
        f"waaah: --html {missing} is a folder; give the page a file name: --html {missing / 'night.html'}\n"
    )
    assert ".tmp" not in done.stderr


def test_a_broken_price_table_costs_the_report_only_its_cost_line(night, tmp_path):
    prices = tmp_path / "home" / ".config" / "waaah-agent" / "prices.toml"
    prices.write_text('["x"]\ninput = 1\n')  # no output price
    done = waaah(night, "report")
    assert done.returncode == 0, done.stderr
    assert "tokens: 300,000 in, 8,000 out" in done.stdout and "cost:" not in done.stdout
    assert "note: no cost shown: the price table" in done.stdout and "no output price" in done.stdout


def test_an_events_file_over_64_mb_is_reported_from_its_end(night):
    """A session kept for weeks: its events file is read from the end (capped), said, never
    loaded whole; the night in its last part is still told right."""
    events = next((night / ".waaah" / "sessions").iterdir()) / "events.jsonl"
    tail = events.read_bytes()
    old = json.dumps({"ts": "2026-10-01T00:00:00+00:00", "event": "state", "state": "busy", "pad": "x" * 900})
    with events.open("wb") as fh:
        block = (old + "\n").encode() * 1024
        for _ in range(70 * 1024 * 1024 // len(block) + 1):
            fh.write(block)
        fh.write(tail)
    done = waaah(night, "report", SESSION)
    assert done.returncode == 0, done.stderr
    assert "is larger than 64 MB: the report covers its end" in done.stdout
    assert (
        f"tasks served: {EXPECTED['tasks']}" in done.stdout and "tokens: 300,000 in, 8,000 out" in done.stdout
    )


def test_session_names_reach_the_timeline_as_text_never_as_plotly_markup():
    """Plotly renders its labels as a pseudo-HTML: a session folder named like markup must be
    shown as its name (escaped; plotly shows the entities as the characters)."""
    from waaah_agent.core.night.records import Marker, Night, Stretch
    from waaah_agent.runtime.night.html import page, timeline_figure

    big, link = '<span style="font-size:400px">BIG', '<a href="https://example.com/x">click</a>'
    night = Night(
        sessions=[big, link],
        start=1000.0,
        end=1600.0,
        stretches=[
            Stretch(big, 1000.0, 1300.0, "working", "<b>why</b>"),
            Stretch(link, 1300.0, 1600.0, "idle"),
        ],
        markers=[Marker(big, 1100.0, "nudge", "<i>cause</i>"), Marker(link, 1400.0, "restart", "x")],
    )
    figure = timeline_figure(night).to_plotly_json()
    data, layout = json.dumps(figure["data"], default=str), json.dumps(figure["layout"], default=str)
    assert "<" not in data and ">" not in data, data
    assert "<" not in layout and ">" not in layout
    assert '&lt;span style=\\"font-size:400px\\"&gt;BIG' in data
    text = page(night, "night", str, [])
    assert big not in text and link not in text and "&lt;a href=" in text
