"""Maximum sustainable throughput: bracket, then bisect, over steps that each run the pipeline at one rate.

A step is sustainable when (paper Fig. 9a) every emitted tuple was received and none was dropped, the
receiving side processed at least `MIN_ACHIEVED_FRACTION` of the rate after the warm-up, and (Karimov et al.)
neither the generator's queue nor event-time latency keeps growing after the warm-up: the
fitted latency slope stays under `MAX_LATENCY_GROWTH` (ms of latency per s of run, i.e. a backlog growing
by at most that fraction of the rate) and the queue slope under the same fraction of the rate.
"""
from __future__ import annotations

import json
import socket
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np

MAX_LATENCY_GROWTH = 10.0  # ms per s: a backlog that grows by 1% of the rate
# A target that accepts every tuple but processes fewer than this share of the rate is behind, whatever its
# slopes say (a short step can end before a backlog shows in them).
MIN_ACHIEVED_FRACTION = 0.97
# A serve-mode reader commits in micro-batches, so its rate, measured over the commits of a few seconds after the
# warm-up, is off by up to a batch (4% measured at 10,000 tuples/s over 3 s of 1 s batches); the emitters pace by the
# clock, so a reader that falls behind shows in the queue's growth, which the judgement holds to 1% of the rate.
SERVE_ACHIEVED_FRACTION = 0.9


@dataclass
class Step:
    rate: float
    emitted: int
    received: int
    dropped: int
    achieved_tps: float
    queue_slope_tps: float  # growth of the generator's queue, tuples per s
    latency_p50_ms: float
    latency_p99_ms: float
    latency_slope_ms_per_s: float
    error: str | None = None
    max_latency_growth: float = MAX_LATENCY_GROWTH  # ms per s; micro-batch systems need more room for jitter
    min_achieved_fraction: float = MIN_ACHIEVED_FRACTION  # of the rate; see SERVE_ACHIEVED_FRACTION

    @property
    def sustainable(self) -> bool:
        return (self.error is None and self.dropped == 0 and self.emitted == self.received
                and self.achieved_tps >= self.min_achieved_fraction * self.rate
                and self.latency_slope_ms_per_s < self.max_latency_growth
                and self.queue_slope_tps < self.max_latency_growth / 1000 * self.rate)


@dataclass
class SearchResult:
    max_sustainable_tps: float
    tolerance: float
    steps: list
    capped: bool = False  # the search's highest rate was sustained: the result is a floor, not the limit

    @property
    def problem(self) -> str | None:
        """Why the result is not a maximum sustainable rate, or None when it is one."""
        if self.capped:
            return (f"the search's highest rate, {self.max_sustainable_tps:,.0f} tuples/s, was sustained: "
                    "the limit lies above it")
        if self.max_sustainable_tps <= 0:
            failed = self.steps[-1] if self.steps else None
            reason = f" (last step: {failed.error})" if failed is not None and failed.error else ""
            return "no rate tried was sustained" + reason
        return None

    def to_json(self) -> str:
        return json.dumps({"max_sustainable_tps": self.max_sustainable_tps, "tolerance": self.tolerance,
                           "capped": self.capped,
                           "steps": [dict(asdict(s), sustainable=s.sustainable) for s in self.steps]}, indent=2)

    def to_arrow(self):
        import pyarrow as pa
        rows = [dict(asdict(s), sustainable=s.sustainable) for s in self.steps]
        return pa.Table.from_pylist(rows).replace_schema_metadata(
            {"max_sustainable_tps": str(self.max_sustainable_tps), "tolerance": str(self.tolerance),
             "capped": str(self.capped).lower()})


@dataclass
class RepeatedSearch:
    """The same search run several times: its median, its spread, and why it cannot be reported, if so."""
    results: list

    @property
    def problem(self) -> str | None:
        return next((r.problem for r in self.results if r.problem), None) if self.results else "no search ran"

    @property
    def median_tps(self) -> float:
        return float(np.median([r.max_sustainable_tps for r in self.results]))

    @property
    def spread(self) -> tuple[float, float]:
        rates = [r.max_sustainable_tps for r in self.results]
        return min(rates), max(rates)


def search(trial: Callable[[float], Step], start: float, tolerance: float = 0.02, max_rate: float = 1e9,
           progress: Callable[[Step], None] = lambda step: None, retries: int = 1) -> SearchResult:
    """Double (or halve) from `start` until a sustainable and an unsustainable rate bracket the limit, then
    bisect until they are within `tolerance` of each other; the result is the highest sustainable rate seen.

    A rate found unsustainable is run again up to `retries` times and counts as sustainable if any run is: on a
    shared machine one stalled step must not set the limit (every run is kept in the steps)."""
    if not start > 0:
        raise ValueError(f"start rate must be > 0 tuples/s, got {start}")
    if not 0 < tolerance < 1:
        raise ValueError(f"tolerance must be in (0, 1), got {tolerance}")
    if retries < 0:
        raise ValueError(f"retries must be >= 0, got {retries}")
    steps: list[Step] = []

    def run(rate: float) -> bool:
        for _ in range(1 + retries):
            step = trial(rate)
            steps.append(step)
            progress(step)
            if step.sustainable:
                return True
        return False

    low, high = 0.0, None
    rate = start
    while True:
        if run(rate):
            low = rate
            if rate >= max_rate:
                return SearchResult(low, tolerance, steps, capped=True)
            rate = min(rate * 2, max_rate)
        else:
            high = rate
            if low > 0:
                break
            rate /= 2
            if rate < 1:
                return SearchResult(0.0, tolerance, steps)
        if high is not None and low > 0:
            break
    while (high - low) / low > tolerance:
        mid = (low + high) / 2
        if run(mid):
            low = mid
        else:
            high = mid
    return SearchResult(low, tolerance, steps)


def free_port_base(count: int) -> int:
    """A port p such that p .. p + count - 1 were free a moment ago (emitter i binds p + i)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + count < 65536 and all(_port_free(base + i) for i in range(1, count)):
            return base
    raise RuntimeError(f"no {count} consecutive free TCP ports on 127.0.0.1")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def queue_slope(results, warmup_s: float, bucket_tuples: int) -> float:
    """Summed over emitters: fitted growth of the queue after the warm-up, in tuples per s."""
    total = 0.0
    for r in results:
        samples = np.asarray([s for s in r.queue_samples if s[0] >= warmup_s], dtype=float)
        if len(samples) > 2:
            total += float(np.polyfit(samples[:, 0], samples[:, 1], 1)[0]) * bucket_tuples
    return total


def consumer_trial(template, duration_s: float, warmup_s: float, capacity_tps: float | None = None):
    """A step against the plain consumer (optionally capped at `capacity_tps`): the generator's own limit,
    or a system under test with a known capacity."""
    from dataclasses import replace

    from .generator.consumer import consume
    from .generator.emitter import Generator

    def trial(rate: float) -> Step:
        config = replace(template, rate=rate, duration_s=duration_s, port=free_port_base(template.emitters))
        generator = Generator(config).start()
        error = None
        try:
            report = consume([config.endpoint(i) for i in range(config.emitters)],
                             timeout_s=config.timeout_s + 5, capacity_tps=capacity_tps)
        except TimeoutError as exc:
            error = str(exc)
            from .generator.consumer import ConsumerReport
            report = ConsumerReport()
        results = generator.join()
        error = error or next((r.error for r in results if r.error), None)
        p50, p99, slope = report.latency_trend(warmup_s)
        return Step(rate, sum(r.emitted_tuples for r in results), report.received_tuples,
                    sum(r.dropped_tuples for r in results), report.rate_tps(warmup_s),
                    queue_slope(results, warmup_s, config.effective_bucket_tuples()), p50, p99, slope, error)

    return trial


def serve_step(rate: float, results, warmup_s: float, bucket_tuples: int, error: str | None = None,
               max_latency_growth: float = MAX_LATENCY_GROWTH) -> Step:
    """A step measured by serve-mode emitters: received = committed by the reader, latency = commit time minus
    emission time per bucket, queue = buckets retained but not yet committed."""
    samples = np.asarray([s for r in results for s in r.latency_samples], dtype=float).reshape(-1, 3)
    samples = samples[np.argsort(samples[:, 0])]
    after = samples[samples[:, 0] >= warmup_s] if (samples[:, 0] >= warmup_s).sum() > 2 else samples
    p50 = p99 = slope = achieved = 0.0
    if len(after):
        latency_ms = after[:, 1] / 1e6
        p50, p99 = (float(v) for v in np.percentile(latency_ms, [50, 99]))
        if len(np.unique(after[:, 0])) > 2:
            slope = float(np.polyfit(after[:, 0], latency_ms, 1)[0])
            span = after[-1, 0] - after[0, 0]
            achieved = float(after[after[:, 0] > after[0, 0], 2].sum() / span) if span > 0 else 0.0
    error = error or next((r.error for r in results if r.error), None)
    return Step(rate, sum(r.emitted_tuples for r in results), sum(r.committed_tuples for r in results),
                sum(r.dropped_tuples for r in results), achieved, queue_slope(results, warmup_s, bucket_tuples),
                p50, p99, slope, error, max_latency_growth, SERVE_ACHIEVED_FRACTION)
