package io.cloudprofiler.spark.executor;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.NativeLoader;
import io.cloudprofiler.spark.Config;
import io.cloudprofiler.spark.DaemonThreads;
import io.cloudprofiler.spark.Messages;
import io.cloudprofiler.spark.Options;
import io.cloudprofiler.spark.calibration.ProbeControl;
import io.cloudprofiler.spark.calibration.RegisteredResponders;
import io.cloudprofiler.spark.calibration.TscDomain;
import io.cloudprofiler.spark.driver.CloudProfilerDriverPlugin;
import io.cloudprofiler.spark.rules.RulesFollower;
import io.cloudprofiler.spark.sql.ChannelCaches;
import io.cloudprofiler.spark.sql.OperatorRows;
import io.cloudprofiler.spark.tables.ArrowTables;
import java.io.File;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.util.ShutdownHookManager;
import org.apache.spark.TaskContext;
import org.apache.spark.TaskFailedReason;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Loads the native library, opens the task channels and logs (task attempt id, TSC) at the start
 * and at the end of every task. A library that cannot load makes the plugin step aside with one log
 * line.
 *
 * <p>The one-time setup (the library's start, the TSC domain found with the driver: {@link
 * DomainJoin}, the task channels) runs in the background from {@link #init}, so that no task pays
 * for it: a task waits at most for the library's start (its code may open cp_trace channels or
 * start Python workers, which need the folder), and never for the domain (see {@link TaskRecords}).
 *
 * <p>Everything this process logs (task channels, cp_trace channels) goes to one local folder, and
 * so do the records of the Python workers it starts: they hand them to this library's inbox through
 * shared memory (or, where they cannot, write files of their own into the folder); they find both
 * through {@code <localDir>/executors/<pid>} and {@code <pid>.inbox} (cloudprofiler.spark.worker;
 * {@link PythonWorkerFiles}). Its metrics: {@link ExecutorMetrics}. The folder is copied into
 * logDir every collect interval and at shutdown, then removed; the folders of killed executors on
 * this host are collected when an executor starts.
 */
public class CloudProfilerExecutorPlugin implements ExecutorPlugin {
  private static final Logger LOG = LoggerFactory.getLogger(CloudProfilerExecutorPlugin.class);

  /**
   * TaskContext is null in onTaskSucceeded/onTaskFailed: the attempt id is kept per task thread.
   */
  private static final ThreadLocal<Long> CURRENT_TASK = new ThreadLocal<>();

  /**
   * Short: a worker that stops an executor kills it 10 s later, and the logs must be copied before
   * that.
   */
  private static final long LAST_CALIBRATION_WAIT_SECONDS = 3;

  /**
   * How long a task or the shutdown waits for the library's start, and the shutdown for the task
   * channels.
   */
  private static final long SETUP_WAIT_SECONDS = 2;

  /**
   * The shutdown hook's priority above Hadoop's closing of its file systems; Spark's own hooks (one
   * Hadoop hook at + 30) run before it.
   */
  private static final int SHUTDOWN_BEFORE_FILE_SYSTEMS = 20;

  /**
   * How long the setup waits for the application id (local mode sets it just after the executor
   * starts).
   */
  static final long APPLICATION_ID_WAIT_SECONDS = 60;

  /**
   * For a question to the driver from a task: this JVM's executor plugin (one per executor
   * process).
   */
  private static volatile CloudProfilerExecutorPlugin running;

  /**
   * The library loaded (and, once {@link #libraryStarted} opens, started in this executor's
   * folder).
   */
  private volatile boolean active;

  private volatile boolean taskLogging;
  private final TaskRecords tasks = new TaskRecords();
  private final ExecutorMetrics metrics = new ExecutorMetrics();

  /**
   * Open once the library has started (or failed to); {@link #setUp} once the task channels are
   * open (or not).
   */
  private final CountDownLatch libraryStarted = new CountDownLatch(1),
      setUp = new CountDownLatch(1);

  private boolean finished;

  private volatile LogCollector collector;

  /** Where the library logs and Python workers of files of their own leave their samples. */
  private volatile File localFolder;

  private ScheduledExecutorService collectTimer;
  private Runnable shutdownHook;
  private long responder;
  private ProbeControl control;
  private RulesFollower rules;

  /** The rules at start, as the driver has them (its rules file included). */
  private String startRules;

  /** What this executor names for its Python workers: its folder, its inbox, its rules. */
  private PythonWorkerFiles workers;

  private PluginContext ctx;
  private Options options;

  /** Null once it failed: the executor then sends its totals alone. */
  private volatile ChannelRates channelRates = new ChannelRates();

  /**
   * The counters the driver was last sent ({@link #sendCounters}, which holds this lock: not the
   * plugin's, which the end holds while it waits for a collection under way).
   */
  private final Object countersLock = new Object();

  /** Under countersLock: the counters last sent, their interval's length left out. */
  private Messages.Counters countersSent;

  /** The time the tab's work took in this executor so far ({@link #sendCounters}). */
  private long workNanos;

  /** This process's TSC domain, as its task channels name it (set as they open). */
  private volatile String tscDomain;

  /** Under countersLock; false once taking them failed: the executor then sends no samples. */
  private boolean samplesWork = true;

  /**
   * Loads the library and starts the setup in the background. The options are read from the
   * executor's own configuration: in local mode executors start before the application has its id.
   */
  @Override
  public void init(PluginContext ctx, Map<String, String> extraConf) {
    this.ctx = ctx;
    running = this;
    this.options = Config.read(ctx.conf());
    startRules = extraConf.getOrDefault(CloudProfilerDriverPlugin.START_RULES, options.rules());
    ArrowTables.useHadoopSettingsOf(ctx.conf());
    String failure = NativeLoader.load(options.nativePath());
    if (failure != null) {
      LOG.warn("cloudprofiler: disabled on executor {}: {}", ctx.executorID(), failure);
      return;
    }
    LOG.info(
        "cloudprofiler: executor {} loaded libcloudprofiler_jni from {}",
        ctx.executorID(),
        NativeLoader.source());
    active = true;
    taskLogging = options.taskEnabled();
    metrics.register(ctx.metricRegistry());
    shutdownHook = this::finish;
    // Hadoop runs its shutdown hooks by priority: this one (or, after the executor's stop began,
    // its wait for that stop's last copy) before Hadoop closes its file systems, which an s3a:// or
    // hdfs:// logDir's last copy writes through; a process told to stop by SIGTERM (a standalone
    // worker's executors as the application ends) would otherwise keep its last files local
    ShutdownHookManager.get()
        .addShutdownHook(
            shutdownHook, FileSystem.SHUTDOWN_HOOK_PRIORITY + SHUTDOWN_BEFORE_FILE_SYSTEMS);
    DaemonThreads.named("cloudprofiler-setup").newThread(this::setUp).start();
  }

  /**
   * The setup, in the background: the library's start (whether or not tasks are logged: cp_trace
   * channels and Python workers need the folder too), then the TSC domain and the task channels.
   */
  private void setUp() {
    String appId = applicationId();
    try {
      synchronized (this) {
        if (!finished) startLibrary(appId);
      }
    } catch (Throwable e) {
      LOG.warn("cloudprofiler: disabled on executor " + ctx.executorID(), e);
      active = false;
    } finally {
      libraryStarted.countDown();
    }
    try {
      if (active && taskLogging) openTaskChannels(appId, TscDomain.hostName());
    } catch (Throwable e) {
      LOG.warn("cloudprofiler: no task records on executor " + ctx.executorID(), e);
      taskLogging = false;
    } finally {
      if (tasks.channels().length == 0) tasks.abandon();
      setUp.countDown();
    }
  }

  /**
   * In local mode the executor starts just before the driver assigns the application id to the
   * configuration.
   */
  private String applicationId() {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(APPLICATION_ID_WAIT_SECONDS);
    while (!ctx.conf().contains("spark.app.id") && System.nanoTime() < deadline) {
      try {
        Thread.sleep(5);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    return ctx.conf().get("spark.app.id", "unknown-application");
  }

  private void startLibrary(String appId) {
    String host = TscDomain.hostName();
    String folder = host + "-" + ctx.executorID();
    File local = new File(new File(options.localDir(), appId), folder);
    localFolder = local;
    try {
      options.startLibrary(local.getPath());
      metrics.libraryStarted();
      ChannelRates rates = channelRates;
      if (rates != null) rates.libraryStarted();
    } catch (RuntimeException e) {
      LOG.warn(
          "cloudprofiler: disabled on executor "
              + ctx.executorID()
              + " ("
              + Config.LOCAL_DIR.name
              + "="
              + options.localDir()
              + ")",
          e);
      active = false;
      return;
    }
    try {
      CloudProfiler.setRules(
          startRules); // checked by the driver; also replaces an earlier application's
    } catch (RuntimeException e) {
      LOG.warn(
          "cloudprofiler: executor {} keeps no rules of {}: {}",
          ctx.executorID(),
          Config.RULES.name,
          e.getMessage());
    }
    workers = new PythonWorkerFiles(ctx.executorID(), options.localDir());
    workers.writeRules(startRules);
    if (options.pythonHandoff()) workers.startInbox(appId);
    collectTimer =
        Executors.newSingleThreadScheduledExecutor(DaemonThreads.named("cloudprofiler-collect"));
    rules =
        new RulesFollower(
            ctx.executorID(),
            () -> (Messages.Directions) ask(new Messages.Follow(ctx.executorID())),
            workers::writeRules,
            request -> {
              try {
                collectTimer.execute(() -> collectNow(request));
              } catch (RejectedExecutionException e) { // stopping: the end collects every file
              }
            });
    collector = new LogCollector(local, Config.appFolder(options.logDir(), appId) + "/" + folder);
    try {
      collector.nameTarget();
    } catch (
        Exception
            e) { // collected at shutdown all the same; only a killed executor's files would stay
      LOG.warn(
          "cloudprofiler: executor {} could not name its collection target in {}: {}",
          ctx.executorID(),
          local,
          e.toString());
    }
    LostExecutors.collectInBackground(
        options.localDir(),
        (pid, lostFolder, files, cut) -> {
          if (options.uiEnabled())
            ctx.send(
                Messages.toWire(
                    new Messages.LostCollected(ctx.executorID(), pid, lostFolder, files, cut)));
        });
    int interval = options.collectIntervalSeconds();
    if (interval > 0) {
      collectTimer.scheduleWithFixedDelay(
          DaemonThreads.guarded(
              "the periodic collection of executor " + ctx.executorID(), this::collect),
          interval,
          interval,
          TimeUnit.SECONDS);
    }
    workers.pointTo(local);
    LOG.info(
        "cloudprofiler: executor {} logs to {}, collected into {}",
        ctx.executorID(),
        local,
        collector.target());
  }

  /** Finds the TSC domain (when calibrating), then opens the task channels, which name it. */
  private void openTaskChannels(String appId, String host) {
    Config.Handler handler = options.taskHandler().handler();
    String[] domain = {TscDomain.bootId(), "not checked (calibration disabled)"};
    if (options.calibrationEnabled()) {
      try {
        CloudProfiler.requireInvariantTsc(options.calibrationForce());
        domain = new DomainJoin(this, ctx.executorID(), options).join(appId);
      } catch (
          Exception
              e) { // task logging goes on; this process's durations stay unbounded, never wrong
        LOG.warn(
            "cloudprofiler: no calibration for executor {} ({} to calibrate anyway): {}",
            ctx.executorID(),
            Config.CALIBRATION_FORCE.name + "=true",
            e.getMessage());
        domain =
            new String[] {
              TscDomain.bootId() + "#unchecked-" + ctx.executorID(),
              "not checked: " + e.getMessage()
            };
      }
    }
    String[] keys = {
      "spark.app_id",
      "spark.executor_id",
      "spark.host",
      "spark.event",
      "tsc.domain",
      "tsc.domain.check"
    };
    tscDomain = domain[0];
    synchronized (this) {
      if (finished) return; // the executor stopped meanwhile: its records are counted as lost
      long start =
          CloudProfiler.openChannel(
              TaskRecords.CHANNELS.get(0),
              handler.name(),
              handler.params(),
              keys,
              new String[] {appId, ctx.executorID(), host, "task_start", domain[0], domain[1]});
      long end =
          CloudProfiler.openChannel(
              TaskRecords.CHANNELS.get(1),
              handler.name(),
              handler.params(),
              keys,
              new String[] {appId, ctx.executorID(), host, "task_end", domain[0], domain[1]});
      tasks.open(start, end);
    }
  }

  /**
   * Starts the probe responder and the probe control on {@code address}, where the driver reaches
   * this executor, as Spark's own services: for {@link DomainJoin}, which then probes.
   */
  synchronized void startProbing(String address, byte[] secret, RegisteredResponders targets)
      throws Exception {
    if (finished) throw new IllegalStateException("the executor stopped while it started");
    responder = CloudProfiler.responderStart(address, 0, secret);
    control = new ProbeControl(secret, address, targets);
  }

  /** The port of this executor's probe responder. */
  int responderPort() {
    return CloudProfiler.responderPort(responder);
  }

  /** The port of this executor's probe control. */
  int controlPort() {
    return control.port();
  }

  /** The driver's answer to a {@link Messages} message. */
  Object ask(Record message) throws Exception {
    return Messages.fromWire(ctx.ask(Messages.toWire(message)));
  }

  /** The driver's answer to {@code message}, asked from a task of this executor (within 10 s). */
  public static Object askDriver(Record message) throws Exception {
    CloudProfilerExecutorPlugin plugin = running;
    if (plugin == null)
      throw new IllegalStateException("the cloudprofiler plugin runs in no executor here");
    return plugin.askWithin(message, 10);
  }

  /**
   * {@link #ask}, waiting at most {@code seconds} (Spark's own timeout for an answer is minutes).
   */
  Object askWithin(Record message, long seconds) throws Exception {
    return CompletableFuture.supplyAsync(
            () -> {
              try {
                return ask(message);
              } catch (Exception e) {
                throw new CompletionException(e);
              }
            })
        .get(seconds, TimeUnit.SECONDS);
  }

  @Override
  public void onTaskStart() {
    if (!active) return;
    long early =
        libraryStarted.getCount() > 0
            ? CloudProfiler.tsc()
            : 0; // the task started before the library
    if (early != 0) awaitLibrary();
    TaskContext task = TaskContext.get();
    if (!taskLogging || "false".equals(task.getLocalProperty(Config.TASK_ENABLED.name)))
      return; // off for this job
    long id = task.taskAttemptId();
    CURRENT_TASK.set(id);
    if (early != 0) tasks.startAt(id, early);
    else tasks.start(id);
  }

  /**
   * A task's code may open cp_trace channels or start Python workers: the library must log to this
   * executor's folder first. The start takes milliseconds; the wait is bounded all the same.
   */
  private void awaitLibrary() {
    try {
      if (!libraryStarted.await(SETUP_WAIT_SECONDS, TimeUnit.SECONDS)) {
        LOG.warn(
            "cloudprofiler: executor {} runs a task before its library started", ctx.executorID());
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
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
    if (active && id != null) tasks.end(id);
    CURRENT_TASK.remove();
  }

  /**
   * No flush here: the library writes partial blocks within a second by itself, and tasks never
   * wait on this.
   */
  private void collect() {
    LogCollector files = collector;
    if (files == null) return; // the end collected them
    OperatorRows.closeIdle(); // before the copy, which then takes the closed files whole
    try {
      files.copyChanged();
    } catch (Exception e) {
      LOG.warn("cloudprofiler: collecting logs into " + files.target() + " failed", e);
    }
    sendCounters();
  }

  /**
   * The driver's request {@code request} ({@link Messages.Directions}): every record logged until
   * now written out and collected, then the driver told ({@link Messages.Collected}). On the
   * collection's thread.
   */
  private void collectNow(long request) {
    try {
      synchronized (this) { // not beside the end's stop of the library
        if (finished) return; // the end collects every file whole
        CloudProfiler.flushAll();
      }
      collect();
      ctx.send(Messages.toWire(new Messages.Collected(ctx.executorID(), request)));
    } catch (Throwable e) {
      LOG.warn("cloudprofiler: executor " + ctx.executorID() + " could not collect now", e);
    }
  }

  /**
   * Tells the driver this executor's counters and its channels' over the interval that ends now
   * (the Cloudprofiler tab and metrics show them), when they differ from those last sent (an
   * interval with records, or the first without after one); a failure is one log line and the next
   * interval tries again. Called from the collection thread, then once at the end. Its own time
   * counts in {@link #workNanos}.
   */
  private void sendCounters() {
    if (!options.uiEnabled()) return;
    long began = System.nanoTime();
    synchronized (countersLock) {
      try {
        sendCounters(began);
      } finally {
        workNanos += System.nanoTime() - began;
      }
    }
  }

  /** Under countersLock; {@code began}: {@link #sendCounters}'s start, whose time it sends. */
  private void sendCounters(long began) {
    sendSamples();
    long[] now = metrics.counters();
    double seconds = 0;
    long interval = 0;
    int[] leftOut = new int[1];
    List<Messages.ChannelCount> channels = List.of();
    ChannelRates rates = channelRates;
    try {
      if (rates != null) {
        seconds = rates.endInterval();
        interval = rates.intervals();
        channels = rates.busiest(seconds, leftOut);
      }
    } catch (RuntimeException e) {
      channelRates = null;
      LOG.warn(
          "cloudprofiler: executor {} sends no channel counts from now on: {}",
          ctx.executorID(),
          e.toString());
    }
    Messages.Counters counters = // what the driver has unless these differ: the work left out
        new Messages.Counters(
            ctx.executorID(), now[0], now[1], now[2], 0, 0, channels, leftOut[0], 0, 0, 0);
    if (counters.equals(countersSent)) return;
    try {
      ctx.send(
          Messages.toWire(
              new Messages.Counters(
                  ctx.executorID(),
                  now[0],
                  now[1],
                  now[2],
                  interval,
                  seconds,
                  channels,
                  leftOut[0],
                  workNanos + (System.nanoTime() - began),
                  scanNanos(now[4]),
                  now[3])));
      countersSent = counters;
    } catch (Exception e) {
      LOG.info(
          "cloudprofiler: executor {} could not send its counters to the driver: {}",
          ctx.executorID(),
          e.toString());
    }
  }

  /** The samples' scan's time in nanoseconds; 0 where the TSC's frequency is not known. */
  private static long scanNanos(long ticks) {
    try {
      double hz = CloudProfiler.tscHz();
      return hz > 0 ? (long) (ticks / hz * 1e9) : 0;
    } catch (RuntimeException | LinkageError e) {
      return 0;
    }
  }

  /**
   * Sends the driver the records the library kept for the hops' latency since the last take ({@link
   * HopSamples}), once the TSC domain is known; none when it kept none. Under countersLock.
   */
  private void sendSamples() {
    String domain = tscDomain;
    if (!samplesWork || domain == null) return;
    List<Messages.ChannelSamples> channels;
    try {
      channels = HopSamples.take(localFolder);
    } catch (RuntimeException | LinkageError e) {
      samplesWork = false;
      LOG.warn(
          "cloudprofiler: executor {} sends no samples for the hops' latency from now on: {}",
          ctx.executorID(),
          e.toString());
      return;
    }
    if (channels.isEmpty()) return;
    try {
      ctx.send(
          Messages.toWire(
              new Messages.Samples(ctx.executorID(), domain, CloudProfiler.tscHz(), channels)));
    } catch (Exception e) {
      LOG.info(
          "cloudprofiler: executor {} could not send its samples to the driver: {}",
          ctx.executorID(),
          e.toString());
    }
  }

  /**
   * While this process still answers probes, the driver runs a last calibration each way with it:
   * the records it logged after the driver's last round then lie between two anchors. Waits a
   * bounded time for the driver.
   */
  private void lastCalibration() {
    try {
      askWithin(new Messages.Last(ctx.executorID()), LAST_CALIBRATION_WAIT_SECONDS);
    } catch (Exception e) {
      LOG.info(
          "cloudprofiler: no last calibration run for executor {}: {}",
          ctx.executorID(),
          e.toString());
    }
  }

  /**
   * Flushes, closes and copies everything; runs once, from shutdown() or the shutdown hook. Waits a
   * bounded time for a setup under way (the task records that wait for their channels).
   */
  private void finish() {
    try {
      setUp.await(SETUP_WAIT_SECONDS, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    closeAll();
  }

  private synchronized void closeAll() {
    if (finished) return;
    finished = true;
    long lost = tasks.abandon();
    if (lost > 0) {
      LOG.warn(
          "cloudprofiler: executor {} lost {} task records: its task channels did not open in time",
          ctx.executorID(),
          lost);
    }
    if (collector == null) return; // never started
    active = false;
    if (collectTimer != null)
      collectTimer.shutdown(); // a collection under way ends first: collectAll waits for it
    if (rules != null) rules.stop();
    if (control != null) lastCalibration();
    if (control != null) control.close();
    control = null;
    if (responder != 0) CloudProfiler.responderStop(responder);
    responder = 0;
    workers.removeInboxName(); // the stop below takes what workers handed over
    CloudProfiler.stop();
    metrics.libraryStopped(); // the metrics' last report may come after this
    sendCounters(); // their final values
    ChannelCaches.forgetAll();
    collector.collectAll(false);
    workers.removeNames(); // after the copy: a process killed during it leaves its folder named
    collector = null;
  }

  @Override
  public void shutdown() {
    running = null;
    finish();
    try {
      if (shutdownHook != null) ShutdownHookManager.get().removeShutdownHook(shutdownHook);
    } catch (IllegalStateException alreadyShuttingDown) {
      // the hook is running or has run: nothing left to do
    }
  }
}
