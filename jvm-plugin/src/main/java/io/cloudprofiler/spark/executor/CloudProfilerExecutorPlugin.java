package io.cloudprofiler.spark.executor;

import com.codahale.metrics.Gauge;
import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.NativeLoader;
import io.cloudprofiler.PrivateFiles;
import io.cloudprofiler.spark.Config;
import io.cloudprofiler.spark.DaemonThreads;
import io.cloudprofiler.spark.Messages;
import io.cloudprofiler.spark.Options;
import io.cloudprofiler.spark.calibration.ProbeControl;
import io.cloudprofiler.spark.calibration.RegisteredResponders;
import io.cloudprofiler.spark.calibration.TscDomain;
import io.cloudprofiler.spark.driver.CloudProfilerDriverPlugin;
import io.cloudprofiler.spark.rules.RulesFollower;
import io.cloudprofiler.spark.sql.TraceExpression;
import io.cloudprofiler.spark.tables.ArrowTables;
import java.io.File;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
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
 * <p>The one-time setup (the library's start, the TSC domain found with the driver, the task
 * channels) runs in the background from {@link #init}, so that no task pays for it: a task waits at
 * most for the library's start (its code may open cp_trace channels or start Python workers, which
 * need the folder), and never for the domain (see {@link TaskRecords}).
 *
 * <p>Everything this process logs (task channels, cp_trace channels) goes to one local folder, and
 * so do the records of the Python workers it starts: they hand them to this library's inbox through
 * shared memory (or, where they cannot, write files of their own into the folder); they find both
 * through {@code <localDir>/executors/<pid>} and {@code <pid>.inbox} (cloudprofiler.spark.worker).
 * The folder is copied into logDir every collect interval and at shutdown, then removed; the
 * folders of killed executors on this host are collected when an executor starts.
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

  /** How long the probe control waits for the driver's list of probe responders. */
  private static final long RESPONDERS_WAIT_SECONDS = 5;

  /**
   * How long a task or the shutdown waits for the library's start, and the shutdown for the task
   * channels.
   */
  private static final long SETUP_WAIT_SECONDS = 2;

  /**
   * How long the setup waits for the application id (local mode sets it just after the executor
   * starts).
   */
  private static final long APPLICATION_ID_WAIT_SECONDS = 60;

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
  private File pointer;
  private final TaskRecords tasks = new TaskRecords();

  /**
   * Open once the library has started (or failed to); {@link #setUp} once the task channels are
   * open (or not).
   */
  private final CountDownLatch libraryStarted = new CountDownLatch(1),
      setUp = new CountDownLatch(1);

  private boolean finished;

  /** The counters as the library stopped, reported from then on. */
  private volatile long[] finalStats;

  /** The library's counters as this executor started it (null before). */
  private volatile long[] statsAtStart;

  private LogCollector collector;
  private ScheduledExecutorService collectTimer;
  private Thread shutdownHook;
  private long responder;
  private ProbeControl control;
  private RulesFollower rules;

  /** The rules at start, as the driver has them (its rules file included). */
  private String startRules;

  private File rulesFile;

  /** Names the inbox's folder for the Python workers (null: no inbox). */
  private File inboxPointer;

  private PluginContext ctx;
  private Options options;

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
    registerMetrics(
        ctx); // now or never: Spark publishes a plugin's registry only if it holds metrics after
    // init
    shutdownHook = new Thread(this::finish, "cloudprofiler-shutdown");
    Runtime.getRuntime().addShutdownHook(shutdownHook);
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
      if (active && taskLogging) openTaskChannels(appId, hostName());
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
    String host = hostName();
    String leaf = appId + "/" + host + "-" + ctx.executorID();
    File local = new File(options.localDir(), leaf);
    try {
      CloudProfiler.start(
          local.getPath(),
          options.compression() == Config.Compression.ZSTD
              ? CloudProfiler.COMPRESSION_ZSTD
              : CloudProfiler.COMPRESSION_NONE,
          options.channelBlocks(),
          0,
          CloudProfiler.FULL_BLOCK,
          options.tscRead() == Config.TscRead.UNORDERED
              ? CloudProfiler.TSC_UNORDERED
              : CloudProfiler.TSC_ORDERED,
          options.rollBytes());
      statsAtStart = CloudProfiler.libraryStats();
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
    boolean named = namesFolder();
    rulesFile = named ? besideName(Config.RULES_FILE_SUFFIX) : null;
    writeRulesFile(startRules);
    if (named && options.pythonHandoff()) inboxPointer = startInbox(appId);
    rules =
        new RulesFollower(
            ctx.executorID(),
            () -> (Messages.RulesNow) ask(new Messages.CurrentRules()),
            this::writeRulesFile);
    collector = new LogCollector(local, options.logDir() + "/" + leaf);
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
    LostExecutors.collectInBackground(options.localDir());
    int interval = options.collectIntervalSeconds();
    if (interval > 0) {
      collectTimer =
          Executors.newSingleThreadScheduledExecutor(DaemonThreads.named("cloudprofiler-collect"));
      collectTimer.scheduleWithFixedDelay(
          DaemonThreads.guarded(
              "the periodic collection of executor " + ctx.executorID(), this::collect),
          interval,
          interval,
          TimeUnit.SECONDS);
    }
    pointer = named ? pointTo(local) : null;
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
        domain = joinDomain(appId);
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
    synchronized (this) {
      if (finished) return; // the executor stopped meanwhile: its records are counted as lost
      long start =
          CloudProfiler.openChannel(
              "spark.task.start",
              handler.name(),
              handler.params(),
              keys,
              new String[] {appId, ctx.executorID(), host, "task_start", domain[0], domain[1]});
      long end =
          CloudProfiler.openChannel(
              "spark.task.end",
              handler.name(),
              handler.params(),
              keys,
              new String[] {appId, ctx.executorID(), host, "task_end", domain[0], domain[1]});
      tasks.open(start, end);
    }
  }

  /**
   * Creates {@code <localDir>/executors} (0700), or checks that an existing one is this user's and
   * no other user can write to it (else another could name a folder or an inbox to this executor's
   * Python workers, or to the collector of a killed executor); false, said in one log line, when it
   * is not: this executor then names nothing for its Python workers, which log to files of their
   * own.
   */
  private boolean namesFolder() {
    try {
      PrivateFiles.folder(new File(options.localDir(), Config.EXECUTOR_FOLDERS).toPath());
      return true;
    } catch (Exception e) {
      workersOnTheirOwn("names no folder nor inbox for its Python workers", e.getMessage());
      return false;
    }
  }

  /** Says why this executor's Python workers log to files of their own: one log line. */
  private void workersOnTheirOwn(String what, String why) {
    LOG.warn(
        "cloudprofiler: executor {} {} (they log to files of their own): {}",
        ctx.executorID(),
        what,
        why);
  }

  /** {@code <localDir>/executors/<pid><suffix>}: what this executor tells its Python workers. */
  private File besideName(String suffix) {
    return new File(
        new File(options.localDir(), Config.EXECUTOR_FOLDERS),
        ProcessHandle.current().pid() + suffix);
  }

  /**
   * Starts the library's inbox, in shared memory where the host has it, and names its folder in
   * {@code <localDir>/executors/<pid>.inbox} for the Python workers; null (they then log to files
   * of their own) when it cannot start.
   */
  private File startInbox(String appId) {
    File shm = new File("/dev/shm");
    // the application in its name: a folder left by a killed executor whose pid comes again is not
    // taken over
    String leaf = "cloudprofiler-inbox-" + appId + "-" + ProcessHandle.current().pid();
    File dir =
        shm.isDirectory() && shm.canWrite()
            ? new File(shm, leaf)
            : new File(new File(options.localDir(), Config.EXECUTOR_FOLDERS), leaf);
    File pointer = besideName(Config.INBOX_SUFFIX);
    try {
      CloudProfiler.inboxStart(dir.getPath());
      writeInPlace(pointer, dir.toPath().toAbsolutePath().normalize().toString());
      return pointer;
    } catch (Exception e) {
      workersOnTheirOwn("takes no records of Python workers in " + dir, e.toString());
      return null;
    }
  }

  /**
   * Writes {@code <localDir>/executors/<pid>}, naming this executor's folder, for the Python
   * workers it starts (their parent or grandparent is this process).
   */
  private File pointTo(File local) {
    File target = besideName("");
    try {
      writeInPlace(target, local.toPath().toAbsolutePath().normalize().toString());
      return target;
    } catch (Exception e) { // Python workers then log where CLOUDPROFILER_LOG_DIR says, uncollected
      LOG.warn(
          "cloudprofiler: executor {} could not name its folder for Python workers in {}: {}",
          ctx.executorID(),
          target,
          e.toString());
      return null;
    }
  }

  /**
   * Writes {@code text} to {@code target}, renamed into place, so that a reader never reads half of
   * it.
   */
  private static void writeInPlace(File target, String text) throws Exception {
    PrivateFiles.writeInPlace(target.toPath(), text);
  }

  /**
   * The rules this executor follows, in {@code <localDir>/executors/<pid>.rules}: its Python
   * workers follow that file (CLOUDPROFILER_RULES, set by cloudprofiler.spark.worker).
   */
  private void writeRulesFile(String text) {
    if (rulesFile == null) return; // no names folder of this user's: said once
    try {
      writeInPlace(rulesFile, text);
    } catch (Exception e) {
      LOG.warn(
          "cloudprofiler: executor {} could not write its rules for Python workers to {}: {}",
          ctx.executorID(),
          rulesFile,
          e.toString());
    }
  }

  /**
   * Finds this process's TSC domain with the driver: joins that of a member in this JVM (the
   * driver's, in local mode) as it is; else starts the probe responder and the probe control,
   * probes a member of each domain of this boot id until one agrees (TscDomain.check), or founds a
   * new domain. Returns {domain, what the check found}.
   */
  private String[] joinDomain(String appId) throws Exception {
    String boot = TscDomain.bootId();
    if (!(ask(new Messages.Hello(boot, appId, options.logDir()))
        instanceof Messages.Welcome welcome)) throw unassigned(null);
    Object reply = new Messages.Candidates(welcome.domains());
    for (Messages.Candidate c : welcome.domains()) {
      if (TscDomain.PROCESS.equals(c.process())) return joinOwnJvm(boot, c);
    }
    if (welcome.secret().isEmpty()) return joinUncalibrated(boot); // the driver has said why
    byte[] secret =
        HexFormat.of().parseHex(welcome.secret()); // made by the driver, over Spark's RPC
    String address = blockManagerHost(); // what the driver reaches
    RegisteredResponders targets =
        new RegisteredResponders(
            () ->
                ((Messages.Candidates)
                        askWithin(new Messages.Responders(), RESPONDERS_WAIT_SECONDS))
                    .domains());
    synchronized (
        this) { // on the address where the driver reaches this executor, as Spark's own services
      if (finished) throw new IllegalStateException("the executor stopped while it started");
      responder = CloudProfiler.responderStart(address, 0, secret);
      control = new ProbeControl(secret, address, targets);
    }
    int count = options.calibrationProbes();
    int timeoutMs = options.calibrationTimeoutMs();
    List<String> checks = new ArrayList<>();
    int checked = 0;
    for (int attempt = 0;
        attempt < 10 && reply instanceof Messages.Candidates candidates;
        attempt++) {
      String domain = "";
      List<Messages.Candidate> list = candidates.domains();
      for (int i = checked; i < list.size() && domain.isEmpty(); i++) {
        Messages.Candidate c = list.get(i);
        try {
          TscDomain.Check result =
              TscDomain.check(
                  ProbeControl.probe(c.host(), c.responderPort(), count, timeoutMs, secret));
          checks.add(result.describe(c.domain()));
          if (result.agrees) domain = c.domain();
        } catch (RuntimeException e) {
          checks.add(
              "could not probe "
                  + c.domain()
                  + " at "
                  + c.host()
                  + ":"
                  + c.responderPort()
                  + ": "
                  + e.getMessage());
        }
      }
      checked = Math.max(checked, list.size());
      if (domain.isEmpty()) checks.add("founds a domain");
      String check = String.join("; ", checks);
      reply =
          ask(
              new Messages.Join(
                  boot,
                  domain,
                  checked,
                  address,
                  CloudProfiler.responderPort(responder),
                  control.port(),
                  ctx.executorID(),
                  ProcessHandle.current().pid(),
                  TscDomain.PROCESS,
                  check));
      if (reply instanceof Messages.Joined joined) {
        targets
            .refresh(); // the driver's responder among them: the last run, which the driver clocks,
        // probes it
        return new String[] {joined.domain(), check};
      }
      if (domain.isEmpty()) checks.remove(checks.size() - 1);
    }
    throw unassigned(reply);
  }

  /**
   * Joins the domain of {@code member}, a process of this JVM: its responder answers probes for
   * this executor too, and the driver never asks this executor to probe (its domain is the
   * driver's).
   */
  private String[] joinOwnJvm(String boot, Messages.Candidate member) throws Exception {
    String check = "shares the JVM of " + member.domain() + "'s member (no probes needed)";
    return joinAs(boot, member.domain(), member.host(), member.responderPort(), check);
  }

  /** Tells a driver that does not calibrate that this executor is there: no probes, no secret. */
  private String[] joinUncalibrated(String boot) throws Exception {
    return joinAs(boot, "", blockManagerHost(), 0, "not checked: the driver does not calibrate");
  }

  /**
   * Asks the driver to place this executor in {@code domain} ("": a new one) with no probe run,
   * reachable at {@code host} ({@code port}: a responder's, or 0); returns {domain, check}.
   */
  private String[] joinAs(String boot, String domain, String host, int port, String check)
      throws Exception {
    Object reply =
        ask(
            new Messages.Join(
                boot,
                domain,
                0,
                host,
                port,
                0,
                ctx.executorID(),
                ProcessHandle.current().pid(),
                TscDomain.PROCESS,
                check));
    if (reply instanceof Messages.Joined joined) return new String[] {joined.domain(), check};
    throw unassigned(reply);
  }

  private static IllegalStateException unassigned(Object reply) {
    return new IllegalStateException(
        "the driver did not assign a TSC domain (reply: " + reply + ")");
  }

  /**
   * The host of this executor's block manager (in local mode it gets its id just after the
   * application's).
   */
  private static String blockManagerHost() throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(APPLICATION_ID_WAIT_SECONDS);
    org.apache.spark.storage.BlockManager manager = org.apache.spark.SparkEnv.get().blockManager();
    while (manager.blockManagerId() == null && System.nanoTime() < deadline) Thread.sleep(5);
    if (manager.blockManagerId() == null)
      throw new IllegalStateException("the block manager has no address");
    return manager.blockManagerId().host();
  }

  /** The driver's answer to a {@link Messages} message. */
  private Object ask(Record message) throws Exception {
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
  private Object askWithin(Record message, long seconds) throws Exception {
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

  /**
   * PluginContext.hostname() fails on executors of standalone clusters (their RPC environment has
   * no address).
   */
  private static String hostName() {
    try {
      return InetAddress.getLocalHost().getHostName();
    } catch (Exception e) {
      return "unknown-host";
    }
  }

  /** Indexes into {@link CloudProfiler#libraryStats}. */
  private static final int DROPPED = 3, BYTES_WRITTEN = 4, LOGGED = 5;

  private void registerMetrics(PluginContext ctx) {
    ctx.metricRegistry().register("recordsLogged", (Gauge<Long>) () -> stat(LOGGED));
    ctx.metricRegistry().register("recordsDropped", (Gauge<Long>) () -> stat(DROPPED));
    ctx.metricRegistry().register("bytesWritten", (Gauge<Long>) () -> stat(BYTES_WRITTEN));
  }

  private long stat(int index) {
    long[] last = finalStats;
    return (last != null ? last : totals())[index];
  }

  /**
   * The library's counters since this executor started it: every channel of this process (task
   * channels, cp_trace channels and its Python workers' hand-off channels), none of an earlier
   * application of this JVM.
   */
  private long[] totals() {
    long[] atStart = statsAtStart;
    if (atStart == null) return new long[LOGGED + 1];
    long[] total = CloudProfiler.libraryStats();
    for (int i = 0; i < total.length; i++) total[i] -= atStart[i];
    return total;
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
    try {
      collector.copyChanged();
    } catch (Exception e) {
      LOG.warn("cloudprofiler: collecting logs into " + collector.target() + " failed", e);
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
   * Flushes, closes and copies everything; runs once, from shutdown() or the JVM shutdown hook.
   * Waits a bounded time for a setup under way (the task records that wait for their channels).
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
    if (inboxPointer != null)
      inboxPointer.delete(); // the stop below takes what workers handed over
    CloudProfiler.stop();
    finalStats = totals(); // the metrics' last report may come after this
    TraceExpression.forgetChannels();
    collector.collectAll(false);
    if (pointer != null)
      pointer.delete(); // after the copy: a process killed during it leaves its folder named
    if (rulesFile != null) rulesFile.delete();
    collector = null;
  }

  @Override
  public void shutdown() {
    running = null;
    finish();
    try {
      if (shutdownHook != null) Runtime.getRuntime().removeShutdownHook(shutdownHook);
    } catch (IllegalStateException alreadyShuttingDown) {
      // the hook is running or has run: nothing left to do
    }
  }
}
