package io.cloudprofiler.spark;

import java.util.Arrays;
import java.util.Set;
import java.util.concurrent.ThreadFactory;

/**
 * The plugin's background threads: daemons, so that none of them keeps an application's JVM from
 * ending, and guarded, so that none of them takes the application down. On an executor of a cluster
 * Spark's uncaught-exception handler exits the JVM for whatever a thread lets through, a {@link
 * LinkageError} from a jar built for another Spark included: each thread here catches every {@link
 * Throwable}, disables its part with one log line ({@link Guard}) and ends.
 *
 * <p>The tests inject such a failure through the system property {@value #FAIL_PROPERTY}: the names
 * of the threads (comma-separated) that throw a {@link LinkageError} at their fault point ({@link
 * #faultPoint}), read here only.
 */
public final class DaemonThreads {
  static final String FAIL_PROPERTY = "cloudprofiler.test.fail";

  private static final Set<String> FAILING =
      Set.copyOf(Arrays.asList(System.getProperty(FAIL_PROPERTY, "").trim().split("\\s*,\\s*")));

  private DaemonThreads() {}

  /**
   * A factory of daemon threads called {@code name} that end, with one log line for all of them, on
   * whatever their work throws (a pool's worker: whatever its task lets through).
   */
  public static ThreadFactory named(String name) {
    Guard guard = new Guard("the thread " + name);
    return r -> {
      Thread t =
          new Thread(
              () -> {
                try {
                  r.run();
                } catch (Throwable e) {
                  guard.disable("run", e);
                }
              },
              name);
      t.setDaemon(true);
      return t;
    };
  }

  /** Starts a daemon thread called {@code name} that runs {@code body} from its fault point. */
  public static void start(String name, Runnable body) {
    named(name)
        .newThread(
            () -> {
              faultPoint();
              body.run();
            })
        .start();
  }

  /**
   * {@code task} of a timer or a pool, run from its fault point: the first {@link Throwable} it
   * throws disables it with one log line naming {@code part}, and its later runs return at once (a
   * periodic task that throws would otherwise stop in silence).
   */
  public static Runnable guarded(String part, Runnable task) {
    Guard guard = new Guard(part);
    return () -> {
      if (guard.disabled()) return;
      try {
        faultPoint();
        task.run();
      } catch (Throwable e) {
        guard.disable(Thread.currentThread().getName(), e);
      }
    };
  }

  /** Throws the failure the tests inject into the current thread ({@value #FAIL_PROPERTY}). */
  public static void faultPoint() {
    faultPoint(Thread.currentThread().getName());
  }

  /** Throws the failure the tests inject into the part called {@code name}. */
  public static void faultPoint(String name) {
    if (FAILING.contains(name))
      throw new LinkageError(FAIL_PROPERTY + ": a failure injected into " + name);
  }
}
