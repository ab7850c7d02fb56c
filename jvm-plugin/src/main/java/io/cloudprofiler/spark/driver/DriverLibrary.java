package io.cloudprofiler.spark.driver;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.spark.Messages;
import io.cloudprofiler.spark.Options;
import io.cloudprofiler.spark.calibration.TscDomain;
import io.cloudprofiler.spark.executor.HopSamples;
import io.cloudprofiler.spark.executor.LogCollector;
import io.cloudprofiler.spark.sql.ChannelCaches;
import io.cloudprofiler.spark.ui.LiveHops;
import java.io.File;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The driver JVM's own library where no executor shares its JVM (a cluster's driver; in local mode
 * the executor's library is the JVM's). Spark evaluates some trace points on the driver: a {@code
 * cp_trace} over VALUES or a small local relation, which the optimizer evaluates as it plans, and
 * the Java API in the application's own code. They log into {@code <localDir>/driver-<pid>}, which
 * goes into the application's folder as {@code <host>-driver} (as local mode's executor names its
 * folder) at each collection interval and at the end, and their records' samples go to the hops.
 * Without it the library would start by itself at the first such channel, in its default folder,
 * outside the application's.
 */
final class DriverLibrary {
  private static final Logger LOG = LoggerFactory.getLogger(DriverLibrary.class);

  private final File local;
  private LogCollector collector; // at the first collection: the application's id comes late
  private boolean sampling = true, stopped;

  private DriverLibrary(File local) {
    this.local = local;
  }

  /** The started library; null where it could not start (said in one line). */
  static DriverLibrary start(Options options) {
    File local = new File(options.localDir(), "driver-" + ProcessHandle.current().pid());
    try {
      options.startLibrary(local.getPath());
      return new DriverLibrary(local);
    } catch (RuntimeException e) {
      LOG.warn(
          "cloudprofiler: the driver's own trace points are not logged (its library did not start"
              + " in {}): {}",
          local,
          e.toString());
      return null;
    }
  }

  /**
   * Copies what changed into {@code appFolder} and hands the samples the library kept to {@code
   * hops}, in the driver's domain (the calibration's reference). A failure is one log line.
   */
  synchronized void collect(String appFolder, LiveHops hops) {
    if (stopped) return; // a collection that began as the application stopped
    try {
      collector(appFolder).copyChanged();
    } catch (Exception e) {
      LOG.warn("cloudprofiler: collecting the driver's logs into " + appFolder + " failed", e);
    }
    if (!sampling) return;
    try {
      double hz = CloudProfiler.tscHz();
      for (Messages.ChannelSamples c : HopSamples.take(null))
        hops.add(TscDomain.bootId(), hz, c.channel(), c.level(), c.ids(), c.ticks());
    } catch (RuntimeException | LinkageError e) {
      sampling = false;
      LOG.warn(
          "cloudprofiler: the driver's own trace points are left out of the hops from now on: {}",
          e.toString());
    }
  }

  /** Stops the library and collects its files whole into {@code appFolder}. */
  synchronized void stop(String appFolder) {
    stopped = true;
    CloudProfiler.stop();
    ChannelCaches.forgetAll();
    collector(appFolder).collectAll(false);
  }

  private LogCollector collector(String appFolder) {
    if (collector == null)
      collector = new LogCollector(local, appFolder + "/" + TscDomain.hostName() + "-driver");
    return collector;
  }
}
