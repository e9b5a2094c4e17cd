"""The machine's speed beside the bench's figures.

This VM's cores switch between a fast and a slow state, in stretches of seconds to minutes, with little in between
(docs/performance.md, "this machine's cores change speed"): the same fixed loop takes about 0.27 s or about 0.50 s of
CPU time, so CPU-seconds move with the state and do not escape it. The whole suite took 21.6 min in a fast morning
and 48-60 min in slow ones; ``lineage.overhead_ratio`` was 1.032 ± 0.005 fast and 1.049 ± 0.010 slow. A figure is
read beside the speed its runs met, so a thread of the bench times a fixed unit of Python work, in its own CPU time
(``time.thread_time``: waiting for the GIL or a core costs it nothing), every ``interval`` seconds.
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

UNIT_ITERATIONS = 20_000  # 0.55-0.7 ms of CPU on a fast core (27 November): under 0.2 % of one core every 0.5 s
# The slow state takes about 1.85 times the fast one's CPU per unit, and samples fall near one or the other: a
# sample above 1.4 times the fastest tenth's is counted slow.
SLOW_FACTOR = 1.4


def time_one_unit() -> float:
    """CPU seconds of this thread for one fixed unit of work."""
    started = time.thread_time()
    total = 0
    for i in range(UNIT_ITERATIONS):
        total += i * i % 7
    return time.thread_time() - started


def summary(unit_seconds: list[float]) -> dict:
    """Median, min and max CPU milliseconds per unit, and the share of samples in the slow state; None without a
    sample (a section shorter than the probe's interval)."""
    if not unit_seconds:
        return {"samples": 0, "median_ms": None, "min_ms": None, "max_ms": None, "slow_share": None}
    ordered = sorted(unit_seconds)
    fast = statistics.median(ordered[: max(1, len(ordered) // 10)])
    return {
        "samples": len(ordered),
        "median_ms": statistics.median(ordered) * 1000,
        "min_ms": ordered[0] * 1000,
        "max_ms": ordered[-1] * 1000,
        "slow_share": sum(value > SLOW_FACTOR * fast for value in ordered) / len(ordered),
    }


@dataclass
class SpeedProbe:
    """``with SpeedProbe() as probe:`` times a unit every ``interval`` seconds in a daemon thread until the block
    ends; ``probe.section(name)`` marks a part of the bench, and ``report()`` summarises the whole and each part."""

    interval: float = 0.5
    samples: list[tuple[float, float]] = field(default_factory=list)  # (time.monotonic() at the end, CPU seconds)
    sections: dict[str, tuple[float, float]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _paused: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> SpeedProbe:
        self._thread = threading.Thread(target=self._run, name="bench-speed-probe", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if not self._paused.is_set():
                unit = time_one_unit()
                self.samples.append((time.monotonic(), unit))

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No sample starts while the block runs: for a measurement made in this very process (the explorer's query
        latencies), whose threads would share the GIL with the probe's unit."""
        self._paused.set()
        try:
            yield
        finally:
            self._paused.clear()

    @contextlib.contextmanager
    def section(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.sections[name] = (started, time.monotonic())

    def between(self, start: float, end: float) -> list[float]:
        return [unit for at, unit in list(self.samples) if start <= at <= end]

    def report(self) -> dict:
        return {
            "interval_seconds": self.interval,
            "unit_iterations": UNIT_ITERATIONS,
            "whole": summary([unit for _, unit in list(self.samples)]),
            "sections": {name: summary(self.between(*span)) for name, span in self.sections.items()},
        }


def to_markdown(report: dict) -> str:
    """One paragraph: the probe's median and the share of slow samples, for the whole bench and each section."""
    whole = report["whole"]
    if not whole["samples"]:
        return ""

    def slow(part: dict) -> str:
        return "no sample" if part["slow_share"] is None else f"{part['slow_share']:.0%} slow"

    parts = ", ".join(f"{name} {slow(part)}" for name, part in report["sections"].items())
    return (
        f"\nMachine speed (a fixed unit of Python work timed in CPU time every {report['interval_seconds']:g} s, "
        f"{whole['samples']} samples): median {whole['median_ms']:.2f} ms per unit ({whole['min_ms']:.2f}–"
        f"{whole['max_ms']:.2f}); the cores were in their slow state in {whole['slow_share']:.0%} of the samples"
        f"{f' ({parts})' if parts else ''}. Figures measured while the share differs are not comparable.\n"
    )
