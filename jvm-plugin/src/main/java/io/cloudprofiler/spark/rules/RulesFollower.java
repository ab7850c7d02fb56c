package io.cloudprofiler.spark.rules;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.spark.DaemonThreads;
import io.cloudprofiler.spark.Messages;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;
import java.util.function.LongConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An executor's copy of the driver's rules ({@link RuleChanges}): asks the driver every {@link
 * #INTERVAL_MS} for the rules' version and applies a new one with {@link CloudProfiler#setRules},
 * so that the trace channels opened by rules switch within about a second of a change. The same
 * answer carries the driver's latest request that the executors collect their logs now, which it
 * passes on once. At most one question is under way; while the driver does not answer, the executor
 * keeps the rules it has (and says so, the first time, in its log: at once where asking fails,
 * after {@link #SILENT_WARN_MS} where answers are only late, as they are while a busy driver
 * starts).
 */
public final class RulesFollower {
  private static final Logger LOG = LoggerFactory.getLogger(RulesFollower.class);
  static final long INTERVAL_MS = 400;
  static final long SILENT_WARN_MS = 10_000;

  private final String executorId;
  private final Callable<Messages.Directions> driver;
  private final Consumer<String> applied;
  private final LongConsumer collect;

  /** The latest request to collect passed on (0: the driver made none). */
  private long collection;

  private final ScheduledExecutorService timer =
      Executors.newSingleThreadScheduledExecutor(DaemonThreads.named("cloudprofiler-rules"));
  private final ExecutorService asker =
      Executors.newSingleThreadExecutor(DaemonThreads.named("cloudprofiler-rules-ask"));
  private Future<Messages.Directions> pending;

  /**
   * The version applied: 0, that of spark.cloudprofiler.rules, which the executor set as it
   * started.
   */
  private long version;

  private boolean warned;

  /**
   * Set as the executor stops: the question under way is interrupted then, which is no sign of a
   * driver that does not answer.
   */
  private volatile boolean stopped;

  /** When the driver last answered (or the follower started). */
  private long answeredNanos = System.nanoTime();

  /**
   * {@code driver}: asks the driver for its rules (the answer may take long: it is waited for a
   * bounded time); {@code applied}: told each rules text applied; {@code collect}: told each new
   * request to collect now.
   */
  public RulesFollower(
      String executorId,
      Callable<Messages.Directions> driver,
      Consumer<String> applied,
      LongConsumer collect) {
    this.executorId = executorId;
    this.driver = driver;
    this.applied = applied;
    this.collect = collect;
    timer.scheduleWithFixedDelay(
        DaemonThreads.guarded("the rules' follower of executor " + executorId, this::poll),
        0,
        INTERVAL_MS,
        TimeUnit.MILLISECONDS);
  }

  private void poll() {
    if (pending == null) pending = asker.submit(driver);
    Messages.Directions now;
    try {
      now = pending.get(INTERVAL_MS, TimeUnit.MILLISECONDS);
      pending = null;
      answeredNanos = System.nanoTime();
    } catch (TimeoutException e) {
      long silentMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - answeredNanos);
      if (silentMs >= SILENT_WARN_MS) unreachable("no answer for " + silentMs / 1000 + " s");
      return;
    } catch (ExecutionException e) {
      pending = null;
      unreachable(String.valueOf(e.getCause()));
      return;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return;
    }
    if (now == null) return;
    if (now.collection() > collection) {
      collection = now.collection();
      collect.accept(collection);
    }
    if (now.version() == version) return;
    try {
      CloudProfiler.setRules(now.text());
      applied.accept(now.text());
      LOG.info(
          "cloudprofiler: executor {} follows rules version {}: {}",
          executorId,
          now.version(),
          now.text().replace('\n', ';'));
    } catch (RuntimeException
        | LinkageError e) { // the driver checked them: this library differs; not retried
      LOG.warn(
          "cloudprofiler: executor {} keeps its rules, refusing version {}: {}",
          executorId,
          now.version(),
          e.toString());
    }
    version = now.version();
  }

  /** Said once: a driver that answers late now and then would otherwise fill the log. */
  private void unreachable(String why) {
    if (!warned && !stopped) {
      LOG.warn(
          "cloudprofiler: executor {} keeps its rules (version {}) while the driver does not answer"
              + " ({}); said once",
          executorId,
          version,
          why);
    }
    warned = true;
  }

  public void stop() {
    stopped = true;
    timer.shutdownNow();
    asker.shutdownNow();
  }
}
