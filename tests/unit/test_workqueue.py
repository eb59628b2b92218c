"""The work queue's order: higher priorities first (kube-scheduler's PrioritySort), ties in
arrival order; de-duplication, the dirty set and ``take`` keep one decision per key."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import REGISTRY

from controller.operator.workqueue import QueueShutDown, WorkQueue


def depth() -> float:
    return REGISTRY.get_sample_value("orca_queue_depth") or 0.0


def drain(queue: WorkQueue) -> list[str]:
    async def scenario() -> list[str]:
        out = []
        while len(queue):
            key = await queue.get()
            queue.done(key)
            out.append(key)
        return out

    return asyncio.run(scenario())


def test_higher_priority_first_ties_in_arrival_order() -> None:
    priorities = {"low-1": -5, "a": 0, "high-1": 1000, "b": 0, "high-2": 1000, "c": 0}
    queue = WorkQueue(priority_of=priorities.__getitem__)
    queue.add_all(["low-1", "a", "high-1", "b", "high-2", "c", "a"])
    assert drain(queue) == ["high-1", "high-2", "a", "b", "c", "low-1"]


def test_without_priorities_it_is_fifo() -> None:
    queue = WorkQueue()
    queue.add_all(["c", "a", "b", "a"])
    assert drain(queue) == ["c", "a", "b"]


def test_a_waiting_key_whose_priority_changed_moves_and_is_handed_out_once() -> None:
    priorities = {"a": 0, "b": 0, "c": 0}
    queue = WorkQueue(priority_of=priorities.__getitem__)
    queue.add_all(["a", "b", "c"])
    priorities["c"] = 10
    queue.add("c")
    priorities["a"] = -1
    queue.add("a")
    assert len(queue) == 3
    assert drain(queue) == ["c", "b", "a"]


def test_a_waiting_key_whose_priority_turned_negative_moves_behind_the_others() -> None:
    """PriorityClass values may be negative (only the upper bound is reserved: scheduling
    API validation). c, added third at priority 5, drops to -2: it is handed out last, not
    kept in front under its old priority."""
    priorities = {"a": 0, "b": 0, "c": 5}
    queue = WorkQueue(priority_of=priorities.__getitem__)
    queue.add_all(["a", "b", "c"])
    priorities["c"] = -2
    queue.add("c")
    assert drain(queue) == ["a", "b", "c"]


def test_add_all_reprioritises_waiting_keys_unless_told_not_to() -> None:
    """``add_all`` is ``add`` for each key: by default a waiting key whose priority changed
    moves."""
    priorities = {"a": 0, "b": 0, "c": 0}
    queue = WorkQueue(priority_of=priorities.__getitem__)
    queue.add_all(["a", "b", "c"])
    priorities["c"] = 10
    queue.add_all(["c"])
    assert drain(queue) == ["c", "a", "b"]


def test_added_again_without_reprioritising_a_waiting_key_keeps_its_place_unresolved() -> None:
    """A Node change queues every Workload it could concern, most already waiting (a
    backlog's): those keep their place and their priority is not resolved again; a key not
    waiting is queued by its priority as ever."""
    priorities = {"a": 0, "b": 0, "c": 5}
    resolved: list[str] = []

    def priority_of(key: str) -> int:
        resolved.append(key)
        return priorities[key]

    queue = WorkQueue(priority_of=priority_of)
    queue.add_all(["a", "b"])
    priorities["a"] = 10  # not looked at: the caller says no priority changed
    resolved.clear()
    queue.add_all(["a", "b", "c"], reprioritise=False)
    assert resolved == ["c"]
    assert drain(queue) == ["c", "a", "b"]


def test_a_key_added_while_processing_comes_back_in_priority_order() -> None:
    priorities = {"a": 5, "b": 1}

    async def scenario() -> list[str]:
        queue = WorkQueue(priority_of=priorities.__getitem__)
        queue.add_all(["a", "b"])
        first = await queue.get()
        queue.add(first)  # dirty: not queued twice
        assert len(queue) == 1
        queue.done(first)  # back, and ahead of b again
        order = [first, await queue.get(), await queue.get()]
        return order

    assert asyncio.run(scenario()) == ["a", "a", "b"]


def test_a_key_waiting_for_another_comes_once_that_one_is_done() -> None:
    """``add_when_done``: the waiter is queued when the key it waits for is done, once however
    often it was asked, and not at all for a key that is not being processed."""

    async def scenario() -> None:
        queue = WorkQueue()
        queue.add("busy")
        assert await queue.get() == "busy"
        assert not queue.add_when_done("idle", "preemptor")  # nothing to wait for
        assert len(queue) == 0
        assert queue.add_when_done("busy", "preemptor")
        assert queue.add_when_done("busy", "preemptor")
        assert len(queue) == 0  # not before busy is done
        queue.done("busy")
        assert len(queue) == 1 and await queue.get() == "preemptor"
        queue.done("preemptor")
        queue.add("busy")
        assert await queue.get() == "busy"
        queue.done("busy")  # done again: nobody waits any more
        assert len(queue) == 0

    asyncio.run(scenario())


def test_take_takes_a_waiting_key_out_and_refuses_one_being_processed() -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        queue.add_all(["a", "b"])
        assert queue.take("b")  # waiting: taken out of the queue
        assert len(queue) == 1
        queue.add("b")  # changed meanwhile: dirty, back when released
        assert len(queue) == 1
        got = await queue.get()
        assert got == "a"
        assert not queue.take("a")  # being processed by the loop
        queue.done("a")
        queue.done("b")
        assert await queue.get() == "b"
        queue.done("b")
        assert len(queue) == 0 and queue.backing_off == 0  # nothing waiting, no timers,
        assert not queue.busy("a") and not queue.busy("b")  # nothing processing

    asyncio.run(scenario())


def test_claim_takes_only_a_key_that_is_neither_waiting_nor_processing() -> None:
    """The rebalancer's ``claim``: refused while the key waits or is processed; granted, the
    key is processing (``get`` does not hand it out) and an ``add`` meanwhile brings it back
    once released."""

    async def scenario() -> None:
        queue = WorkQueue()
        queue.add_all(["waiting", "handed"])
        assert not queue.claim("waiting")
        assert await queue.get() == "waiting"
        assert not queue.claim("waiting")  # being processed
        assert queue.claim("idle")
        assert queue.processing("idle") and queue.busy("idle")
        assert not queue.claim("idle")  # once
        queue.add("idle")  # changed while claimed: dirty, not handed out
        assert await queue.get() == "handed"
        assert len(queue) == 0
        queue.done("idle")
        assert await queue.get() == "idle"

    asyncio.run(scenario())


def test_queue_depth_counts_what_waits_through_take_and_get() -> None:
    """``orca_queue_depth`` is the number of keys waiting: a key taken out of the queue
    (``take``) or handed out (``get``) no longer waits; taking a key that was not waiting
    changes nothing."""

    async def scenario() -> list[float]:
        queue = WorkQueue()
        queue.add_all(["a", "b", "c"])
        seen = [depth()]
        assert queue.take("b")  # waiting: leaves the queue
        seen.append(depth())
        assert queue.take("z")  # not waiting: nothing leaves
        seen.append(depth())
        await queue.get()
        seen.append(depth())
        return seen

    assert asyncio.run(scenario()) == [3.0, 2.0, 2.0, 1.0]


def test_shut_down_hands_out_nothing_more_and_wakes_every_waiter() -> None:
    """client-go's ``ShutDown``: the workers waiting in ``get`` end, so does any later ``get``
    (keys still waiting included), and a key being processed is still released by ``done``."""

    async def scenario() -> None:
        queue = WorkQueue()
        queue.add("a")
        assert await queue.get() == "a"
        waiters = [asyncio.create_task(queue.get()) for _ in range(3)]
        await asyncio.sleep(0)
        queue.add("b")
        await asyncio.sleep(0)
        (first,) = [w for w in waiters if w.done()]  # one waiter took b
        assert first.result() == "b"
        queue.add("c")  # waiting when the queue shuts down: never handed out
        queue.shut_down()
        results = await asyncio.gather(*waiters, return_exceptions=True)
        assert sum(isinstance(r, QueueShutDown) for r in results) == 2
        with pytest.raises(QueueShutDown):
            await queue.get()
        queue.done("a")
        queue.done("b")
        assert not queue.busy("a") and not queue.busy("b")

    asyncio.run(scenario())


@pytest.mark.parametrize("order", ["later-first", "earlier-first"])
def test_two_timers_for_one_key_the_earlier_one_wins(order: str) -> None:
    """One timer per key (client-go's delaying queue keeps a key's earliest ready time:
    util/workqueue/delaying_queue.go, ``insert``: "if the entry is already in the queue,
    update the time if it's earlier"). A NoExecute deadline that moved closer (a newer taint
    with a shorter toleration) must not wait for the older, later one: the key is queued
    after the shorter delay, once, and the later timer no longer fires."""

    async def scenario() -> list[str]:
        queue = WorkQueue()
        delays = [0.3, 0.05] if order == "later-first" else [0.05, 0.3]
        for delay in delays:
            queue.add_after("k", delay)
        assert queue.backing_off == 1  # one timer
        got = await asyncio.wait_for(queue.get(), 5)  # the 0.05 s timer, not the 0.3 s one
        queue.done(got)
        await asyncio.sleep(0.4)  # past the later one: nothing else is queued meanwhile
        return [got, *(["again"] if len(queue) else [])]

    assert asyncio.run(scenario()) == ["k"]


def test_a_later_timer_does_not_put_off_an_earlier_one() -> None:
    """The earlier timer stays when a later one is asked for (delaying_queue.go keeps the
    earliest ready time): a retry an hour away must not postpone a NoExecute deadline due
    now. The key comes after the short delay, and no timer is left behind."""

    async def scenario() -> tuple[str, int]:
        queue = WorkQueue()
        queue.add_after("k", 0.05)
        queue.add_after("k", 3600)
        got = await asyncio.wait_for(queue.get(), 5)  # long before the hour
        return got, queue.backing_off

    assert asyncio.run(scenario()) == ("k", 0)


@pytest.mark.parametrize("delay", [0.0, -1.0])
def test_no_delay_queues_the_key_at_once(delay: float) -> None:
    async def scenario() -> None:
        queue = WorkQueue()
        queue.add_after("k", delay)
        assert (len(queue), queue.backing_off) == (1, 0)  # queued now, no timer
        assert queue.busy("k") and await queue.get() == "k"

    asyncio.run(scenario())


def test_a_worker_cancelled_after_being_woken_hands_the_key_to_another() -> None:
    """One key wakes one waiting worker; if that worker is cancelled before it runs (the
    operator stopping one of its workers), the wake-up goes to the next waiting worker, or
    the key would wait for an unrelated add."""

    async def scenario() -> str:
        queue = WorkQueue()
        first = asyncio.create_task(queue.get())
        second = asyncio.create_task(queue.get())
        await asyncio.sleep(0)  # both wait
        queue.add("k")  # wakes the first only
        first.cancel()  # before it runs
        got = await asyncio.wait_for(second, 5)
        assert first.cancelled()
        return got

    assert asyncio.run(scenario()) == "k"


def test_a_reprioritised_key_keeps_its_arrival_among_its_new_equals() -> None:
    """c, raised to 5, ranks among the keys of priority 5 by when it first arrived: before d,
    added later at 5."""
    priorities = {"a": 0, "b": 0, "c": 0, "d": 5}
    queue = WorkQueue(priority_of=priorities.__getitem__)
    queue.add_all(["a", "b", "c"])
    priorities["c"] = 5
    queue.add("c")
    queue.add("d")
    assert drain(queue) == ["c", "d", "a", "b"]


def test_many_priority_changes_keep_the_order_and_each_key_once() -> None:
    """A waiting key re-prioritised again and again (its Workload's PriorityClass edited)
    leaves stale entries behind; past a bound they are dropped in one rebuild, and the order
    and the once-per-key rule hold through it."""
    priorities = {"a": 0, "b": 0, "c": 0}
    queue = WorkQueue(priority_of=priorities.__getitem__)
    queue.add_all(["a", "b", "c"])
    for step in range(200):
        priorities["b"] = step % 7
        queue.add("b")
    priorities["a"] = 10
    queue.add("a")
    assert len(queue) == 3
    assert drain(queue) == ["a", "b", "c"]  # b ends at 199 % 7 = 3
