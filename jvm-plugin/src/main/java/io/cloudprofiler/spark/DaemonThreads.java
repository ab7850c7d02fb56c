package io.cloudprofiler.spark;

import java.util.concurrent.ThreadFactory;

/**
 * The plugin's background threads are daemons, so that none of them keeps an application's JVM from
 * ending.
 */
final class DaemonThreads {
  private DaemonThreads() {}

  /** A factory of daemon threads called {@code name}. */
  static ThreadFactory named(String name) {
    return r -> {
      Thread t = new Thread(r, name);
      t.setDaemon(true);
      return t;
    };
  }
}
