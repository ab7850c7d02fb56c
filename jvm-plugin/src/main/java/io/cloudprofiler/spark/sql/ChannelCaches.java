package io.cloudprofiler.spark.sql;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The SQL side's caches of open channels ({@code cp_trace}'s, the operators', the sources' rows',
 * the shuffle partitions'), each registered by its class as that class initializes. The library's
 * stop forgets them all, so that the next application of this JVM opens its own channels instead of
 * logging to closed ones; a class no task used has nothing to forget and is not touched, since
 * loading it then would load Catalyst's classes and initialize its types (40-90 ms of an executor's
 * stop, on the application's way out).
 */
public final class ChannelCaches {
  private static final List<Runnable> FORGETS = new CopyOnWriteArrayList<>();

  private ChannelCaches() {}

  /** Called once from the static initializer of a class that caches channels. */
  static void register(Runnable forget) {
    FORGETS.add(forget);
  }

  /** Forgets every registered class's channels: called as the library stops. */
  public static void forgetAll() {
    for (Runnable forget : FORGETS) forget.run();
  }
}
