"""The paced emission loop (paper Fig. 9b) in one process per emitter, and the Generator that runs them.

Per bucket the loop only waits for the bucket's slot, stamps the header and offers the preloaded payload to
the emitter's transport, which is bounded (Karimov's driver-side queue): a bucket it cannot take is a drop,
counted in tuples and buckets. Two transports:

- push (default): a queue draining into a ZeroMQ PUSH socket with non-blocking sends, ended by a poison pill;
- serve (`retention.ServeTransport`): the queue is kept until the reader commits it, and readers fetch offset
  ranges on request, so a reader that restarts from a checkpoint gets the same buckets again (Spark source).

If no bucket leaves for `timeout_s` (dead or absent reader), the emitter stops with an error naming its endpoint.
"""
from __future__ import annotations

import collections
import math
import multiprocessing
import time
from dataclasses import dataclass, field

from . import wire
from .errors import GeneratorError
from .workloads import DISTRIBUTIONS, WORKLOADS, make_buckets

ID_BITS_PER_EMITTER = 40  # tuple id = emitter << 40 | index of the tuple within its emitter's stream
BUCKET_PERIOD_NS = 1_000_000  # aim at one bucket per ms per emitter: small buckets at low rates
SERVE_BUCKET_PERIOD_NS = 10_000_000  # serve readers take whole micro-batches: fewer, larger buckets cost less
MAX_BUCKET_TUPLES = 1 << 16
# far above what one emitter reaches (docs/generator.md: tens of millions of tuples/s on loopback), so that a typo
# (--rate 1e30) is refused instead of spun on
MAX_RATE_PER_EMITTER = 1e9
SPIN_NS = 200_000  # sleep until this close to a slot, then spin, so low rates do not burn a core
QUEUE_SAMPLE_NS = 100_000_000
TRANSPORTS = ("push", "serve")
SERVE_RETENTION_S = 30  # default retention of the serve transport: room for a restart from a checkpoint


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
    queue_buckets: int = 0  # bound of each emitter's queue; 0: one second of buckets (serve: 30 s), at least 64
    timeout_s: float = 5.0
    transport: str = "push"
    drain_s: float = 0.0  # serve: after the period, give the reader at most this long to commit (0: no limit)

    def validate(self) -> None:
        if self.workload not in WORKLOADS:
            raise ValueError(f"unknown workload {self.workload!r}; expected one of {', '.join(sorted(WORKLOADS))}")
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(
                f"unknown key distribution {self.distribution!r}; expected one of {', '.join(DISTRIBUTIONS)}")
        if self.transport not in TRANSPORTS:
            raise ValueError(f"unknown transport {self.transport!r}; expected one of {', '.join(TRANSPORTS)}")
        if not self.rate > 0:
            raise ValueError(f"rate must be > 0 tuples/s, got {self.rate}")
        if not self.rate <= MAX_RATE_PER_EMITTER * max(1, self.emitters):
            raise ValueError(f"rate must be at most {MAX_RATE_PER_EMITTER:.0e} tuples/s per emitter, got {self.rate}")
        if not 0 < self.duration_s < math.inf:
            raise ValueError(f"duration must be > 0 s and finite, got {self.duration_s}")
        if self.emitters < 1:
            raise ValueError(f"emitters must be >= 1, got {self.emitters}")
        if self.rate_per_emitter * self.duration_s >= 1 << ID_BITS_PER_EMITTER:
            raise ValueError(f"rate x duration must stay below 2^{ID_BITS_PER_EMITTER} tuples per emitter (its ids), "
                             f"got {self.rate_per_emitter:g} tuples/s for {self.duration_s:g} s")
        if not (1 <= self.port and self.port + self.emitters - 1 <= 65535):
            raise ValueError(f"port must be 1 to {65536 - self.emitters} with {self.emitters} emitter(s) (emitter i "
                             f"binds port + i), got {self.port}")
        if self.queue_buckets < 0:
            raise ValueError(f"queue must hold >= 1 bucket (0: automatic), got {self.queue_buckets}")
        if not self.timeout_s > 0:
            raise ValueError(f"timeout must be > 0 s, got {self.timeout_s}")
        if self.drain_s < 0:
            raise ValueError(f"drain must be >= 0 s (0: no limit), got {self.drain_s}")

    @property
    def rate_per_emitter(self) -> float:
        return self.rate / self.emitters

    def effective_bucket_tuples(self) -> int:
        if self.bucket_tuples > 0:
            return self.bucket_tuples
        period_ns = SERVE_BUCKET_PERIOD_NS if self.transport == "serve" else BUCKET_PERIOD_NS
        return int(min(MAX_BUCKET_TUPLES, max(1, round(self.rate_per_emitter * period_ns / 1e9))))

    def effective_queue_buckets(self) -> int:
        # Queued entries share the preloaded payloads, so a long queue costs only its headers.
        if self.queue_buckets > 0:
            return self.queue_buckets
        seconds = SERVE_RETENTION_S if self.transport == "serve" else 1
        return max(64, int(seconds * self.rate_per_emitter / self.effective_bucket_tuples()))

    def endpoint(self, emitter: int) -> str:
        return f"tcp://{self.host}:{self.port + emitter}"


@dataclass
class EmitterResult:
    emitter: int
    emitted_tuples: int = 0  # push: sent to the consumer; serve: taken into retention
    emitted_buckets: int = 0
    dropped_tuples: int = 0
    dropped_buckets: int = 0
    committed_tuples: int = 0  # serve: tuples the reader committed (processed)
    start_ns: int = 0
    end_ns: int = 0
    queue_samples: list = field(default_factory=list)  # (seconds since start, buckets queued)
    # serve, per bucket: (s since start, commit - emission ns, tuples)
    latency_samples: list = field(default_factory=list)
    error: str | None = None

    @property
    def achieved_tps(self) -> float:
        elapsed = (self.end_ns - self.start_ns) / 1e9
        return self.emitted_tuples / elapsed if elapsed > 0 else 0.0


def _tsc_source():
    """(the function that stamps buckets, whose TSC it reads: clock.tsc_identity(), or None where it is the monotonic
    clock in ns; its ticks per second)."""
    try:
        from cloudprofiler.clock import tsc, tsc_frequency, tsc_identity
        tsc()
        return tsc, tsc_identity(), tsc_frequency().hz
    except Exception:  # the native library is optional for the generator: fall back to the monotonic clock
        return time.perf_counter_ns, None, 1e9


PAIR_TRIES, PAIR_WIDTH_S = 3, 10e-6


def _paired(tsc, ticks_per_s: float):
    """A bucket's two stamps, (TSC, wall clock ns), read together: the wall clock between two reads of `tsc`, at their
    midpoint. Read one after the other, a switch of the GIL or the thread's preemption between them put milliseconds
    between a bucket's stamps (its event time then differed from its emission by that much); a bracket wider than
    PAIR_WIDTH_S is read again, up to PAIR_TRIES times in all, and the narrowest kept."""
    limit = ticks_per_s * PAIR_WIDTH_S

    def stamps() -> tuple[int, int]:
        width = midpoint = wall = None
        for _ in range(PAIR_TRIES):
            t0 = tsc()
            now = time.time_ns()
            t1 = tsc()
            if width is None or t1 - t0 < width:
                width, midpoint, wall = t1 - t0, t0 + (t1 - t0) // 2, now
            if width <= limit:
                break
        return midpoint, wall

    return stamps


class PushTransport:
    """A bounded queue drained into a PUSH socket without blocking; a poison pill ends the period."""

    def __init__(self, ctx, config: GeneratorConfig, index: int, result: EmitterResult):
        import zmq

        self.zmq, self.config, self.index, self.result = zmq, config, index, result
        self.endpoint = config.endpoint(index)
        self.sock = ctx.socket(zmq.PUSH)
        self.sock.setsockopt(zmq.SNDHWM, 16)  # small: the explicit queue is the bounded one, and it can be sampled
        self.sock.setsockopt(zmq.LINGER, int(config.timeout_s * 1000))
        self.sock.setsockopt(zmq.SNDTIMEO, int(config.timeout_s * 1000))
        self.sock.bind(self.endpoint)
        self.queue: collections.deque = collections.deque()
        self.bound = config.effective_queue_buckets()
        self.last_progress_ns = time.perf_counter_ns()

    def wait_for_reader(self) -> None:
        if not self.sock.poll(int(self.config.timeout_s * 1000), self.zmq.POLLOUT):
            raise GeneratorError(f"no consumer connected to {self.endpoint} within {self.config.timeout_s} s")

    def idle_until(self, deadline_ns: int) -> None:
        now = time.perf_counter_ns()
        if deadline_ns > now:
            time.sleep((deadline_ns - now) / 1e9)

    def offer(self, header: wire.Header, payload) -> bool:
        if len(self.queue) >= self.bound:
            return False
        self.queue.append((header.pack(), payload))
        return True

    def pump(self, n: int) -> None:
        while self.queue:
            try:
                self.sock.send_multipart(self.queue[0], flags=self.zmq.NOBLOCK, copy=False)
            except self.zmq.Again:
                return
            self._sent(n)

    def backlog(self) -> int:
        return len(self.queue)

    def _sent(self, n: int) -> None:
        self.queue.popleft()
        self.result.emitted_tuples += n
        self.result.emitted_buckets += 1
        self.last_progress_ns = time.perf_counter_ns()

    def finish(self, n: int, buckets_total: int, stamps) -> None:
        """What is still queued goes out before the pill (blocking, bounded by SNDTIMEO)."""
        try:
            while self.queue:
                self.sock.send_multipart(self.queue[0], copy=False)
                self._sent(n)
        except self.zmq.Again:
            raise GeneratorError(
                f"the consumer at {self.endpoint} took no bucket for {self.config.timeout_s} s; stopping") from None
        self.result.end_ns = time.perf_counter_ns()
        r = self.result
        totals = wire.Totals(r.emitted_tuples, r.emitted_buckets, r.dropped_tuples, r.dropped_buckets)
        pill = wire.Header(wire.PILL, self.index, buckets_total, 0, 0, *stamps()).pack()
        try:
            self.sock.send_multipart([pill, totals.pack()])
        except self.zmq.Again:
            raise GeneratorError(f"the consumer at {self.endpoint} did not take the end-of-period pill within "
                                 f"{self.config.timeout_s} s") from None

    def close(self, failed: bool) -> None:
        if failed:
            self.sock.setsockopt(self.zmq.LINGER, 0)
        self.sock.close()


def _run_emitter(config: GeneratorConfig, index: int, results) -> None:
    import zmq

    from .retention import ServeTransport

    result = EmitterResult(index)
    n = config.effective_bucket_tuples()
    batches = make_buckets(config.workload, n, config.preloaded_buckets, config.seed + index, config.distribution)
    payloads = [wire.encode_batch(b) for b in batches]
    tsc, clock, ticks_per_s = _tsc_source()
    stamps = _paired(tsc, ticks_per_s)
    ctx = zmq.Context()
    transport = None
    try:
        if config.transport == "serve":
            transport = ServeTransport(ctx, config, index, result, batches[0].schema, clock)
        else:
            transport = PushTransport(ctx, config, index, result)
        transport.wait_for_reader()
        period_ns = n * 1e9 / config.rate_per_emitter
        buckets_total = max(1, int(round(config.duration_s * 1e9 / period_ns)))
        start = time.perf_counter_ns()
        result.start_ns = start
        transport.last_progress_ns = start
        next_sample = start
        base_id = index << ID_BITS_PER_EMITTER
        for seq in range(buckets_total):
            slot = start + int(seq * period_ns)
            transport.idle_until(slot - SPIN_NS)
            while time.perf_counter_ns() < slot:
                pass
            header = wire.Header(wire.DATA, index, seq, base_id + seq * n, n, *stamps())
            if not transport.offer(header, payloads[seq % len(payloads)]):
                result.dropped_tuples += n
                result.dropped_buckets += 1
            transport.pump(n)
            now = time.perf_counter_ns()
            if now >= next_sample:
                result.queue_samples.append(((now - start) / 1e9, transport.backlog()))
                next_sample += QUEUE_SAMPLE_NS
            if now - transport.last_progress_ns > config.timeout_s * 1e9:
                raise GeneratorError(
                    f"the consumer at {config.endpoint(index)} took no bucket for {config.timeout_s} s; stopping")
        transport.finish(n, buckets_total, stamps)
    except (GeneratorError, zmq.ZMQError) as exc:
        result.error = str(exc)
        result.end_ns = result.end_ns or time.perf_counter_ns()
    finally:
        if transport is not None:
            transport.close(failed=result.error is not None)
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

    @property
    def endpoints(self) -> list[str]:
        return [self.config.endpoint(i) for i in range(self.config.emitters)]

    def start(self) -> "Generator":
        for i in range(self.config.emitters):
            proc = self._mp.Process(target=_run_emitter, args=(self.config, i, self._results), daemon=True)
            proc.start()
            self._procs.append(proc)
        return self

    def join(self, timeout_s: float | None = None) -> list[EmitterResult]:
        """Results of every emitter, sorted by index. Serve emitters end when their reader has committed
        everything, so `timeout_s` (default: the period plus generous slack) bounds the wait."""
        deadline = timeout_s or self.config.duration_s + 4 * self.config.timeout_s + 30
        results = [self._results.get(timeout=deadline) for _ in self._procs]
        for proc in self._procs:
            proc.join(self.config.timeout_s)
            if proc.is_alive():
                proc.kill()
        return sorted(results, key=lambda r: r.emitter)

    def kill(self) -> None:
        """Stop every emitter at once (the reader could not start); their results are lost."""
        for proc in self._procs:
            proc.kill()
            proc.join(self.config.timeout_s)

    def run(self) -> list[EmitterResult]:
        return self.start().join()
