"""The fair queue in front of ``lineage serve`` (``include/lineage/api/admission.py``): a burst waits instead of being
refused, free places go to the waiting clients in turn (a client with a thousand requests waiting cannot starve
another), the wait is bounded (503), and only past the capacity, or past one client's half of it, is a request
refused (429)."""

from __future__ import annotations

import asyncio

from include.lineage.api.admission import FairAdmission


async def _enter(admission: FairAdmission, client: str, started: list, results: dict) -> None:
    results.setdefault(client, []).append(await admission.enter(client))
    started.append(client)


def test_a_late_client_gets_a_place_within_one_round_however_many_requests_the_others_hold():
    async def settle() -> None:
        for _ in range(10):
            await asyncio.sleep(0)

    async def scenario() -> list[str]:
        admission = FairAdmission(per_client=2, capacity=1000, wait_seconds=60)
        started: list[str] = []
        results: dict = {}
        tasks = [
            asyncio.ensure_future(_enter(admission, hog, started, results)) for hog in ("a", "b") for _ in range(50)
        ]
        await settle()
        assert started.count("a") == 2 and started.count("b") == 2 and admission.total_working == 4
        late = asyncio.ensure_future(_enter(admission, "late", started, results))
        await settle()
        assert "late" not in started, "every place is taken: it waits, it is not refused"
        order = []
        for client in ("a", "b", "a", "b"):  # places free one at a time, each given to a waiting client in turn
            before = len(started)
            admission.leave(client, 0.01)
            await settle()
            order += started[before:]
        for task in tasks:
            task.cancel()
        late.cancel()
        await settle()
        return order

    order = asyncio.run(scenario())
    assert len(order) == 4 and "late" in order[:3], f"the late client's turn came within one round: {order}"


def test_a_wait_is_bounded_and_only_past_the_capacity_or_a_clients_share_is_a_request_refused():
    async def scenario() -> tuple:
        admission = FairAdmission(per_client=1, capacity=4, wait_seconds=0.05)  # 2 worked on, a client's share 2
        assert await admission.enter("a") is None  # worked on
        a_waits = asyncio.ensure_future(admission.enter("a"))  # past a's 1 at once: waits
        await asyncio.sleep(0)
        share = await admission.enter("a")  # a holds 2, its half of the capacity
        other = await admission.enter("b")  # b is worked on at once
        c_waits = asyncio.ensure_future(admission.enter("c"))  # 2 worked on, all of them: c waits
        await asyncio.sleep(0)
        full = await admission.enter("d")  # 4 held: the capacity
        waited = await asyncio.gather(a_waits, c_waits)
        return share, other, full, waited, admission.refused, admission.retry_after()

    share, other, full, waited, refused, retry_after = asyncio.run(scenario())
    assert share == "share" and other is None and full == "capacity"
    assert waited == ["waited", "waited"], "each waited its bounded time, then was answered (503 by the server)"
    assert refused == {"capacity": 1, "share": 1, "waited": 2} and 1 <= retry_after <= 60
