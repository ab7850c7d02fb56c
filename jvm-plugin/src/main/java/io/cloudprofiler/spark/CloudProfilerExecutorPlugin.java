package io.cloudprofiler.spark;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.NativeLoader;
import java.io.File;
import java.net.InetAddress;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.spark.TaskContext;
import org.apache.spark.TaskFailedReason;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import com.codahale.metrics.Gauge;

/**
 * Loads the native library, opens the task channels and logs (task attempt id, TSC) at the start and at the
 * end of every task. A library that cannot load makes the plugin step aside with one log line.
 */
public class CloudProfilerExecutorPlugin implements ExecutorPlugin {
  private static final Logger LOG = LoggerFactory.getLogger(CloudProfilerExecutorPlugin.class);
  /** TaskContext is null in onTaskSucceeded/onTaskFailed: the attempt id is kept per task thread. */
  private static final ThreadLocal<Long> CURRENT_TASK = new ThreadLocal<>();

  private volatile boolean active;
  private long startChannel, endChannel;
  private LogCollector collector;
  private ScheduledExecutorService collectTimer;
  private Thread shutdownHook;
  private long responder;

  private PluginContext ctx;
  private Map<String, String> options;
  private volatile boolean started;

  /**
   * Loads the library. Channels open at the first task: in local mode executors start before the application
   * has its id, and the options are read from the executor's own configuration for the same reason.
   */
  @Override
  public void init(PluginContext ctx, Map<String, String> extraConf) {
    this.ctx = ctx;
    this.options = Config.read(ctx.conf());
    String failure = NativeLoader.load(options.get(Config.NATIVE_PATH.name));
    if (failure != null) {
      LOG.warn("cloudprofiler: disabled on executor {}: {}", ctx.executorID(), failure);
      return;
    }
    LOG.info("cloudprofiler: executor {} loaded libcloudprofiler_jni from {}", ctx.executorID(), NativeLoader.source());
    active = Boolean.parseBoolean(options.get(Config.TASK_ENABLED.name));
    shutdownHook = new Thread(this::finish, "cloudprofiler-shutdown");
    Runtime.getRuntime().addShutdownHook(shutdownHook);
  }

  /** Opens the channels; `started` turns true only afterwards, so that no task logs to an unopened channel. */
  private synchronized void startOnce() {
    if (started) return;
    try {
      open();
    } finally {
      started = true;
    }
  }

  private void open() {
    String appId = ctx.conf().get("spark.app.id", "unknown-application");
    String host = hostName();
    String leaf = appId + "/" + host + "-" + ctx.executorID();
    File local = new File(options.get(Config.LOCAL_DIR.name), leaf);
    try {
      CloudProfiler.start(local.getPath(),
          "zstd".equals(options.get(Config.COMPRESSION.name)) ? CloudProfiler.COMPRESSION_ZSTD : CloudProfiler.COMPRESSION_NONE,
          Integer.parseInt(options.get(Config.CHANNEL_BLOCKS.name)), 0, CloudProfiler.FULL_BLOCK);
      String handler = options.get(Config.TASK_HANDLER.name);
      long[] params = Config.parseLongs(options.get(Config.TASK_PARAMS.name));
      String domain = TscDomain.key();
      String[] keys = {"spark.app_id", "spark.executor_id", "spark.host", "spark.event", "tsc.domain"};
      startChannel = CloudProfiler.openChannel("spark.task.start", handler, params, keys,
          new String[] {appId, ctx.executorID(), host, "task_start", domain});
      endChannel = CloudProfiler.openChannel("spark.task.end", handler, params, keys,
          new String[] {appId, ctx.executorID(), host, "task_end", domain});
      if (Boolean.parseBoolean(options.get(Config.CALIBRATION_ENABLED.name))) {
        try {
          registerResponder(appId, domain);
        } catch (Exception e) { // task logging goes on; this host's durations stay uncalibrated
          LOG.warn("cloudprofiler: no calibration for executor {}: {}", ctx.executorID(), e.toString());
        }
      }
    } catch (RuntimeException e) {
      LOG.warn("cloudprofiler: disabled on executor " + ctx.executorID(), e);
      active = false;
      return;
    }
    collector = new LogCollector(local, options.get(Config.LOG_DIR.name) + "/" + leaf);
    registerMetrics(ctx);
    int interval = Integer.parseInt(options.get(Config.COLLECT_INTERVAL.name));
    if (interval > 0) {
      collectTimer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "cloudprofiler-collect");
        t.setDaemon(true);
        return t;
      });
      collectTimer.scheduleWithFixedDelay(this::collect, interval, interval, TimeUnit.SECONDS);
    }
    LOG.info("cloudprofiler: executor {} logs to {}, collected into {}", ctx.executorID(), local, collector.target());
  }

  /** Answers the driver's calibration probes; the driver learns where through a plugin message. */
  private void registerResponder(String appId, String domain) throws java.io.IOException {
    responder = CloudProfiler.responderStart("0.0.0.0", 0, TscDomain.secret(appId));
    String address = org.apache.spark.SparkEnv.get().blockManager().blockManagerId().host(); // what the driver reaches
    String message = String.join("\t", CalibrationCoordinator.REGISTER, domain, address,
        String.valueOf(CloudProfiler.responderPort(responder)), appId, options.get(Config.LOG_DIR.name));
    ctx.send(message);
  }

  /** PluginContext.hostname() fails on executors of standalone clusters (their RPC environment has no address). */
  private static String hostName() {
    try {
      return InetAddress.getLocalHost().getHostName();
    } catch (Exception e) {
      return "unknown-host";
    }
  }

  private void registerMetrics(PluginContext ctx) {
    ctx.metricRegistry().register("recordsLogged", (Gauge<Long>) () -> stat(0));
    ctx.metricRegistry().register("recordsDropped", (Gauge<Long>) () -> stat(3));
    ctx.metricRegistry().register("bytesWritten", (Gauge<Long>) () -> stat(5));
  }

  private long stat(int index) {
    return CloudProfiler.stats(startChannel)[index] + CloudProfiler.stats(endChannel)[index];
  }

  @Override
  public void onTaskStart() {
    if (!active) return;
    if (!started) startOnce();
    long id = TaskContext.get().taskAttemptId();
    CURRENT_TASK.set(id);
    CloudProfiler.log(startChannel, id);
  }

  @Override
  public void onTaskSucceeded() {
    logEnd();
  }

  @Override
  public void onTaskFailed(TaskFailedReason reason) {
    logEnd();
  }

  private void logEnd() {
    Long id = CURRENT_TASK.get();
    if (active && started && id != null) CloudProfiler.log(endChannel, id);
    CURRENT_TASK.remove();
  }

  private void collect() {
    try {
      CloudProfiler.flushAll();
      collector.copy();
    } catch (Exception e) {
      LOG.warn("cloudprofiler: collecting logs into " + collector.target() + " failed", e);
    }
  }

  /** Flushes, closes and copies everything; runs once, from shutdown() or the JVM shutdown hook. */
  private synchronized void finish() {
    if (collector == null) return; // never started, or already finished
    active = false;
    if (collectTimer != null) collectTimer.shutdownNow();
    if (responder != 0) CloudProfiler.responderStop(responder);
    responder = 0;
    CloudProfiler.stop();
    try {
      collector.copy();
    } catch (Exception e) {
      LOG.warn("cloudprofiler: collecting logs into " + collector.target() + " failed", e);
    }
    collector = null;
  }

  @Override
  public void shutdown() {
    finish();
    try {
      if (shutdownHook != null) Runtime.getRuntime().removeShutdownHook(shutdownHook);
    } catch (IllegalStateException alreadyShuttingDown) {
      // the hook is running or has run: nothing left to do
    }
  }
}
