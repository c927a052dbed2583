"""Session bookkeeping for ``n > 1`` and the idle timeout: reserved step indices are given
back when unused, and a session serving a call is never idle."""

from __future__ import annotations

from rllm.producers.gateway.sessions import SessionRegistry
from rllm.schemas.types import Task


def test_a_reservation_of_n_indices_is_given_back_only_when_nothing_came_after() -> None:
    s = SessionRegistry().open("s", "r", Task(task_id="t"))
    first = s.take_index(4)
    assert (first, s.next_index) == (0, 4)
    assert s.give_back(first, 4, 1) and s.next_index == 1  # the unused three come back
    first = s.take_index(3)
    later = s.take_index()  # another call of the session took index 4
    assert later == 4 and not s.give_back(first, 3, 1)  # the caller fills 2 and 3
    assert s.next_index == 5


def test_a_session_with_a_call_in_flight_is_never_idle() -> None:
    reg = SessionRegistry()
    busy, quiet = reg.open("busy", "r", Task(task_id="t")), reg.open("q", "r", Task(task_id="t"))
    busy.in_flight = 1
    later = max(busy.last_seen, quiet.last_seen) + 10
    assert [s.session_id for s in reg.idle(5, now=later)] == ["q"]
