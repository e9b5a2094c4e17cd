"""A fleet's burst is held, not dropped: the queue in front of ``lineage serve``'s routes.

Every request but health takes its turn here (``FairAdmission``, on the event loop, no lock needed):

- at most ``LINEAGE_MAX_CLIENT_REQUESTS`` requests of one client (its token, else its address) are worked on at once,
  and at most twice that of all clients; the others **wait** in their client's line instead of being refused;
- a free place goes to the clients in turn (round robin over the clients that wait), so a client that sends a
  thousand requests at once delays another client by at most its share, never starves it;
- a request waits at most ``LINEAGE_INTAKE_WAIT_SECONDS``; then it is answered **503** with ``Retry-After`` (what
  the stock clients retry: openlineage-python's ``http`` transport, openlineage-java's httpclient once);
- **429** with ``Retry-After`` only past the capacity: ``LINEAGE_INTAKE_CAPACITY`` requests held at once (worked on
  or waiting), of which one client may hold at most half. ``Retry-After`` is how long the requests held take to
  drain, at the pace measured (at least 1 s, at most 60 s).

Sixty-four stock openlineage-python clients sharing the ``writer`` token and posting 20 events each at once are one
client here: eight of their requests are stored at a time, the rest wait a fraction of a second, none is refused
(``tests/integration/test_fleet_burst.py``).
"""

from __future__ import annotations

import asyncio
import math
from collections import deque


class FairAdmission:
    def __init__(self, per_client: int, capacity: int, wait_seconds: float):
        self.per_client = per_client
        self.working_limit = 2 * per_client
        self.capacity = capacity
        self.client_share = max(1, capacity // 2)
        self.wait_seconds = max(0.0, wait_seconds)
        self.working: dict[str, int] = {}
        self.held: dict[str, int] = {}
        self.total_working = self.total_held = 0
        self.lines: dict[str, deque[asyncio.Future]] = {}
        self.turns: deque[str] = deque()  # the clients that wait, in the order their turns come
        self.seconds_per_request = 0.01  # moving average of the time a request is worked on
        self.refused = {"capacity": 0, "share": 0, "waited": 0}

    def retry_after(self) -> int:
        """Seconds until the requests held now are likely worked off."""
        drain = self.total_held * self.seconds_per_request / self.working_limit
        return max(1, min(60, math.ceil(drain)))

    async def enter(self, client: str) -> str | None:
        """Wait for ``client``'s turn; None once it may go, else why not: ``capacity``, ``share`` (past what is
        held at once, of all clients or of this one) or ``waited`` (its wait ran out)."""
        if self.total_held >= self.capacity:
            self.refused["capacity"] += 1
            return "capacity"
        if self.held.get(client, 0) >= self.client_share:
            self.refused["share"] += 1
            return "share"
        self.held[client] = self.held.get(client, 0) + 1
        self.total_held += 1
        if not self.lines.get(client) and self._may_work(client):
            self._start(client)
            return None
        turn = asyncio.get_running_loop().create_future()
        self.lines.setdefault(client, deque()).append(turn)
        if client not in self.turns:
            self.turns.append(client)
        try:
            await asyncio.wait_for(asyncio.shield(turn), self.wait_seconds)
            return None
        except TimeoutError:
            if turn.done():
                return None  # its turn came as the wait ran out: it was counted as working
            self._leave_line(client, turn)
            self.refused["waited"] += 1
            return "waited"
        except BaseException:
            if turn.done():
                self.leave(client, 0.0)
            else:
                self._leave_line(client, turn)
            raise

    def leave(self, client: str, seconds: float) -> None:
        """A request of ``client`` that was worked on is done (it took ``seconds``): the next turn goes."""
        self.seconds_per_request = 0.9 * self.seconds_per_request + 0.1 * seconds
        self.working[client] -= 1
        self.total_working -= 1
        if not self.working[client]:
            del self.working[client]
        self._forget(client)
        self._next_turns()

    def _may_work(self, client: str) -> bool:
        return self.total_working < self.working_limit and self.working.get(client, 0) < self.per_client

    def _start(self, client: str) -> None:
        self.working[client] = self.working.get(client, 0) + 1
        self.total_working += 1

    def _forget(self, client: str) -> None:
        self.held[client] -= 1
        self.total_held -= 1
        if not self.held[client]:
            del self.held[client]

    def _leave_line(self, client: str, turn: asyncio.Future) -> None:
        line = self.lines.get(client)
        if line is not None and turn in line:
            line.remove(turn)
            if not line:
                del self.lines[client]
                self.turns.remove(client)
        self._forget(client)

    def _next_turns(self) -> None:
        """Free places go to the waiting clients in turn."""
        while self.total_working < self.working_limit and self.turns:
            for _ in range(len(self.turns)):
                client = self.turns[0]
                self.turns.rotate(-1)
                if self.working.get(client, 0) < self.per_client:
                    line = self.lines[client]
                    turn = line.popleft()
                    if not line:
                        del self.lines[client]
                        self.turns.remove(client)
                    self._start(client)
                    turn.set_result(None)
                    break
            else:
                return
