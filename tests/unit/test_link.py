"""The session link's decisions (core/mcp/link.py): a wait's answer lands in the session, a task reaches
the next CLI instance exactly once, a reservation the server never sent is taken."""

from __future__ import annotations

import json
from typing import Any

from waaah_agent.core.mcp.link import (
    AckOutcome,
    Action,
    Answer,
    Forward,
    Held,
    Kind,
    Link,
    Note,
    Persist,
    Reply,
    SendAck,
    StartWait,
)
from waaah_agent.core.mcp.link_wire import (
    Op,
    Reserved,
    parse_reply,
    parse_request,
    reply_line,
    request_line,
    reserved_for,
)

AGENT = "waaah-orc-gemini-1"
BODY = {"agentId": AGENT, "timeout": 290}
A, B, C = 101, 202, 303  # CLI instances (their MCP proxies' pids)
IDLE = Answer("idle", ('{"status": "IDLE"}',))


def task(task_id: str = "t-1") -> Answer:
    return Answer("task", (json.dumps({"taskId": task_id, "prompt": "do it"}),), task_id=task_id)


def of(actions: list[Action], kind: type) -> list[Any]:
    return [a for a in actions if isinstance(a, kind)]


def events(actions: list[Action]) -> list[str]:
    return [a.event for a in of(actions, Note) if a.event]


def last_saved(actions: list[Action]) -> tuple[Held, ...]:
    return of(actions, Persist)[-1].held


def test_the_normal_path_persists_then_acks_then_hands_out_and_answers_the_agents_ack() -> None:
    link = Link(AGENT)
    assert of(link.wait(1, A, BODY), StartWait) == [StartWait(BODY)]
    arrived = link.answered(task())
    # Persisted before anything else, then our ACK; nothing handed out before the ACK is back.
    assert [type(a) for a in arrived] == [Persist, SendAck] and arrived[1] == SendAck("t-1", AGENT)
    assert events(arrived) == []  # a client was waiting: nothing "kept"
    delivered = link.acked("t-1", AckOutcome.OK)
    (reply,) = of(delivered, Reply)
    assert reply.ticket == 1 and json.loads(reply.texts[0])["taskId"] == "t-1"
    assert last_saved(delivered)[0].handed_to == A and last_saved(delivered)[0].acked
    # The agent's own ack_task is answered by the session: the server has ours already.
    answered = link.agent_ack(2, {"taskId": "t-1", "agentId": AGENT})
    assert of(answered, Forward) == [] and json.loads(of(answered, Reply)[0].texts[0]) == {
        "acknowledged": True,
        "taskId": "t-1",
    }
    assert last_saved(answered) == () and link.held == []
    assert of(link.agent_ack(3, {"taskId": "t-1"}), Forward)  # once only: a second goes to the server


def test_a_task_for_a_killed_cli_is_kept_and_goes_to_the_next_instances_first_wait() -> None:
    link = Link(AGENT)
    link.wait(1, A, BODY)
    assert link.gone(1) == []  # the CLI died: its wait goes on for the session
    arrived = link.answered(task())
    assert events(arrived) == ["task-kept"]
    assert of(link.acked("t-1", AckOutcome.OK), Reply) == []  # nobody waits
    first = link.wait(2, B, BODY)
    assert of(first, StartWait) == []  # not asked of the server again
    assert of(first, Reply)[0].ticket == 2 and link.held[0].handed_to == B


def test_a_new_instance_joins_the_wait_in_flight_instead_of_opening_another() -> None:
    link = Link(AGENT)
    assert of(link.wait(1, A, BODY), StartWait)
    link.gone(1)
    assert of(link.wait(2, B, BODY), StartWait) == []
    assert of(link.answered(IDLE), Reply) == [Reply(2, IDLE.texts, False)]
    assert of(link.wait(3, B, BODY), StartWait)  # the next wait asks the server again


def test_a_handed_task_is_never_handed_twice_to_one_instance_and_again_to_the_next() -> None:
    link = Link(AGENT)
    link.wait(1, A, BODY)
    link.answered(task())
    link.acked("t-1", AckOutcome.OK)
    # A waits again without acking: it moved on; the task is done with.
    again = link.wait(2, A, BODY)
    assert of(again, Reply) == [] and of(again, StartWait) and link.held == []
    link.gone(2)
    link.answered(task("t-2"))
    link.acked("t-2", AckOutcome.OK)
    assert of(link.wait(3, B, BODY), Reply)  # handed to B, which dies before acking
    link.gone(3)
    to_c = link.wait(4, C, BODY)
    assert of(to_c, Reply)[0].ticket == 4
    assert any("handed again" in n.text for n in of(to_c, Note))


def test_a_reply_that_cannot_be_written_keeps_the_task_for_the_next_wait() -> None:
    link = Link(AGENT)
    link.wait(1, A, BODY)
    link.answered(task())
    (reply,) = of(link.acked("t-1", AckOutcome.OK), Reply)
    assert reply.held is not None
    link.unsent(reply.held)
    assert link.held[0].handed_to is None
    assert of(link.wait(2, A, BODY), Reply)  # the same instance may have it now: it never got it


def test_an_evict_restart_that_came_during_the_restart_is_served_by_it() -> None:
    link = Link(AGENT)
    link.wait(1, A, BODY)
    link.gone(1)
    kept = link.answered(Answer("evict", ('{"controlSignal": "EVICT"}',), evict_action="RESTART"))
    assert events(kept) == ["task-kept"]
    first = link.wait(2, B, BODY)  # B is the restarted CLI
    assert events(first) == ["evict-dropped"] and of(first, Reply) == [] and of(first, StartWait)
    # The same instance asking again (it cancelled its wait, it is alive) gets it: a restart.
    link.gone(2)
    link.answered(Answer("evict", ('{"controlSignal": "EVICT"}',), evict_action="RESTART"))
    assert of(link.wait(3, B, BODY), Reply) and link.held == []


def test_an_evict_shutdown_kept_goes_to_the_next_instance_once() -> None:
    link = Link(AGENT)
    link.wait(1, A, BODY)
    link.gone(1)
    link.answered(Answer("evict", ('{"action": "SHUTDOWN"}',), evict_action="SHUTDOWN"))
    assert of(link.wait(2, B, BODY), Reply)
    assert link.held == [] and of(link.wait(3, B, BODY), StartWait)


def test_the_server_handing_a_known_task_again_gets_an_ack_and_no_second_handout() -> None:
    link = Link(AGENT)
    link.wait(1, A, BODY)
    link.answered(task())
    link.acked("t-1", AckOutcome.OK)
    link.wait(2, B, BODY)  # handed to B, not acked yet
    again = link.polled([Reserved("t-1", task().texts)])
    assert of(again, SendAck) == [SendAck("t-1", AGENT)] and of(again, Reply) == []
    # The second ACK is refused (ours is there already): the task stays B's.
    assert (
        of(link.acked("t-1", AckOutcome.REFUSED, "ACK failed: Task is not in PENDING_ACK state"), Persist)
        == []
    )
    assert link.held[0].handed_to == B


def test_an_ack_refused_before_we_held_it_means_the_server_took_the_task_back() -> None:
    link = Link(AGENT)
    link.wait(1, A, BODY)
    link.gone(1)
    link.answered(task())
    gone = link.acked("t-1", AckOutcome.REFUSED, "ACK failed: Task is not in PENDING_ACK state")
    assert last_saved(gone) == () and of(link.wait(2, B, BODY), Reply) == []


def test_an_unreachable_ack_still_hands_the_task_and_the_agents_ack_goes_to_the_server() -> None:
    link = Link(AGENT)
    link.wait(1, A, BODY)
    link.answered(task())
    assert of(link.acked("t-1", AckOutcome.UNREACHABLE, "connection refused"), Reply)
    (forward,) = of(link.agent_ack(2, {"taskId": "t-1", "agentId": AGENT}), Forward)
    assert forward.key == "t-1"
    assert last_saved(link.forwarded("t-1", AckOutcome.OK)) == ()


def test_a_reservation_seen_in_two_task_list_reads_in_a_row_is_taken_and_handed_to_the_wait() -> None:
    link = Link(AGENT, poll_every=20.0, confirm_after=3.0)
    assert link.poll_due() == 0.0  # at the start
    link.poll_started(0.0)
    assert link.polled([]) == [] and link.poll_due() is None  # nobody waits: no pace
    link.wait(1, A, BODY)
    assert link.poll_due() == 20.0
    link.poll_started(20.0)
    stuck = [Reserved("t-9", task("t-9").texts)]
    assert link.polled(stuck) == []  # seen once: a delivery may be on its way
    assert link.poll_due() == 23.0
    link.poll_started(23.0)
    taken = link.polled(stuck)
    assert events(taken) == ["task-recovered"] and of(taken, SendAck) == [SendAck("t-9", AGENT)]
    (reply,) = of(link.acked("t-9", AckOutcome.OK), Reply)
    assert reply.ticket == 1 and last_saved(link.agent_ack(2, {"taskId": "t-9"})) == ()


def test_a_reservation_seen_once_then_gone_is_not_taken() -> None:
    link = Link(AGENT)
    link.poll_started(0.0)
    link.polled([Reserved("t-9", task("t-9").texts)])
    link.poll_started(3.0)
    assert link.polled([]) == [] and link.held == []


def test_a_task_list_the_server_refuses_is_said_once_and_not_read_again() -> None:
    link = Link(AGENT)
    link.poll_started(0.0)
    said = link.polled(None, off="HTTP 401: the API key is refused")
    assert "cannot read the WAAAH server's task list" in of(said, Note)[0].text
    link.wait(1, A, BODY)
    assert link.poll_due() is None


def test_supervisor_sigkilled_between_receiving_and_persisting() -> None:
    """Nothing was written: the server still has the task reserved for the agent (PENDING_ACK, or
    requeued and reserved again); the resumed session's task list finds it."""
    resumed = Link(AGENT)
    assert resumed.start() == []
    resumed.poll_started(0.0)
    seen = [Reserved("t-1", task().texts)]
    resumed.polled(seen)
    resumed.poll_started(3.0)
    assert of(resumed.polled(seen), SendAck)
    resumed.acked("t-1", AckOutcome.OK)
    assert of(resumed.wait(1, A, BODY), Reply)


def test_supervisor_sigkilled_between_persisting_and_acking_or_handing_out() -> None:
    link = Link(AGENT)
    link.wait(1, A, BODY)
    link.gone(1)
    saved = last_saved(link.answered(task()))  # what the file holds when the SIGKILL comes
    resumed = Link(AGENT, [Held.from_json(json.loads(json.dumps(h.to_json()))) for h in saved])  # type: ignore[misc]
    start = resumed.start()
    assert of(start, SendAck) == [SendAck("t-1", AGENT)]
    assert of(resumed.wait(1, B, BODY), Reply) == []  # not before our ACK is back
    assert of(resumed.acked("t-1", AckOutcome.OK), Reply)[0].ticket == 1
    # Killed after the handout, before the agent's ack: the next supervisor's first instance
    # gets it (a pid of the earlier supervisor's means nothing now).
    again = Link(AGENT, [Held("t-1", Kind.TASK, task().texts, AGENT, True, handed_to=B)])
    assert of(again.start(), SendAck) == []
    assert of(again.wait(1, B, BODY), Reply)


def test_saved_records_of_the_wrong_shape_are_refused() -> None:
    good = Held("t-1", Kind.TASK, ("x",), AGENT, True, 5, None, False, True)
    assert Held.from_json(good.to_json()) == good
    for bad in (
        None,
        [],
        {**good.to_json(), "key": ""},
        {**good.to_json(), "kind": "other"},
        {**good.to_json(), "texts": "x"},
        {**good.to_json(), "acked": "yes"},
        {**good.to_json(), "handed_to": True},
        {**good.to_json(), "agent_id": 3},
    ):
        assert Held.from_json(bad) is None, bad


def test_the_wire_lines_round_trip_and_refuse_other_shapes() -> None:
    line = request_line(Op.WAIT, 42, 7, BODY)
    request = parse_request(line.strip())
    assert request is not None and (request.op, request.pid, request.call_id, request.body) == (
        Op.WAIT,
        42,
        7,
        BODY,
    )
    for bad in (b"", b"[]", b'{"op": "x"}', b'{"op": "wait", "pid": true, "call_id": 1, "body": {}}'):
        assert parse_request(bad) is None
    assert parse_reply(reply_line(["a", "b"], True).strip()) == (("a", "b"), True)
    for bad in (b"{}", b'{"texts": [], "is_error": false}', b'{"texts": [1], "is_error": false}'):
        assert parse_reply(bad) is None


def test_only_a_pending_ack_whose_last_entry_reserves_it_for_this_agent_counts() -> None:
    def listed(status: str, *messages: str, task_id: str = "t-1") -> dict[str, Any]:
        history = [{"timestamp": 1, "status": "X", "message": m} for m in messages]
        return {"id": task_id, "status": status, "prompt": "p", "priority": "high", "history": history}

    tasks = [
        listed("PENDING_ACK", f"Reserved for agent {AGENT} (scored match)"),
        listed("PENDING_ACK", f"Reserved for agent {AGENT}-2 (scored match)", task_id="t-other"),
        listed(
            "PENDING_ACK",
            f"Reserved for agent {AGENT} (scored match)",
            "Force-retried by admin",
            task_id="t-2",
        ),
        listed("ASSIGNED", f"Reserved for agent {AGENT} (scored match)", task_id="t-3"),
        "junk",
        {"id": 5, "status": "PENDING_ACK", "history": []},
    ]
    (found,) = reserved_for(AGENT, tasks)
    assert found.task_id == "t-1"
    assert json.loads(found.texts[0]) == {
        "taskId": "t-1",
        "prompt": "p",
        "from": None,
        "priority": "high",
        "context": None,
    }
    assert reserved_for(AGENT, {"not": "a list"}) == []
