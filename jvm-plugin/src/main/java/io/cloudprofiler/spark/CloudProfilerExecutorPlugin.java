package io.cloudprofiler.spark;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.NativeLoader;
import java.io.File;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
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
 *
 * <p>Everything this process logs (task channels, cp_trace channels) goes to one local folder, and so do the
 * channels of the Python workers it starts: they find the folder through {@code <localDir>/executors/<pid>},
 * which names it (cloudprofiler.spark.worker). The folder is copied into logDir every collect interval and at
 * shutdown, then removed; the folders of killed executors on this host are collected when an executor starts.
 */
public class CloudProfilerExecutorPlugin implements ExecutorPlugin {
  private static final Logger LOG = LoggerFactory.getLogger(CloudProfilerExecutorPlugin.class);
  /** TaskContext is null in onTaskSucceeded/onTaskFailed: the attempt id is kept per task thread. */
  private static final ThreadLocal<Long> CURRENT_TASK = new ThreadLocal<>();
  /** Short: a worker that stops an executor kills it 10 s later, and the logs must be copied before that. */
  private static final long LAST_CALIBRATION_WAIT_SECONDS = 3;

  /** The library loaded and (after the first task) started in this executor's folder. */
  private volatile boolean active;
  private boolean taskLogging;
  private File pointer;
  /** 0 until the first task opens them; read by the metrics reporter's thread too. */
  private volatile long startChannel, endChannel;
  /** The counters as the library stopped, reported from then on. */
  private volatile long[] finalStats;
  private LogCollector collector;
  private ScheduledExecutorService collectTimer;
  private Thread shutdownHook;
  private long responder;
  private ProbeControl control;

  private PluginContext ctx;
  private Options options;
  private volatile boolean started;

  /**
   * Loads the library. Channels open at the first task: in local mode executors start before the application
   * has its id, and the options are read from the executor's own configuration for the same reason.
   */
  @Override
  public void init(PluginContext ctx, Map<String, String> extraConf) {
    this.ctx = ctx;
    this.options = Config.read(ctx.conf());
    ArrowTables.useHadoopSettingsOf(ctx.conf());
    String failure = NativeLoader.load(options.nativePath());
    if (failure != null) {
      LOG.warn("cloudprofiler: disabled on executor {}: {}", ctx.executorID(), failure);
      return;
    }
    LOG.info("cloudprofiler: executor {} loaded libcloudprofiler_jni from {}", ctx.executorID(), NativeLoader.source());
    active = true;
    taskLogging = options.taskEnabled();
    registerMetrics(ctx); // now or never: Spark publishes a plugin's registry only if it holds metrics after init
    shutdownHook = new Thread(this::finish, "cloudprofiler-shutdown");
    Runtime.getRuntime().addShutdownHook(shutdownHook);
  }

  /** Starts the library and opens the channels; `started` turns true only afterwards, so that no task logs to an
   * unopened channel. Runs at the first task whether or not tasks are logged: cp_trace channels and Python workers
   * need the folder too. */
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
    File local = new File(options.localDir(), leaf);
    try {
      CloudProfiler.start(local.getPath(),
          options.compression() == Config.Compression.ZSTD ? CloudProfiler.COMPRESSION_ZSTD
              : CloudProfiler.COMPRESSION_NONE,
          options.channelBlocks(), 0, CloudProfiler.FULL_BLOCK,
          options.tscRead() == Config.TscRead.UNORDERED ? CloudProfiler.TSC_UNORDERED : CloudProfiler.TSC_ORDERED);
    } catch (RuntimeException e) {
      LOG.warn("cloudprofiler: disabled on executor " + ctx.executorID() + " (" + Config.LOCAL_DIR.name + "="
          + options.localDir() + ")", e);
      active = false;
      return;
    }
    collector = new LogCollector(local, options.logDir() + "/" + leaf);
    try {
      collector.nameTarget();
    } catch (Exception e) { // collected at shutdown all the same; only a killed executor's files would stay
      LOG.warn("cloudprofiler: executor {} could not name its collection target in {}: {}", ctx.executorID(), local,
          e.toString());
    }
    LostExecutors.collectInBackground(options.localDir());
    int interval = options.collectIntervalSeconds();
    if (interval > 0) {
      collectTimer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "cloudprofiler-collect");
        t.setDaemon(true);
        return t;
      });
      collectTimer.scheduleWithFixedDelay(this::collect, interval, interval, TimeUnit.SECONDS);
    }
    pointer = pointTo(local);
    if (taskLogging) {
      try {
        openTaskChannels(appId, host);
      } catch (RuntimeException e) {
        LOG.warn("cloudprofiler: no task records on executor " + ctx.executorID(), e);
        taskLogging = false;
      }
    }
    LOG.info("cloudprofiler: executor {} logs to {}, collected into {}", ctx.executorID(), local, collector.target());
  }

  private void openTaskChannels(String appId, String host) {
    Config.Handler handler = options.taskHandler().handler();
    String[] domain = {TscDomain.bootId(), "not checked (calibration disabled)"};
    if (options.calibrationEnabled()) {
      try {
        CloudProfiler.requireInvariantTsc(options.calibrationForce());
        domain = joinDomain(appId);
      } catch (Exception e) { // task logging goes on; this process's durations stay unbounded, never wrong
        LOG.warn("cloudprofiler: no calibration for executor {} ({} to calibrate anyway): {}", ctx.executorID(),
            Config.CALIBRATION_FORCE.name + "=true", e.getMessage());
        domain = new String[] {TscDomain.bootId() + "#unchecked-" + ctx.executorID(), "not checked: " + e.getMessage()};
      }
    }
    String[] keys = {"spark.app_id", "spark.executor_id", "spark.host", "spark.event", "tsc.domain", "tsc.domain.check"};
    startChannel = CloudProfiler.openChannel("spark.task.start", handler.name(), handler.params(), keys,
        new String[] {appId, ctx.executorID(), host, "task_start", domain[0], domain[1]});
    endChannel = CloudProfiler.openChannel("spark.task.end", handler.name(), handler.params(), keys,
        new String[] {appId, ctx.executorID(), host, "task_end", domain[0], domain[1]});
  }

  /** Writes {@code <localDir>/executors/<pid>}, naming this executor's folder, for the Python workers it starts
   * (their parent or grandparent is this process); renamed into place, so a worker never reads half a name. */
  private File pointTo(File local) {
    File folder = new File(options.localDir(), Config.EXECUTOR_FOLDERS);
    File target = new File(folder, String.valueOf(ProcessHandle.current().pid()));
    try {
      folder.mkdirs();
      File aside = new File(folder, "." + target.getName() + ".tmp");
      Files.writeString(aside.toPath(), local.getAbsolutePath());
      Files.move(aside.toPath(), target.toPath(), StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
      return target;
    } catch (Exception e) { // Python workers then log where CLOUDPROFILER_LOG_DIR says, uncollected
      LOG.warn("cloudprofiler: executor {} could not name its folder for Python workers in {}: {}", ctx.executorID(),
          target, e.toString());
      return null;
    }
  }

  /**
   * Starts the probe responder and the probe control, then finds this process's TSC domain with the driver: probes
   * a member of each domain of this boot id until one agrees (TscDomain.check), else founds a new domain.
   * Returns {domain, what the check found}.
   */
  private String[] joinDomain(String appId) throws Exception {
    byte[] secret = TscDomain.secret(appId);
    responder = CloudProfiler.responderStart("0.0.0.0", 0, secret);
    control = new ProbeControl(secret);
    String boot = TscDomain.bootId();
    String address = org.apache.spark.SparkEnv.get().blockManager().blockManagerId().host(); // what the driver reaches
    int count = options.calibrationProbes();
    int timeoutMs = options.calibrationTimeoutMs();
    Object reply = ask(new Messages.Hello(boot, appId, options.logDir()));
    List<String> checks = new ArrayList<>();
    int checked = 0;
    for (int attempt = 0; attempt < 10 && reply instanceof Messages.Candidates candidates; attempt++) {
      String domain = "";
      List<Messages.Candidate> list = candidates.domains();
      for (int i = checked; i < list.size() && domain.isEmpty(); i++) {
        Messages.Candidate c = list.get(i);
        try {
          TscDomain.Check result = TscDomain.check(ProbeControl.probe(c.host(), c.responderPort(), count, timeoutMs,
              secret));
          checks.add(result.describe(c.domain()));
          if (result.agrees) domain = c.domain();
        } catch (RuntimeException e) {
          checks.add("could not probe " + c.domain() + " at " + c.host() + ":" + c.responderPort() + ": "
              + e.getMessage());
        }
      }
      checked = Math.max(checked, list.size());
      if (domain.isEmpty()) checks.add("founds a domain");
      String check = String.join("; ", checks);
      reply = ask(new Messages.Join(boot, domain, checked, address, CloudProfiler.responderPort(responder),
          control.port(), ctx.executorID(), ProcessHandle.current().pid(), check));
      if (reply instanceof Messages.Joined joined) return new String[] {joined.domain(), check};
      if (domain.isEmpty()) checks.remove(checks.size() - 1);
    }
    throw new IllegalStateException("the driver did not assign a TSC domain (reply: " + reply + ")");
  }

  /** The driver's answer to a {@link Messages} message. */
  private Object ask(Record message) throws Exception {
    return Messages.fromWire(ctx.ask(Messages.toWire(message)));
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
    long[] last = finalStats;
    return (last != null ? last : totals())[index];
  }

  /** The counters of {@link CloudProfiler#stats} summed over this process's channels: the task channels and the
   * cp_trace channels. */
  private long[] totals() {
    long[] total = new long[6];
    if (!started) return total;
    List<Long> channels = new ArrayList<>(List.of(startChannel, endChannel));
    for (long channel : TraceExpression.channelHandles()) channels.add(channel);
    for (long channel : channels) {
      if (channel == 0) continue;
      long[] stats = CloudProfiler.stats(channel);
      for (int i = 0; i < total.length; i++) total[i] += stats[i];
    }
    return total;
  }

  @Override
  public void onTaskStart() {
    if (!active) return;
    if (!started) startOnce();
    TaskContext task = TaskContext.get();
    if (!taskLogging || "false".equals(task.getLocalProperty(Config.TASK_ENABLED.name))) return; // off for this job
    long id = task.taskAttemptId();
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
    if (active && id != null) CloudProfiler.log(endChannel, id);
    CURRENT_TASK.remove();
  }

  /** No flush here: the library writes partial blocks within a second by itself, and tasks never wait on this. */
  private void collect() {
    try {
      collector.copyChanged();
    } catch (Exception e) {
      LOG.warn("cloudprofiler: collecting logs into " + collector.target() + " failed", e);
    }
  }

  /**
   * While this process still answers probes, the driver runs a last calibration each way with it: the records it
   * logged after the driver's last round then lie between two anchors. Waits a bounded time for the driver.
   */
  private void lastCalibration() {
    CompletableFuture<Object> reply = CompletableFuture.supplyAsync(() -> {
      try {
        return ask(new Messages.Last(ctx.executorID()));
      } catch (Exception e) {
        throw new CompletionException(e);
      }
    });
    try {
      reply.get(LAST_CALIBRATION_WAIT_SECONDS, TimeUnit.SECONDS);
    } catch (Exception e) {
      LOG.info("cloudprofiler: no last calibration run for executor {}: {}", ctx.executorID(), e.toString());
    }
  }

  /** Flushes, closes and copies everything; runs once, from shutdown() or the JVM shutdown hook. */
  private synchronized void finish() {
    if (collector == null) return; // never started, or already finished
    active = false;
    if (collectTimer != null) collectTimer.shutdown(); // a collection under way ends first: collectAll waits for it
    if (control != null) lastCalibration();
    if (control != null) control.close();
    control = null;
    if (responder != 0) CloudProfiler.responderStop(responder);
    responder = 0;
    CloudProfiler.stop();
    finalStats = totals(); // the metrics' last report may come after this
    TraceExpression.forgetChannels();
    collector.collectAll(false);
    if (pointer != null) pointer.delete(); // after the copy: a process killed during it leaves its folder named
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
