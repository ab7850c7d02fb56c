package io.cloudprofiler.spark.driver;

import com.codahale.metrics.Gauge;
import com.codahale.metrics.MetricRegistry;
import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.CloudProfilerException;
import io.cloudprofiler.NativeLoader;
import io.cloudprofiler.spark.Config;
import io.cloudprofiler.spark.DaemonThreads;
import io.cloudprofiler.spark.Guard;
import io.cloudprofiler.spark.Messages;
import io.cloudprofiler.spark.Options;
import io.cloudprofiler.spark.calibration.CalibrationCoordinator;
import io.cloudprofiler.spark.calibration.TscDomain;
import io.cloudprofiler.spark.executor.LostExecutors;
import io.cloudprofiler.spark.rules.RuleChanges;
import io.cloudprofiler.spark.rules.RuleRequests;
import io.cloudprofiler.spark.rules.RulesFile;
import io.cloudprofiler.spark.sql.OperatorNodes;
import io.cloudprofiler.spark.tables.ArrowTables;
import io.cloudprofiler.spark.ui.CloudprofilerTab;
import io.cloudprofiler.spark.ui.LiveExecutors;
import io.cloudprofiler.spark.ui.LiveFigures;
import io.cloudprofiler.spark.ui.LiveHops;
import io.cloudprofiler.spark.ui.LiveStages;
import io.cloudprofiler.spark.ui.TabContent;
import io.cloudprofiler.spark.ui.TabSummaryEvent;
import io.cloudprofiler.spark.ui.TabWork;
import java.util.List;
import java.util.Map;
import java.util.StringJoiner;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;
import org.apache.spark.scheduler.SparkListenerInterface;
import org.apache.spark.scheduler.SparkListenerJobEnd;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Validates the options (a bad one stops the application at start: the handlers' parameters with
 * the native library's own check), and records every task attempt through {@link TaskListener}. The
 * log folder must be writable from the driver.
 */
public class CloudProfilerDriverPlugin implements DriverPlugin {
  private static final Logger LOG = LoggerFactory.getLogger(CloudProfilerDriverPlugin.class);

  /**
   * To each executor: the rules at start (those of spark.cloudprofiler.rules and of the driver's
   * rules file).
   */
  public static final String START_RULES = "rules";

  private TaskListener listener;
  private OperatorNodes operators;
  private StreamingBatches streaming;
  private LiveFigures figures;
  private final LiveExecutors executors = new LiveExecutors();
  private final TabWork work = new TabWork();
  private String summaryPosted;
  private long summaryPostedMs;
  static final long SUMMARY_EVERY_MS = 60_000;
  private RuleChanges rules;
  private RuleRequests ruleRequests;
  private volatile CalibrationCoordinator calibration; // set by the background start
  private LiveHops hops; // its window is the collection interval (init)
  private DriverLibrary driverLibrary; // where no executor shares this JVM (init)
  private SparkContext sc;
  private String logDir;
  private ScheduledExecutorService publisher;
  private final CollectionRequests collections = new CollectionRequests();

  /** This JVM's running driver plugin, for {@link #collectNow}; null before and after. */
  private static volatile CloudProfilerDriverPlugin running;

  /** How long an executor's calibration message or the shutdown waits for the background start. */
  private static final int START_WAIT_SECONDS = 10;

  /** Counted down when {@link #startInBackground} has run; its fields are set then. */
  private final CountDownLatch started = new CountDownLatch(1);

  @Override
  public Map<String, String> init(SparkContext sc, PluginContext ctx) {
    Options options = Config.read(sc.getConf());
    hops =
        new LiveHops(
            (domain, tick) -> calibration == null ? null : calibration.toReference(domain, tick),
            options.collectIntervalSeconds() * 1_000_000_000L,
            System::nanoTime);
    PythonUdfTiming.check(sc.getConf());
    StringJoiner settings = new StringJoiner(", ", "cloudprofiler: ", "");
    for (Config.Key<?> key : Config.ALL) settings.add(key.name + "=" + key.text(sc.getConf()));
    LOG.info("{}", settings);
    this.sc = sc;
    logDir = options.logDir();
    ArrowTables.useHadoopSettingsOf(sc.getConf());
    try { // found now, not when the application's tables and logs are lost at its end
      ArrowTables.checkWritable(logDir);
    } catch (Exception e) {
      throw new IllegalArgumentException(
          Config.LOG_DIR.name + "=" + logDir + " is invalid: cannot write there (" + e + ")", e);
    }
    String rulesFile = Config.RULES_FILE.read(sc.getConf());
    String fileRules = rulesFile.isEmpty() ? "" : RulesFile.read(rulesFile);
    String startRules =
        options.rules().isEmpty() || fileRules.isEmpty()
            ? options.rules() + fileRules
            : options.rules() + "\n" + fileRules;
    String failure = NativeLoader.load(options.nativePath());
    if (failure == null) {
      for (Config.HandlerOption handler : options.handlers())
        handler.check(); // a bad one stops the application
      checkRules(Config.RULES, sc, options.rules());
      checkRules(Config.RULES_FILE, sc, fileRules);
      CloudProfiler.setRules(startRules);
    } else {
      LOG.warn(
          "cloudprofiler: the driver checks no handler parameters (each executor checks them as it"
              + " opens its channels) and calibrates nothing: {}",
          failure);
    }
    if (failure == null && !sc.isLocal()) driverLibrary = DriverLibrary.start(options);
    rules = new RuleChanges(startRules, failure == null ? CloudProfiler.tsc() : 0L);
    RuleChanges.run(rules);
    Supplier<Map<String, String>> clock = failure == null ? startClock() : Map::of;
    listener = new TaskListener(clock);
    operators = OperatorNodes.start(clock);
    sc.addSparkListener(Guard.wrap(SparkListenerInterface.class, listener, "the task table", null));
    streaming = new StreamingBatches(clock);
    sc.addSparkListener(
        Guard.wrap(SparkListenerInterface.class, streaming, "the streaming batch table", null));
    if (options.uiEnabled()) attachTab(sc, clock);
    DaemonThreads.named("cloudprofiler-driver-start")
        .newThread(() -> startInBackground(sc, options))
        .start();
    running = this;
    LOG.info("cloudprofiler: logs of this application collect in {}/<application id>", logDir);
    // executors read and validate the same options from their own configuration; the rules file is
    // the driver's
    return Map.of(START_RULES, startRules);
  }

  /**
   * The Cloudprofiler tab's figures, and the tab in the driver's UI where it has one; a failure (a
   * jar built for another Spark's UI) leaves the application without the tab, said in one line.
   */
  private void attachTab(SparkContext sc, Supplier<Map<String, String>> clock) {
    try {
      LiveStages stages = new LiveStages(work);
      sc.addSparkListener(
          Guard.wrap(SparkListenerInterface.class, stages, "the Cloudprofiler tab's stages", null));
      sc.addSparkListener(
          Guard.wrap(
              SparkListenerInterface.class,
              executors.listener(),
              "the Cloudprofiler tab's removed executors",
              null));
      figures =
          new LiveFigures(
              stages,
              executors,
              streaming::recent,
              StreamingBatches.COLUMNS,
              () -> liveOperators(clock),
              () -> calibration == null ? List.of() : calibration.quality(),
              hops,
              work,
              this::appFolder);
      if (sc.ui().isDefined())
        CloudprofilerTab.attach(sc.ui().get(), new TabContent(figures, true));
    } catch (Throwable e) {
      LOG.warn("cloudprofiler: the Spark UI has no Cloudprofiler tab: {}", e.toString());
    }
  }

  /**
   * The operators of the latest SQL executions in seconds of the driver's TSC; none where the
   * library did not load or could not measure its TSC's frequency.
   */
  private List<Map<String, Object>> liveOperators(Supplier<Map<String, String>> clock) {
    String hz;
    try {
      hz = clock.get().get("tsc.hz");
    } catch (RuntimeException e) {
      return List.of();
    }
    return hz == null ? List.of() : operators.live().rows(Double.parseDouble(hz));
  }

  /**
   * Writes the tab's figures into the event log (where Spark writes one), for the History Server's
   * tab: at the end, and while the application runs at most every {@link #SUMMARY_EVERY_MS} and
   * only when they changed.
   */
  private synchronized void postSummary(boolean last) {
    if (figures == null || !sc.conf().getBoolean("spark.eventLog.enabled", false)) return;
    long now = System.currentTimeMillis();
    if (!last && now - summaryPostedMs < SUMMARY_EVERY_MS) return;
    String text = figures.get().toString();
    if (text.equals(summaryPosted)) return;
    sc.listenerBus().post(new TabSummaryEvent(TabSummaryEvent.VERSION, text));
    summaryPosted = text;
    summaryPostedMs = now;
  }

  /**
   * The part of the start that the application need not wait for (20 ms of a short application's
   * start): the rule requests' poll, the calibration's coordinator and listener, the collection of
   * lost executors and the tables' publishing. Executors' calibration messages and the shutdown
   * wait for it ({@link #awaitStart}).
   */
  private void startInBackground(SparkContext sc, Options options) {
    try {
      ruleRequests = new RuleRequests(rules, () -> sc.applicationId() == null ? null : appFolder());
      if (options.calibrationEnabled()) {
        String host =
            sc.conf().get("spark.driver.host", "127.0.0.1"); // where executors reach the driver
        calibration =
            new CalibrationCoordinator(
                host,
                sc.conf().get("spark.driver.bindAddress", host), // where Spark's driver listens
                options.calibrationIntervalSeconds(),
                options.calibrationProbes(),
                options.calibrationTimeoutMs(),
                options.calibrationPeers(),
                options.calibrationForce());
        sc.addSparkListener(
            Guard.wrap(
                SparkListenerInterface.class,
                new CalibrationEvents(calibration),
                "the calibration's listener",
                null));
      }
      LostExecutors.collectInBackground( // those of this host that earlier applications lost
          options.localDir(),
          (pid, folder, files, cut) -> executors.lostCollected("driver", pid, folder, files, cut));
      if (options.collectIntervalSeconds() > 0) publishEvery(options.collectIntervalSeconds());
    } catch (Throwable e) {
      LOG.warn(
          "cloudprofiler: the driver runs without calibration, rule requests or published tables",
          e);
    } finally {
      started.countDown();
    }
  }

  /** Waits a bounded time for {@link #startInBackground}. */
  private void awaitStart() {
    try {
      started.await(START_WAIT_SECONDS, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** The native library's check of the rules of one option; throws naming it. */
  private static void checkRules(Config.Key<String> key, SparkContext sc, String text) {
    try {
      CloudProfiler.setRules(text);
    } catch (CloudProfilerException e) {
      throw Config.invalid(key.name, key.text(sc.getConf()), e.getMessage());
    }
  }

  /**
   * The task table's metadata: the driver's TSC and clocks as the application starts (the
   * analysis's origin of time, t_ns = 0, and its pairing of TSC with wall clock for Spark's
   * millisecond times), its TSC domain, and the TSC frequency, which the native library measures
   * over 50 ms where the CPU does not report it: measured in the background, so that the
   * application's start does not wait for it (the table's first batch does, if it comes first).
   */
  private static Supplier<Map<String, String>> startClock() {
    long[] c = CloudProfiler.clockRead();
    CompletableFuture<Double> hz = new CompletableFuture<>();
    DaemonThreads.named("cloudprofiler-tsc-hz")
        .newThread(
            () -> {
              try {
                hz.complete(CloudProfiler.tscHz());
              } catch (Throwable e) {
                hz.completeExceptionally(e);
              }
            })
        .start();
    String clock =
        String.format(
            "{\"tsc\": %d, \"monotonic_raw_ns\": %d, \"realtime_ns\": %d, \"uncertainty_ticks\":"
                + " %d}",
            c[0], c[1], c[2], c[3]);
    return () ->
        Map.of(
            "application.start.clock",
            clock,
            "tsc.hz",
            String.valueOf(hz.join()),
            "tsc.domain",
            TscDomain.bootId());
  }

  /** What the calibration learns from the scheduler: jobs that end, executors that are gone. */
  private static final class CalibrationEvents extends SparkListener {
    private final CalibrationCoordinator calibration;

    CalibrationEvents(CalibrationCoordinator calibration) {
      this.calibration = calibration;
    }

    @Override
    public void onJobEnd(SparkListenerJobEnd jobEnd) {
      calibration.jobEnded();
    }

    @Override
    public void onExecutorRemoved(SparkListenerExecutorRemoved removed) {
      calibration.executorRemoved(removed.executorId());
    }
  }

  /**
   * Publishes the task table every {@code seconds}, so that a running application's folder holds
   * it.
   */
  private void publishEvery(int seconds) {
    publisher =
        Executors.newSingleThreadScheduledExecutor(DaemonThreads.named("cloudprofiler-publish"));
    publisher.scheduleWithFixedDelay(
        DaemonThreads.guarded("the publishing of the task and rules tables", this::publish),
        seconds,
        seconds,
        TimeUnit.SECONDS);
  }

  /**
   * Writes what the driver has so far into the running application's folder: its own library's logs
   * (on a cluster), the task, operator, streaming batch and rules tables.
   */
  private synchronized void publish() {
    if (sc.applicationId() == null) return; // its folder is named at a later run
    if (driverLibrary != null) driverLibrary.collect(appFolder(), hops);
    try {
      listener.publishTable(TaskListener.TABLE.in(appFolder()));
    } catch (Exception e) {
      LOG.warn("cloudprofiler: could not publish the task table to " + appFolder(), e);
    }
    try {
      operators.publish(appFolder());
    } catch (Exception e) {
      LOG.warn("cloudprofiler: could not publish the operator tables to " + appFolder(), e);
    }
    try {
      streaming.publish(appFolder());
    } catch (Exception e) {
      LOG.warn("cloudprofiler: could not publish the streaming batch table to " + appFolder(), e);
    }
    try {
      postSummary(false);
    } catch (Exception e) {
      LOG.warn("cloudprofiler: could not write the tab's figures into the event log", e);
    }
    try {
      rules.publish(appFolder());
    } catch (Exception e) {
      LOG.warn("cloudprofiler: could not publish the rules' changes to " + appFolder(), e);
    }
  }

  /**
   * Has every running executor collect its logs now, up to their last record, waiting at most
   * {@code timeoutMs} for them, then publishes the driver's tables: so that the running
   * application's folder holds everything until now (a report made during the run). Returns
   * {collected, running}: the executors that collected and those it waited for; null where no
   * driver plugin runs in this JVM.
   */
  public static int[] collectNow(long timeoutMs) throws InterruptedException {
    CloudProfilerDriverPlugin driver = running;
    if (driver == null) return null;
    int[] collected = driver.collections.request(timeoutMs);
    driver.publish();
    return collected;
  }

  /**
   * The application's folder. The id is assigned after the plugins start (local mode,
   * local-cluster): what runs before it has no folder yet.
   */
  private String appFolder() {
    return Config.appFolder(logDir, sc.applicationId());
  }

  /**
   * The driver's figures in Spark's metrics system (source {@code
   * plugin.io.cloudprofiler.spark.CloudProfilerPlugin}: every sink the application configures, the
   * PrometheusServlet among them): the stragglers of the newest stages and the records that the
   * executors logged and dropped and the bytes they wrote, summed. The tab's metrics page has them
   * per stage and executor, with labels. The names differ from the executors' gauges (in local mode
   * the executor's registry goes into the same source, where a name registered twice is left out).
   */
  @Override
  public void registerMetrics(String appId, PluginContext ctx) {
    if (figures == null) return; // no tab: nothing to report
    MetricRegistry registry = ctx.metricRegistry();
    registry.register("stragglers", (Gauge<Long>) figures::stragglers);
    registry.register("executorsRecordsLogged", (Gauge<Long>) () -> executors.totals()[0]);
    registry.register("executorsRecordsDropped", (Gauge<Long>) () -> executors.totals()[1]);
    registry.register("executorsBytesWritten", (Gauge<Long>) () -> executors.totals()[2]);
  }

  /**
   * Executors find their TSC domain, register their probe responders, learn the rules and send
   * their counters here.
   */
  @Override
  public Object receive(Object message) {
    long began = System.nanoTime();
    Object question = Messages.fromWire(message);
    if (question instanceof Messages.Counters counters) {
      executors.update(counters);
      work.since(TabWork.Part.MESSAGES, began);
      return null;
    }
    if (question instanceof Messages.LostCollected c) {
      executors.lostCollected(c.executorId(), c.pid(), c.folder(), c.files(), c.cut());
      return null;
    }
    if (question instanceof Messages.Samples samples) {
      for (Messages.ChannelSamples c : samples.channels())
        hops.add(samples.domain(), samples.tscHz(), c.channel(), c.level(), c.ids(), c.ticks());
      work.since(TabWork.Part.MESSAGES, began);
      return null;
    }
    if (question instanceof Messages.Follow follow) {
      Messages.RulesNow now = rules.now();
      return Messages.toWire(
          new Messages.Directions(
              now.version(), now.text(), collections.asked(follow.executorId())));
    }
    if (question instanceof Messages.Collected c) {
      collections.collected(c.executorId(), c.collection());
      return null;
    }
    if (question instanceof Messages.CurrentRules) return Messages.toWire(rules.now());
    // from SQL in a task: the rules of that task's Connect session only
    if (question instanceof Messages.SetRules change)
      return Messages.toWire(rules.trySetSession(change.session(), change.text()));
    if (question instanceof Messages.SessionRulesNow asked)
      return Messages.toWire(rules.ofSession(asked.session()));
    awaitStart();
    return calibration != null ? Messages.toWire(calibration.receive(question)) : null;
  }

  @Override
  public void shutdown() {
    running = null;
    try {
      postSummary(true); // the listener bus still runs: Spark stops it after its plugins
    } catch (Exception e) {
      LOG.warn("cloudprofiler: could not write the tab's figures into the event log", e);
    }
    awaitStart();
    if (publisher != null) publisher.shutdown();
    if (calibration != null) calibration.shutdown();
    RuleChanges.run(null);
    if (ruleRequests != null) ruleRequests.stop();
    String appFolder = appFolder();
    if (driverLibrary != null) driverLibrary.stop(appFolder);
    try {
      listener.writeTable(TaskListener.TABLE.in(appFolder));
    } catch (Exception e) {
      LOG.warn("cloudprofiler: could not write the task table to " + appFolder, e);
    }
    try {
      rules.publish(appFolder);
    } catch (Exception e) {
      LOG.warn("cloudprofiler: could not write the rules' changes to " + appFolder, e);
    }
    try {
      operators.finish(appFolder);
    } catch (Exception e) {
      LOG.warn("cloudprofiler: could not write the operator tables to " + appFolder, e);
    }
    try {
      streaming.finish(appFolder);
    } catch (Exception e) {
      LOG.warn("cloudprofiler: could not write the streaming batch table to " + appFolder, e);
    }
  }
}
