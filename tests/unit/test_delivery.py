"""Typing a prompt: paste once, Enter separately, confirm; retries that never give up."""

from waaah_agent.core.supervise.delivery import ENTER, PASTE_END, PASTE_START, Delivery, Observation, Phase

READY_EMPTY = Observation(ready=True, busy=False, input_empty=True)
READY_DRAFT = Observation(ready=True, busy=False, input_empty=False, draft=True)
BUSY = Observation(ready=False, busy=True, input_empty=True)  # working: the emptied box shows


def test_paste_then_enter_after_the_delay_then_confirmed_by_the_emptied_box():
    d = Delivery("workflow", "line one\nline two", enter_delay=0.5)
    assert d.step(10.0, READY_EMPTY).writes == [PASTE_START + b"line one\nline two" + PASTE_END]
    assert d.step(10.2, READY_DRAFT).writes == []  # too early for Enter
    assert d.step(10.5, READY_DRAFT).writes == [ENTER]
    assert d.step(10.6, BUSY).writes == []
    assert d.phase is Phase.CONFIRMED and d.done


def test_never_types_over_a_human_draft_or_into_a_busy_agent():
    d = Delivery("continue", "go on")
    assert d.step(0.0, READY_DRAFT).writes == []
    assert d.step(1.0, BUSY).writes == []
    assert d.phase is Phase.WAITING


def test_an_enter_the_cli_drops_goes_again_three_times_then_ever_more_slowly_and_the_text_never_twice():
    """A CLI that drops every Enter: the text stays in the box, in sight; the Enter goes again 3 s
    apart three times, then after 5, 10, 20, 40 and every 60 s for as long as the run lasts (given
    up on, the workflow would never reach the agent and nothing nudges an agent without it)."""
    d = Delivery("workflow", "x", enter_delay=0.2, confirm_timeout=3.0)
    writes, notes, t = d.step(0.0, READY_EMPTY).writes, [], 0.2
    while t < 3600.0:
        step = d.step(t, READY_DRAFT)
        writes += step.writes
        notes += [(t, step.note)] if step.writes else []
        t = round(t + 0.1, 1)
    assert sum(w.startswith(PASTE_START) for w in writes) == 1
    assert not d.done and d.phase is Phase.ENTERED
    gaps = [round(b[0] - a[0], 1) for a, b in zip(notes, notes[1:], strict=False)]
    assert gaps[:9] == [3.0, 3.0, 3.0, 5.0, 10.0, 20.0, 40.0, 60.0, 60.0]
    assert 64 <= writes.count(ENTER) <= 67  # 8 in the first 84 s, then one a minute
    assert notes[3][1] == "enter re-sent (3): the prompt is still in the input box; again in 5 s if it stays"
    assert d.step(t, BUSY).writes == [] and d.phase is Phase.CONFIRMED  # taken at last


def test_past_the_quick_re_sends_an_enter_goes_only_to_an_agent_at_its_prompt():
    """The slow re-sends wait for the agent to be ready: never into a busy agent that still shows
    the text (a CLI that queues it), nor while the user types over it."""
    d = Delivery("workflow", "x", enter_delay=0.2, confirm_timeout=1.0)
    d.step(0.0, READY_EMPTY)
    t = 0.2
    while d.enters <= d.max_enter_retries:
        d.step(t, READY_DRAFT)
        t += 0.1
    assert d.next_deadline(t) == d.since + 5.0
    busy_with_draft = Observation(ready=False, busy=True, input_empty=False, draft=True)
    assert [w for k in range(200) for w in d.step(d.since + 5 + k * 0.5, busy_with_draft).writes] == []
    theirs = Observation(ready=True, busy=False, input_empty=False, draft=True, typed_at=d.since + 1)
    assert d.step(d.since + 120, theirs).writes == []
    assert d.step(d.since + 121, READY_DRAFT).writes == [ENTER]


def test_busy_with_the_text_still_in_the_box_is_not_taken_and_enter_is_sent_again():
    """gemini --resume draws its input box, then loads the history under "Resuming session..."
    (a busy marker) and drops an Enter typed meanwhile: the text stays in the box."""
    d = Delivery("continue", "go on", enter_delay=0.2, confirm_timeout=3.0)
    d.step(0.0, READY_EMPTY)
    assert d.step(0.3, READY_DRAFT).writes == [ENTER]
    busy_with_draft = Observation(ready=False, busy=True, input_empty=False, draft=True)
    assert d.step(1.0, busy_with_draft).writes == [] and d.phase is Phase.ENTERED
    busy_no_box = Observation(ready=False, busy=True, input_empty=False)  # the redraw
    assert d.step(2.0, busy_no_box).writes == [] and d.phase is Phase.ENTERED
    assert d.step(3.4, READY_DRAFT).writes == [ENTER]  # the Enter again, never the text
    assert d.step(3.6, BUSY).writes == [] and d.phase is Phase.CONFIRMED


def test_a_box_emptied_before_the_enter_gets_the_text_again_once_and_no_enter_into_nothing():
    """gemini --resume shows its box, takes the paste, then redraws (no box for a moment) and
    shows the box empty once its history is loaded: the text was never sent."""
    d = Delivery("continue", "go on", enter_delay=0.5, paste_timeout=5.0)
    d.step(0.0, READY_EMPTY)
    assert d.step(0.1, READY_DRAFT).writes == []  # seen in the box; too early for Enter
    redrawing = Observation(ready=False, busy=False, input_empty=False)
    assert d.step(0.6, redrawing).writes == []  # no box: no Enter into nothing
    assert d.step(1.0, READY_EMPTY).writes == [d.payload()] and d.phase is Phase.PASTED
    assert d.step(1.6, READY_DRAFT).writes == [ENTER]
    assert d.step(1.8, BUSY).writes == [] and d.phase is Phase.CONFIRMED
    again = Delivery("continue", "go on", enter_delay=0.5, paste_timeout=5.0)
    again.step(0.0, READY_EMPTY)
    again.step(0.1, READY_DRAFT)
    again.step(1.0, READY_EMPTY)
    again.step(1.1, READY_DRAFT)
    writes = [w for t in (2.0, 3.0, 6.0) for w in again.step(t, READY_EMPTY).writes]
    assert writes == [] and again.phase is Phase.WAITING  # not again at once: a wait first


def test_an_empty_input_box_after_enter_confirms():
    d = Delivery("workflow", "x", enter_delay=0.2)
    d.step(0.0, READY_EMPTY)
    d.step(0.3, READY_DRAFT)
    assert d.step(0.4, READY_EMPTY).writes == [] and d.phase is Phase.CONFIRMED


def test_a_paste_that_never_shows_up_goes_in_again_later_and_never_gets_an_enter_into_nothing():
    d = Delivery("workflow", "x", enter_delay=0.2, paste_timeout=2.0)
    d.step(0.0, READY_EMPTY)
    assert d.step(1.0, READY_EMPTY).writes == []
    step = d.step(2.5, READY_EMPTY)
    assert step.writes == [] and step.note == "paste never appeared in the input box: pasting again in 5 s"
    assert not d.done and d.phase is Phase.WAITING and d.next_deadline(2.5) == 7.5
    assert d.step(7.0, READY_EMPTY).writes == []  # the wait is not over
    assert d.step(7.5, BUSY).writes == []  # never into a busy agent
    step = d.step(7.6, READY_EMPTY)
    assert step.writes == [d.payload()] and step.note == "pasted again (1)"
    assert d.step(7.9, READY_DRAFT).writes == [ENTER]
    assert d.step(8.0, BUSY).writes == [] and d.phase is Phase.CONFIRMED


def test_the_waits_between_pastes_that_never_show_double_up_to_a_minute_for_the_whole_run():
    d = Delivery("send", "x", enter_delay=0.2, paste_timeout=2.0)
    t, pastes, notes = 0.0, 0, []
    while t < 3600.0:
        step = d.step(t, READY_EMPTY)
        pastes += sum(w == d.payload() for w in step.writes)
        notes += [step.note] if step.note and step.note.startswith("paste never") else []
        t += 0.5
    assert not d.done
    waits = [note.rsplit(" in ", 1)[1] for note in notes]
    assert waits[:6] == ["5 s", "10 s", "20 s", "40 s", "60 s", "60 s"]
    assert 55 <= pastes <= 62  # about one a minute after the first few (each waits 2 s to show)


def test_a_paste_drawn_late_gets_its_enter_and_is_not_pasted_twice():
    d = Delivery("workflow", "x", enter_delay=0.2, paste_timeout=2.0)
    d.step(0.0, READY_EMPTY)
    d.step(2.5, READY_EMPTY)  # not shown in time
    step = d.step(3.0, READY_DRAFT)  # there after all
    assert step.writes == [] and step.note == "the paste showed late: Enter follows"
    assert d.step(3.2, READY_DRAFT).writes == [ENTER]
    assert d.step(3.4, BUSY).writes == []
    assert d.phase is Phase.CONFIRMED


def test_a_draft_the_user_typed_after_an_unseen_paste_is_theirs_never_submitted():
    d = Delivery("workflow", "x", enter_delay=0.2, paste_timeout=2.0)
    d.step(0.0, READY_EMPTY)
    d.step(2.5, READY_EMPTY)
    theirs = Observation(ready=True, busy=False, input_empty=False, draft=True, typed_at=2.8)
    assert [w for t in (3.0, 8.0, 20.0) for w in d.step(t, theirs).writes] == []
    assert d.phase is Phase.WAITING  # their draft stays theirs; the paste waits for an empty box
    assert d.step(21.0, READY_EMPTY).writes == [d.payload()]


def test_paste_end_marker_inside_the_text_cannot_end_the_paste_early():
    d = Delivery("workflow", "a\x1b[201~b")
    assert d.payload() == PASTE_START + b"a\\x1b[201~b" + PASTE_END
    # A marker rebuilt by taking out the one nested in it: keys after it would exit the agent.
    hostile = Delivery("send", "innocent\x1b[20\x1b[201~1~\x03\x03")
    body = hostile.payload()[len(PASTE_START) : -len(PASTE_END)]
    assert b"\x1b" not in body and b"\x03" not in body
    assert body == b"innocent\\x1b[20\\x1b[201~1~\\x03\\x03"


def test_a_prompt_s_lines_and_tabs_stay_and_its_other_controls_are_typed_visibly():
    d = Delivery("workflow", "one\r\ntwo\rthree\n\tfour\x7f\u202e")
    assert d.payload() == PASTE_START + b"one\ntwo\nthree\n\tfour\\x7f\\u202e" + PASTE_END


def test_deadlines_drive_the_next_step():
    d = Delivery("workflow", "x", enter_delay=0.5, confirm_timeout=3.0)
    assert d.next_deadline(0.0) is None
    d.step(1.0, READY_EMPTY)
    assert d.next_deadline(1.0) == 1.5
    d.step(1.5, READY_DRAFT)
    assert d.next_deadline(1.5) == 4.5


def test_no_enter_is_re_sent_into_a_screen_that_does_not_show_the_text_in_the_box():
    """A dialog drawn over the box (a tool to approve, a question): Enter would answer it."""
    d = Delivery("workflow", "x", enter_delay=0.2, confirm_timeout=1.0)
    d.step(0.0, READY_EMPTY)
    assert d.step(0.3, READY_DRAFT).writes == [ENTER]
    dialog = Observation(ready=False, busy=False, input_empty=False)
    assert [w for t in (1.5, 3.0, 9.0, 60.0) for w in d.step(t, dialog).writes] == []
    assert d.phase is Phase.ENTERED and d.next_deadline(60.0) is None  # the screen moves it on
    assert d.step(61.0, READY_DRAFT).writes == [ENTER]  # the text back in the box
    assert d.step(61.5, BUSY).writes == [] and d.phase is Phase.CONFIRMED


def test_a_draft_the_user_typed_after_the_enter_is_never_submitted_by_a_re_sent_enter():
    d = Delivery("workflow", "x", enter_delay=0.2, confirm_timeout=1.0)
    d.step(0.0, READY_EMPTY)
    assert d.step(0.3, READY_DRAFT).writes == [ENTER]
    theirs = Observation(ready=True, busy=False, input_empty=False, draft=True, typed_at=0.8)
    assert [w for t in (1.5, 5.0, 30.0) for w in d.step(t, theirs).writes] == []
    assert d.phase is Phase.ENTERED


def test_a_paste_a_frozen_cli_has_not_read_is_never_pasted_again_and_shows_once_it_reads():
    """A CLI stopped or too busy to read leaves the paste in its terminal's input queue; the box
    looks empty, yet a second paste would land beside the first once it catches up."""
    d = Delivery("workflow", "x", enter_delay=0.2, paste_timeout=2.0)
    d.step(0.0, READY_EMPTY)
    frozen = Observation(ready=True, busy=False, input_empty=True, unread=len(d.payload()))
    step = d.step(2.5, frozen)
    assert (
        step.note
        == "paste never appeared in the input box: pasting again in 5 s, once the agent has read it (it has not yet)"
    )
    assert [w for t in range(3, 60) for w in d.step(float(t), frozen).writes] == []
    assert d.next_deadline(60.0) == 61.0  # asked again each second while it stays unread
    step = d.step(61.0, READY_DRAFT)  # it read the paste and drew it
    assert step.note == "the paste showed late: Enter follows"
    assert d.step(61.2, READY_DRAFT).writes == [ENTER]


def test_a_paste_read_and_dropped_goes_in_again_only_once_the_cli_had_time_to_draw_it():
    d = Delivery("workflow", "x", enter_delay=0.2, paste_timeout=2.0)
    d.step(0.0, READY_EMPTY)
    busy_reading = Observation(ready=True, busy=False, input_empty=True, unread=3)
    d.step(2.5, busy_reading)
    d.step(7.9, busy_reading)
    assert d.step(8.0, READY_EMPTY).writes == []  # read just now: not drawn yet, maybe
    assert d.step(9.8, READY_EMPTY).writes == []
    assert d.step(9.9, READY_EMPTY).writes == [d.payload()]


def test_where_the_input_queue_cannot_be_asked_a_paste_never_shown_still_goes_in_again():
    d = Delivery("workflow", "x", enter_delay=0.2, paste_timeout=2.0)
    unknown = Observation(ready=True, busy=False, input_empty=True, unread=None)
    d.step(0.0, unknown)
    d.step(2.5, unknown)
    assert d.step(7.5, unknown).writes == [d.payload()]
