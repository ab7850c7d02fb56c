"""The paced emission loop (paper Fig. 9b) in one process per emitter, and the Generator that runs them.

Per bucket the loop only waits for the bucket's slot, stamps the header and hands the preloaded payload to a
bounded queue (Karimov's driver-side queue); the queue drains into a PUSH socket with NOBLOCK sends. A
bucket the queue cannot take is a drop, counted in tuples and buckets. If no bucket leaves for `timeout_s`
(dead or absent consumer), the emitter stops with an error naming the endpoint.
"""
from __future__ import annotations

import collections
import multiprocessing
import time
from dataclasses import dataclass, field

from . import wire
from .workloads import DISTRIBUTIONS, WORKLOADS, make_buckets

ID_BITS_PER_EMITTER = 40  # tuple id = emitter << 40 | index of the tuple within its emitter's stream
BUCKET_PERIOD_NS = 1_000_000  # aim at one bucket per ms per emitter: small buckets at low rates
MAX_BUCKET_TUPLES = 1 << 16
SPIN_NS = 200_000  # sleep until this close to a slot, then spin, so low rates do not burn a core
QUEUE_SAMPLE_NS = 100_000_000


class GeneratorError(RuntimeError):
    """The generator could not run as asked (no consumer, consumer stopped taking buckets)."""


@dataclass
class GeneratorConfig:
    workload: str = "ysb"
    rate: float = 100_000.0  # tuples per second, all emitters together
    duration_s: float = 5.0
    emitters: int = 1
    host: str = "127.0.0.1"
    port: int = 5555  # emitter i binds port + i
    distribution: str = "uniform"
    seed: int = 42
    bucket_tuples: int = 0  # 0: derived from the rate
    preloaded_buckets: int = 16  # distinct buckets generated before the run, sent in turn
    queue_buckets: int = 0  # bound of each emitter's queue; 0: one second of buckets (at least 64)
    timeout_s: float = 5.0

    def validate(self) -> None:
        if self.workload not in WORKLOADS:
            raise ValueError(f"unknown workload {self.workload!r}; expected one of {', '.join(sorted(WORKLOADS))}")
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(
                f"unknown key distribution {self.distribution!r}; expected one of {', '.join(DISTRIBUTIONS)}")
        if not self.rate > 0:
            raise ValueError(f"rate must be > 0 tuples/s, got {self.rate}")
        if not self.duration_s > 0:
            raise ValueError(f"duration must be > 0 s, got {self.duration_s}")
        if self.emitters < 1:
            raise ValueError(f"emitters must be >= 1, got {self.emitters}")
        if self.queue_buckets < 0:
            raise ValueError(f"queue must hold >= 1 bucket (0: automatic), got {self.queue_buckets}")
        if not self.timeout_s > 0:
            raise ValueError(f"timeout must be > 0 s, got {self.timeout_s}")

    @property
    def rate_per_emitter(self) -> float:
        return self.rate / self.emitters

    def effective_bucket_tuples(self) -> int:
        if self.bucket_tuples > 0:
            return self.bucket_tuples
        return int(min(MAX_BUCKET_TUPLES, max(1, round(self.rate_per_emitter * BUCKET_PERIOD_NS / 1e9))))

    def effective_queue_buckets(self) -> int:
        # Queued entries share the preloaded payloads, so a long queue costs only its headers.
        if self.queue_buckets > 0:
            return self.queue_buckets
        return max(64, int(self.rate_per_emitter / self.effective_bucket_tuples()))

    def endpoint(self, emitter: int) -> str:
        return f"tcp://{self.host}:{self.port + emitter}"


@dataclass
class EmitterResult:
    emitter: int
    emitted_tuples: int = 0
    emitted_buckets: int = 0
    dropped_tuples: int = 0
    dropped_buckets: int = 0
    start_ns: int = 0
    end_ns: int = 0
    queue_samples: list = field(default_factory=list)  # (seconds since start, buckets queued)
    error: str | None = None

    @property
    def achieved_tps(self) -> float:
        elapsed = (self.end_ns - self.start_ns) / 1e9
        return self.emitted_tuples / elapsed if elapsed > 0 else 0.0


def _tsc_source():
    try:
        from cloudprofiler.clock import tsc
        tsc()
        return tsc
    except Exception:  # the native library is optional for the generator: fall back to the monotonic clock
        return time.perf_counter_ns


def _run_emitter(config: GeneratorConfig, index: int, results) -> None:
    import zmq

    result = EmitterResult(index)
    n = config.effective_bucket_tuples()
    payloads = [wire.encode_batch(b) for b in make_buckets(
        config.workload, n, config.preloaded_buckets, config.seed + index, config.distribution)]
    tsc = _tsc_source()
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    sock.setsockopt(zmq.SNDHWM, 16)  # small: the explicit queue below is the bounded one, and it can be sampled
    sock.setsockopt(zmq.LINGER, int(config.timeout_s * 1000))
    sock.setsockopt(zmq.SNDTIMEO, int(config.timeout_s * 1000))
    queue: collections.deque = collections.deque()
    queue_bound = config.effective_queue_buckets()
    try:
        sock.bind(config.endpoint(index))
        if not sock.poll(int(config.timeout_s * 1000), zmq.POLLOUT):
            raise GeneratorError(f"no consumer connected to {config.endpoint(index)} within {config.timeout_s} s")
        period_ns = n * 1e9 / config.rate_per_emitter
        buckets_total = max(1, int(round(config.duration_s * 1e9 / period_ns)))
        start = time.perf_counter_ns()
        result.start_ns = start
        last_sent = start
        next_sample = start
        base_id = index << ID_BITS_PER_EMITTER
        for seq in range(buckets_total):
            slot = start + int(seq * period_ns)
            now = time.perf_counter_ns()
            if slot - now > SPIN_NS:
                time.sleep((slot - now - SPIN_NS) / 1e9)
            while time.perf_counter_ns() < slot:
                pass
            header = wire.Header(wire.DATA, index, seq, base_id + seq * n, n, tsc(), time.time_ns()).pack()
            if len(queue) < queue_bound:
                queue.append((header, payloads[seq % len(payloads)]))
            else:
                result.dropped_tuples += n
                result.dropped_buckets += 1
            while queue:
                try:
                    sock.send_multipart(queue[0], flags=zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                queue.popleft()
                result.emitted_tuples += n
                result.emitted_buckets += 1
                last_sent = time.perf_counter_ns()
            now = time.perf_counter_ns()
            if now >= next_sample:
                result.queue_samples.append(((now - start) / 1e9, len(queue)))
                next_sample += QUEUE_SAMPLE_NS
            if now - last_sent > config.timeout_s * 1e9:
                raise GeneratorError(
                    f"the consumer at {config.endpoint(index)} took no bucket for {config.timeout_s} s; stopping")
        # The period is over: what is still queued goes out before the pill (blocking, bounded by SNDTIMEO).
        try:
            while queue:
                sock.send_multipart(queue[0], copy=False)
                queue.popleft()
                result.emitted_tuples += n
                result.emitted_buckets += 1
        except zmq.Again:
            raise GeneratorError(
                f"the consumer at {config.endpoint(index)} took no bucket for {config.timeout_s} s; stopping") from None
        result.end_ns = time.perf_counter_ns()
        totals = wire.Totals(result.emitted_tuples, result.emitted_buckets, result.dropped_tuples,
                             result.dropped_buckets)
        pill = wire.Header(wire.PILL, index, buckets_total, 0, 0, tsc(), time.time_ns()).pack()
        try:
            sock.send_multipart([pill, totals.pack()])
        except zmq.Again:
            raise GeneratorError(
                f"the consumer at {config.endpoint(index)} did not take the end-of-period pill within "
                f"{config.timeout_s} s") from None
    except (GeneratorError, zmq.ZMQError) as exc:
        result.error = str(exc)
        result.end_ns = result.end_ns or time.perf_counter_ns()
        sock.setsockopt(zmq.LINGER, 0)
    finally:
        sock.close()
        ctx.term()
        results.put(result)


class Generator:
    """Runs `config.emitters` emitter processes; `start()` returns at once, `join()` gives their results."""

    def __init__(self, config: GeneratorConfig):
        config.validate()
        self.config = config
        self._mp = multiprocessing.get_context("fork")
        self._results = self._mp.Queue()
        self._procs: list = []

    def start(self) -> "Generator":
        for i in range(self.config.emitters):
            proc = self._mp.Process(target=_run_emitter, args=(self.config, i, self._results), daemon=True)
            proc.start()
            self._procs.append(proc)
        return self

    def join(self) -> list[EmitterResult]:
        deadline = self.config.duration_s + 4 * self.config.timeout_s + 30
        results = [self._results.get(timeout=deadline) for _ in self._procs]
        for proc in self._procs:
            proc.join(self.config.timeout_s)
            if proc.is_alive():
                proc.kill()
        return sorted(results, key=lambda r: r.emitter)

    def run(self) -> list[EmitterResult]:
        return self.start().join()
