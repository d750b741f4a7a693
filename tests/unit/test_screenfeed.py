"""The screen model behind its backlog: a keystroke never waits for pyte, and a look at the screen
with nothing new keeps what the next redraw is compared with."""

from __future__ import annotations

from tests.unit.test_redraws import reads
from waaah_agent.core.supervise.screen import Screen
from waaah_agent.runtime.supervise.screenfeed import SCREEN_BACKLOG, SCREEN_PIECE, ScreenFeed


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def scrolling(lines: int) -> bytes:
    return b"".join(b"line %d of a long answer, scrolling the screen\r\n" % n for n in range(lines))


def fed_to_pyte(feed: ScreenFeed) -> list[int]:
    """The sizes of what the screen model gives pyte from now on (the real model, watched)."""
    fed: list[int] = []
    real_feed = feed.screen.feed
    feed.screen.feed = lambda data: (fed.append(len(data)), real_feed(data))[1]  # type: ignore[method-assign]
    return fed


def finish(feed: ScreenFeed, clock: Clock, keys_waiting=None):
    """Run updates until the view is there (the clock jumps to each asked-for time)."""
    for _ in range(100_000):
        view, again = feed.update(keys_waiting)
        if view is not None:
            return view
        clock.now = max(clock.now, again)
    raise AssertionError("the screen model never finished")


def test_typed_keys_stop_the_work_after_the_piece_in_hand():
    clock = Clock()
    feed = ScreenFeed(120, 40, clock=clock, work_clock=lambda: 0.0)  # a slice would never end
    feed.add(scrolling(400), clock.now)
    clock.now += 1.0  # the agent went quiet: no pacing pause
    view, again = feed.update(lambda: True)
    assert view is None and again is not None and again <= clock.now
    assert feed.done == SCREEN_PIECE  # one piece of pyte work, then the keys


def test_rows_are_rendered_a_few_at_a_time_when_keys_wait():
    clock = Clock()
    feed = ScreenFeed(120, 40, clock=clock, work_clock=lambda: 0.0)
    data = scrolling(60)
    feed.add(data, clock.now)
    clock.now += 1.0
    steps = 0
    while True:
        view, _ = feed.update(lambda: True)
        steps += 1
        if view is not None:
            break
    assert steps > len(data) // SCREEN_PIECE + 1  # the 40 changed rows took more than one step
    whole = Screen(120, 40)
    whole.feed(data)
    assert view.lines == whole.view().lines and view.cursor_row == whole.view().cursor_row


def test_the_view_is_the_same_with_and_without_keys_typed_meanwhile():
    data = b"\x1b[2J\x1b[H" + scrolling(120) + "│ box ✦ 漢字 end".encode()
    views = []
    for keys in (None, lambda: True):
        clock = Clock()
        feed = ScreenFeed(80, 24, clock=clock)
        feed.add(data, clock.now)
        clock.now += 1.0
        views.append(finish(feed, clock, keys))
    assert views[0] == views[1]


def test_a_look_with_nothing_new_keeps_the_redraw_to_compare_with():
    """The machine looks at the screen on its own timer; such a look must not make the next of
    gemini's waiting redraws a new frame for pyte (3.5 KB, ~10 ms of CPU each time)."""
    clock = Clock()
    feed = ScreenFeed(120, 40, clock=clock)
    fed = fed_to_pyte(feed)
    recorded = [r for r in reads() if len(r) > 3000][:30]
    for n, frame in enumerate(recorded):
        clock.now += 0.05
        if feed.add(frame, clock.now) is not None:
            clock.now += 0.05
            finish(feed, clock)
        if n % 3 == 0:  # the machine's own look, nothing new since
            clock.now += 0.01
            finish(feed, clock)
    assert sum(fed) <= 2 * len(recorded[0]), fed  # the first frames only: the rest repeat


def test_keys_typed_on_a_screen_not_read_yet_get_that_screen_read_as_it_was():
    """The record waits to know what the keys answered (a secret-entry screen hides its echo):
    the reading stops where the keys came, whatever the agent drew after them, and the screen
    model keeps up without its pause while keys wait."""
    clock = Clock()
    feed = ScreenFeed(80, 24, clock=clock)
    feed.add(b"\x1b[2J\x1b[HEnter your API key: ", clock.now)
    feed.mark()  # a key typed before the dialog was read
    at_key = feed.seq
    for ch in b"AIzaSECRET":
        clock.now += 0.01
        feed.add(bytes([ch]), clock.now)
        feed.mark()
    clock.now += 0.01
    feed.add(b"\x1b[2J\x1b[HAPI key saved", clock.now)  # the dialog is gone by now
    clock.now += 0.05
    view = finish(feed, clock)
    assert feed.read_seq == at_key
    assert "Enter your API key:" in view.text() and "AIza" not in view.text()
    views = [view]
    while feed.read_seq < feed.seq:
        views.append(finish(feed, clock))
    assert len(views) == 12  # one reading per key, then the rest
    assert "Enter your API key: AIzaSECRET" in views[-2].text()
    assert "API key saved" in views[-1].text()


def test_keys_typed_on_a_repeated_redraw_leave_what_came_after_them_to_be_read():
    """The part up to the keys only repeats the last redraw (a spinner frame): what the agent
    drew after the keys (a usage-limit banner) still gets its reading, without more output."""
    clock = Clock()
    feed = ScreenFeed(80, 24, clock=clock)
    head = b"\x1b[2K\x1b[1A\x1b[2K\x1b[G"  # erase the line above, go up, erase, draw again
    frame = head + b"\xe2\xa0\x8b Working (3s)\r\n > "
    feed.add(head + b"an answer " * SCREEN_PIECE + b"\r\n" + frame, clock.now)
    assert feed.update(lambda: True)[0] is None  # keys cut the work short: the frame is in hand
    clock.now += 0.01
    feed.add(frame.replace(b"(3s)", b"(4s)"), clock.now)  # a repeat, come meanwhile
    feed.mark()  # keys typed on it
    feed.add(b"\r\nSIMULATED usage limit reached", clock.now + 0.01)
    clock.now += 0.05
    finish(feed, clock)  # the screen before the repeat
    view, again = feed.update()  # the screen as the keys found it: the repeat changed nothing
    assert view is not None and "Working" in view.text() and feed.read_seq < feed.seq
    assert again is not None, "what came after the keys is left unread until the agent writes again"
    clock.now = max(clock.now, again)
    assert "usage limit reached" in finish(feed, clock).text()


def test_a_key_waiting_for_its_screen_is_owed_no_pause():
    clock = Clock()
    work = [0.0]
    feed = ScreenFeed(80, 24, clock=clock, work_clock=lambda: work[0])
    real = feed.screen.feed
    feed.screen.feed = lambda data: (work.__setitem__(0, work[0] + 0.01), real(data))[1]  # type: ignore[method-assign]
    feed.add(scrolling(3), clock.now)
    view, again = feed.update()  # a piece of pyte work while the agent is writing ...
    assert view is None and again > clock.now + 0.1  # ... owes a pause (pyte's share)
    feed.add(b"the dialog", clock.now)
    assert feed.when(clock.now) > clock.now + 0.1
    feed.mark()  # keys typed on it: read it now
    assert feed.when(clock.now) == clock.now
    done_before = feed.done
    feed.update()
    assert feed.done > done_before  # no pause: the work went on at once


def test_a_flood_keeps_exactly_the_recent_past_of_the_backlog():
    clock = Clock()
    feed = ScreenFeed(120, 40, clock=clock, work_clock=lambda: 0.0)
    sent = bytearray()
    n = 0
    while len(sent) <= 5 * SCREEN_BACKLOG:  # reads of uneven sizes, each told apart
        data = b"".join(b"[%d:%d]" % (n, i) for i in range(n % 700 + 1))
        feed.add(data, clock.now)
        sent += data
        n += 1
    assert feed.flooded and SCREEN_BACKLOG <= feed.backlog_size <= SCREEN_BACKLOG * 4
    kept = b"".join(data for _, data in feed.backlog)
    assert len(kept) == feed.backlog_size and bytes(sent).endswith(kept)
    clock.now += 1.0
    feed._take()
    assert feed.backlog_size == 0 and not feed.backlog and bytes(sent).endswith(feed.todo)


def test_a_redraw_cut_in_two_by_the_reads_waits_for_its_rest_even_when_the_machine_looks_between():
    """gemini's frames come now and then as ~2 KB, then ~1.5 KB 10 ms later. A look at the screen
    between the two (the machine's own timer) fed the first part to pyte, and the next frames
    then had nothing to be compared with: ~30 KB of pyte (~0.1 s of CPU) for one cut frame."""
    clock = Clock()
    feed = ScreenFeed(120, 40, clock=clock)
    fed = fed_to_pyte(feed)
    frames = [r for r in reads() if len(r) > 3000][:12]
    feed.add(frames[0], clock.now)
    clock.now += 0.05
    first = finish(feed, clock)
    fed.clear()
    for n, frame in enumerate(frames[1:]):
        clock.now += 0.05
        if n % 3:
            assert feed.add(frame, clock.now) is None  # a whole repeat: nothing to do
            continue
        assert feed.frames.begins(frame[:2057]) and not feed.frames.begins(frame)
        feed.add(frame[:2057], clock.now)
        clock.now += 0.001
        view, _ = feed.update()  # the machine's look, 1 ms after the first part
        assert view is not None and view.lines == first.lines  # the screen as it was: the part waits
        clock.now += 0.008
        feed.add(frame[2057:], clock.now)
        clock.now += 0.03
        finish(feed, clock)
    assert fed == [], fed  # every frame repeated: pyte took nothing
    # A first part whose rest never comes is taken once the output was quiet for SCREEN_DELAY.
    short = frames[1][:2057]
    feed.add(short, clock.now)
    assert feed.update()[0] is not None and not fed
    clock.now += 0.031
    finish(feed, clock)
    assert sum(fed) == len(short) and not feed.unread


def test_while_the_agent_writes_the_screen_is_read_at_most_every_screen_every_but_at_once_for_keys():
    """codex redraws its spinner ~30 times a second while it waits on a tool: each reading costs
    rendering, the rules and the machine besides pyte, so readings come SCREEN_EVERY apart. A key
    typed still gets its screen read after SCREEN_DELAY."""
    from waaah_agent.runtime.supervise.screenfeed import SCREEN_DELAY, SCREEN_EVERY

    clock = Clock()
    feed = ScreenFeed(120, 40, clock=clock)
    first = feed.add(b"\x1b[2J\x1b[H\x1b[9;1H\xe2\x80\xa2\x1b[37;3H", clock.now)
    assert first == clock.now + SCREEN_DELAY  # the first output after a quiet time: soon
    clock.now = first
    finish(feed, clock)
    read_at = clock.now
    clock.now += 0.032
    tick = feed.add(b"\x1b[34;1H\xe2\x80\xa2\x1b[37;3H", clock.now)
    assert tick == read_at + SCREEN_EVERY  # a spinner's tick waits for its turn
    feed.mark()  # a key typed on it
    clock.now += 0.01
    assert feed.add(b"x", clock.now) == clock.now + SCREEN_DELAY  # read for the key as before
    view = finish(feed, clock)  # the screen the key was typed on ...
    assert "•" in view.lines[33] and clock.now < read_at + SCREEN_EVERY
    view = finish(feed, clock)  # ... then what came after it
    assert view.lines[36].startswith("  x")
