package io.cloudprofiler.spark.driver;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The driver's requests that every executor collect its logs now, so that a report made while the
 * application runs ({@code cps.report(spark)}) holds every record logged until it was asked for,
 * not only what the last collection interval copied (15 s by default). Executors learn of a request
 * as they ask for their rules ({@link io.cloudprofiler.spark.Messages.Follow}, every 400 ms), and
 * say when they collected ({@link io.cloudprofiler.spark.Messages.Collected}). A request waits for
 * the executors that asked within {@link #ALIVE_NANOS}: one lost meanwhile is waited for until the
 * request's timeout only. Thread-safe.
 */
final class CollectionRequests {
  /** An executor that asked this recently is running: a request waits for it. */
  static final long ALIVE_NANOS = TimeUnit.SECONDS.toNanos(3);

  private long requested;

  /** Per executor: when it last asked. */
  private final Map<String, Long> asked = new HashMap<>();

  /** Per executor: the latest request it collected. */
  private final Map<String, Long> collected = new HashMap<>();

  /** The latest request, which {@code executorId} is told as it asks now. */
  synchronized long asked(String executorId) {
    asked.put(executorId, System.nanoTime());
    return requested;
  }

  synchronized void collected(String executorId, long request) {
    collected.merge(executorId, request, Math::max);
    notifyAll();
  }

  /**
   * Asks every running executor to collect now and waits until they did or {@code timeoutMs}
   * passed: {collected, running}, the executors that collected and those it waited for.
   */
  synchronized int[] request(long timeoutMs) throws InterruptedException {
    long request = ++requested;
    long now = System.nanoTime();
    long deadline = now + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
    List<String> running = new ArrayList<>();
    asked.forEach(
        (executor, when) -> {
          if (now - when <= ALIVE_NANOS) running.add(executor);
        });
    while (true) {
      int done = 0;
      for (String executor : running) if (collected.getOrDefault(executor, 0L) >= request) done++;
      long left = deadline - System.nanoTime();
      if (done == running.size() || left <= 0) return new int[] {done, running.size()};
      TimeUnit.NANOSECONDS.timedWait(this, left);
    }
  }
}
