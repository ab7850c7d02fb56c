package io.cloudprofiler.spark;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.NativeLoader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.channels.Channels;
import java.nio.channels.SeekableByteChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowFileReader;
import org.apache.arrow.vector.ipc.ArrowFileWriter;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.util.ByteArrayReadableSeekableByteChannel;
import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.LogEvent;
import org.apache.logging.log4j.core.LoggerContext;
import org.apache.logging.log4j.core.appender.AbstractAppender;
import org.apache.logging.log4j.core.config.Configuration;
import org.apache.logging.log4j.core.config.LoggerConfig;
import org.apache.logging.log4j.core.config.Property;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;

/**
 * Tests of the plugin's JVM functions, each a static method named test*; main runs them all, prints
 * one line each and exits 1 if any failed (tests/test_java.py compiles and runs this with the
 * plugin jar and Spark's jars). The probe control and the task records run on the real native
 * library (loaded from the jar) and real sockets.
 */
public final class JvmTests {
  private JvmTests() {}

  static void check(boolean condition, Supplier<String> what) {
    if (!condition) throw new AssertionError(what.get());
  }

  static void equal(Object expected, Object actual) {
    check(expected.equals(actual), () -> "expected " + expected + ", got " + actual);
  }

  static String thrown(Runnable action) {
    try {
      action.run();
    } catch (RuntimeException e) {
      return e.getMessage();
    }
    throw new AssertionError("nothing thrown");
  }

  /** The pairs as "i-j" strings; every pair once, i < j. */
  static Set<String> pairs(int n, int peers) {
    Set<String> out = new HashSet<>();
    for (int[] p : CalibrationCoordinator.hostPairs(n, peers)) {
      check(p[0] < p[1] && p[1] < n, () -> Arrays.toString(p));
      check(out.add(p[0] + "-" + p[1]), () -> "pair " + Arrays.toString(p) + " twice");
    }
    return out;
  }

  public static void testHostPairsAreAllPairsUpToPeersPlusOneHosts() {
    equal(Set.of(), pairs(1, 8));
    equal(Set.of("0-1"), pairs(2, 8));
    equal(9 * 8 / 2, pairs(9, 8).size());
    equal(Set.of(), pairs(5, 0));
  }

  public static void testHostPairsBeyondPeersPlusOneFormARingOfEvenDegree() {
    for (int[] c : new int[][] {{10, 8, 8}, {10, 3, 2}, {20, 1, 2}, {7, 4, 4}}) {
      int n = c[0], peers = c[1], degree = c[2];
      Set<String> pairs = pairs(n, peers);
      equal(n * degree / 2, pairs.size());
      for (int host = 0; host < n; host++) {
        String h = String.valueOf(host);
        long partners = pairs.stream().filter(p -> Arrays.asList(p.split("-")).contains(h)).count();
        check(
            partners == degree,
            () -> "host " + h + " of " + n + " (peers " + peers + "): " + partners + " partners");
      }
    }
  }

  public static void testARoundPairsTheReferenceWithEveryDomainAndTheOthersInOneConnectedRing() {
    equal(List.of(), CalibrationCoordinator.roundPairs(1, 8));
    for (int n : new int[] {2, 3, 9, 10, 50, 1000}) {
      List<int[]> round = CalibrationCoordinator.roundPairs(n, 8);
      Set<String> seen = new HashSet<>();
      int[] parent = new int[n]; // union-find over the host-to-host pairs alone
      for (int d = 0; d < n; d++) parent[d] = d;
      Set<Integer> withReference = new HashSet<>();
      for (int[] p : round) {
        check(
            p[0] < p[1] && p[1] < n && seen.add(p[0] + "-" + p[1]),
            () -> n + " domains: " + Arrays.toString(p));
        if (p[0] == 0) withReference.add(p[1]);
        else parent[root(parent, p[0])] = root(parent, p[1]);
      }
      equal(n - 1, withReference.size());
      // host pairs: all of them up to 9 domains besides the reference, else 8 partners each: 4 (n -
      // 1) pairs
      int hostPairs = n - 1 <= 9 ? (n - 1) * (n - 2) / 2 : 4 * (n - 1);
      equal(n - 1 + hostPairs, round.size());
      Set<Integer> components = new HashSet<>();
      for (int d = 1; d < n; d++) components.add(root(parent, d));
      check(
          components.size() <= 1,
          () -> n + " domains: the host pairs leave " + components.size() + " groups");
    }
  }

  static int root(int[] parent, int d) {
    while (parent[d] != d) d = parent[d];
    return d;
  }

  public static void testAFailingPairIsRetriedAfter2Then4Then8ThenEvery16Rounds() {
    List<Integer> tried = new ArrayList<>();
    int next = 0, failures = 0;
    for (int round = 1; round <= 80; round++) {
      if (round < next) continue;
      tried.add(round); // and it fails again
      next = CalibrationCoordinator.retryRound(round, ++failures);
    }
    equal(List.of(1, 3, 7, 15, 31, 47, 63, 79), tried);
    for (int many : new int[] {31, 32, 1000}) { // a pair failing for hours: still every 16 rounds
      equal(100 + 16, CalibrationCoordinator.retryRound(100, many));
    }
  }

  public static void testAJobEndRoundStartsAtLeastASecondAfterThePreviousRound() {
    long second = 1_000_000_000L;
    equal(second, CalibrationCoordinator.JOB_END_SPACING_NANOS);
    equal(second, CalibrationCoordinator.jobEndDelayNanos(0));
    equal(700_000_000L, CalibrationCoordinator.jobEndDelayNanos(300_000_000L));
    equal(0L, CalibrationCoordinator.jobEndDelayNanos(second));
    equal(0L, CalibrationCoordinator.jobEndDelayNanos(60 * second));
    for (long since = 0; since < 2 * second; since += 7_919_113) {
      long delay = CalibrationCoordinator.jobEndDelayNanos(since);
      check(
          delay >= 0 && since + delay >= second, () -> "a round " + delay + " ns after a job end");
    }
  }

  public static void testTscCheckAgreesOnlyWithinHalfTheSmallestRoundTrip() {
    // (send, remote, recv): one TSC read by both sides, the remote value inside every round trip
    check(
        TscDomain.check(new long[] {100, 150, 200, 300, 305, 310}).agrees,
        () -> "one TSC disagrees");
    TscDomain.Check far = TscDomain.check(new long[] {100, 5000, 200, 300, 5305, 310});
    check(!far.agrees && far.bound == 5 && far.offset == 5000, far::toString);
    check(!TscDomain.check(new long[] {100, 150, 0}).agrees, () -> "no answer agrees");
  }

  public static void testOptionsAreTypedWithDefaultsFilledIn() {
    SparkConf conf =
        new SparkConf(false)
            .set("spark.cloudprofiler.channelBlocks", " 32 ")
            .set("spark.cloudprofiler.compression", "zstd")
            .set("spark.cloudprofiler.task.params", "1, 2")
            .set("spark.cloudprofiler.task.handler", "xoy")
            .set("spark.cloudprofiler.channel.a.b.handler", "null");
    Options o = Config.read(conf);
    equal(32, o.channelBlocks());
    equal(Config.Compression.ZSTD, o.compression());
    equal(Config.TscRead.ORDERED, o.tscRead());
    equal("xoy", o.taskHandler().handler().name());
    equal(List.of(1L, 2L), Arrays.stream(o.taskHandler().handler().params()).boxed().toList());
    equal("spark.cloudprofiler.channel.a.b.handler", o.channelHandlers().get(0).handlerKey());
    equal(System.getProperty("java.io.tmpdir") + "/cloudprofiler-local", o.localDir());
    equal(100, o.calibrationProbes());
    equal(64L << 20, o.rollBytes());
    check(o.taskEnabled() && o.calibrationEnabled() && !o.calibrationForce(), o::toString);
  }

  public static void testABadOptionIsNamedWithItsValue() {
    equal(
        "spark.cloudprofiler.calibration.probes=0 is invalid: expected an integer from 1 to 10000",
        thrown(
            () ->
                Config.read(
                    new SparkConf(false).set("spark.cloudprofiler.calibration.probes", "0"))));
    equal(
        "spark.cloudprofiler.task.enabled=yes is invalid: expected true or false",
        thrown(
            () ->
                Config.read(new SparkConf(false).set("spark.cloudprofiler.task.enabled", "yes"))));
    equal(
        "spark.cloudprofiler.roll.bytes=1000 is invalid: expected 0 (never) or a number of bytes"
            + " from 65536",
        thrown(
            () -> Config.read(new SparkConf(false).set("spark.cloudprofiler.roll.bytes", "1000"))));
    equal(
        0L,
        Config.read(new SparkConf(false).set("spark.cloudprofiler.roll.bytes", "0")).rollBytes());
    equal(
        "spark.cloudprofiler.compression=lz4 is invalid: expected none or zstd",
        thrown(
            () -> Config.read(new SparkConf(false).set("spark.cloudprofiler.compression", "lz4"))));
    check(
        thrown(
                () ->
                    Config.read(new SparkConf(false).set("spark.cloudprofiler.channelblocks", "4")))
            .endsWith("did you mean spark.cloudprofiler.channelBlocks?"),
        () -> "no suggestion");
  }

  /** A run of one answered probe whose round trip is `rtt`, and one unanswered. */
  static long[] runOf(long rtt) {
    return new long[] {1000, 5, 1000 + rtt, 2000, 6, 0};
  }

  public static void testARunGoesInEvenBurstsWithTheirTriplesInOrder() {
    equal("[10, 10, 10, 10, 10, 10, 10, 10, 10, 10]", Arrays.toString(ProbeRuns.burstSizes(100)));
    equal("[10, 10, 10, 10, 10, 10, 10, 10, 9, 9]", Arrays.toString(ProbeRuns.burstSizes(98)));
    equal("[1, 1, 1]", Arrays.toString(ProbeRuns.burstSizes(3)));
    List<Integer> sizes = new ArrayList<>();
    long[] sent = {0};
    long start = System.nanoTime();
    long[] run =
        ProbeRuns.inBursts(
            23,
            size -> {
              sizes.add(size);
              long[] part = new long[3 * size];
              for (int i = 0; i < part.length; i++) part[i] = sent[0]++;
              return part;
            });
    long tookNanos = System.nanoTime() - start;
    equal(List.of(3, 3, 3, 2, 2, 2, 2, 2, 2, 2), sizes);
    for (int i = 0; i < run.length; i++) equal((long) i, run[i]);
    check(
        tookNanos >= 9 * ProbeRuns.BURST_GAP_NANOS,
        () -> "bursts only " + tookNanos + " ns apart in all");
  }

  public static void testADelayedRunIsTakenAgainAndTheBestKept() throws Exception {
    equal(50L, ProbeRuns.minRtt(new long[] {0, 1, 80, 100, 1, 150, 200, 1, 0}));
    equal(Long.MAX_VALUE, ProbeRuns.minRtt(new long[] {0, 1, 0}));
    long[][] runs = {runOf(1000), runOf(500), runOf(300), runOf(50)};
    int[] taken = {0};
    ProbeRuns.Run take = () -> runs[taken[0]++];
    equal(
        300L,
        ProbeRuns.minRtt(ProbeRuns.retaken(take, 100))); // within 4 x 100 at the third run: kept
    equal(3, taken[0]);
    taken[0] = 0;
    equal(
        1000L,
        ProbeRuns.minRtt(ProbeRuns.retaken(take, Long.MAX_VALUE))); // nothing seen yet: taken once
    equal(1, taken[0]);
    long[][] late = {runOf(1000), runOf(50), runOf(500), runOf(300)};
    taken[0] = 0;
    long[] kept =
        ProbeRuns.retaken(() -> late[taken[0]++], 10); // never within 4 x 10: RETRIES more
    equal(50L, ProbeRuns.minRtt(kept)); // the best, not the last
    equal(1 + ProbeRuns.RETRIES, taken[0]);
  }

  public static void testARulesFileInJsonBecomesRulesTextOrIsRefusedNamingTheEntry()
      throws Exception {
    Path dir = Files.createTempDirectory("rules-file");
    Path good =
        Files.writeString(
            dir.resolve("good.json"),
            "{\"rules\": [{\"pattern\": \"ysb.*\", \"handler\": \"downsample\", \"params\": [64]},"
                + " {\"pattern\": \"*\", \"handler\": \"null\"}]}");
    equal("ysb.*=downsample:64\n*=null", RulesFile.read(good.toString()));
    String[][] bad = {
      {"{\"rules\": [", "cannot be read as JSON"},
      {"{\"rule\": []}", "expected a list 'rules' of tables"},
      {
        "{\"rules\": [{\"pattern\": \"a\", \"handler\": \"null\"}, {\"pattern\": \"b\","
            + " \"handler\": \"xoy\", \"params\": [1, \"2\"]}]}",
        "rule 2 {\"pattern\":\"b\",\"handler\":\"xoy\",\"params\":[1,\"2\"]}: 'params'"
      },
      {
        "{\"rules\": [{\"pattern\": \"a\", \"handler\": \"null\", \"param\": 1}]}",
        "unknown key param"
      },
      {
        "{\"rules\": [{\"pattern\": \"a=b\", \"handler\": \"null\"}]}",
        "'pattern' must be a non-empty string"
      },
    };
    for (String[] entry : bad) {
      Path file = Files.writeString(dir.resolve("bad.json"), entry[0]);
      String message = thrown(() -> RulesFile.read(file.toString()));
      check(
          message.startsWith("spark.cloudprofiler.rules.file=" + file + " is invalid: ")
              && message.contains(entry[1]),
          () -> message);
    }
    Path toml = Files.writeString(dir.resolve("rules.toml"), "[[rules]]\npattern = \"*\"\n");
    String message = thrown(() -> RulesFile.read(toml.toString()));
    check(message.contains("cps.builder(rules=pathlib.Path(file)) reads TOML"), () -> message);
  }

  /** Only JDK classes on the wire: an executor cannot load the plugin's. */
  static void jdkOnly(Object wire) {
    if (wire instanceof Object[] fields) for (Object f : fields) jdkOnly(f);
    else if (wire instanceof List<?> list) for (Object f : list) jdkOnly(f);
    else
      check(
          wire == null || wire.getClass().getClassLoader() == null,
          () -> wire.getClass() + " on the wire");
  }

  public static void testMessagesCrossTheWireAsJdkValuesAndComeBackWhole() {
    List<Record> messages =
        List.of(
            new Messages.Hello("boot", "app-1", "hdfs:///logs"),
            new Messages.Candidates(
                List.of(
                    new Messages.Candidate("boot", "h1", 4000, "jvm-1"),
                    new Messages.Candidate("boot#1", "h2", 4001, "jvm-2"))),
            new Messages.Candidates(List.of()),
            new Messages.Welcome(
                "00ff", List.of(new Messages.Candidate("boot", "h1", 4000, "jvm-1"))),
            new Messages.Join(
                "boot",
                "",
                2,
                "h3",
                4002,
                4003,
                "7",
                1234L,
                "jvm-3",
                "differs from boot; founds a domain"),
            new Messages.Joined("boot#2"),
            new Messages.Last("7"),
            new Messages.Responders());
    for (Record message : messages) {
      Object wire = Messages.toWire(message);
      jdkOnly(wire);
      equal(message, Messages.fromWire(wire));
    }
    check(
        Messages.fromWire(new Object[] {"Joined", 5}) == null,
        () -> "a field of the wrong type decodes");
    check(Messages.fromWire(new Object[] {"Shutdown"}) == null, () -> "an unknown message decodes");
    equal(Boolean.TRUE, Messages.fromWire(Messages.toWire(Boolean.TRUE)));
  }

  public static void testTheOptionTableNamesEveryOption() {
    String json = Config.json();
    for (Config.Key<?> key : Config.ALL)
      check(json.contains("\"key\": \"" + key.name + "\""), () -> key.name);
    check(json.contains("\"executor_folders\": \"" + Config.EXECUTOR_FOLDERS + "\""), () -> json);
  }

  /**
   * An executor plugin whose onTaskStart fails to link, as a jar built for the other Scala does.
   */
  private static final class UnlinkedPlugin implements ExecutorPlugin {
    int taskStarts, shutdowns;

    @Override
    public void onTaskStart() {
      taskStarts++;
      throw new NoSuchMethodError(
          "'scala.collection.immutable.Seq SparkListenerJobStart.stageIds()'");
    }

    @Override
    public void shutdown() {
      shutdowns++;
    }
  }

  public static void testAGuardedPartThatThrowsIsDisabledAndStillShutsDown() {
    UnlinkedPlugin target = new UnlinkedPlugin();
    ExecutorPlugin guarded = Guard.wrap(ExecutorPlugin.class, target, "a test part", null);
    guarded.onTaskStart(); // the error stays here
    guarded.onTaskStart(); // a disabled part is not called
    guarded.onTaskSucceeded();
    guarded.shutdown(); // but releases what it holds
    equal(1, target.taskStarts);
    equal(1, target.shutdowns);
    check(guarded.equals(guarded) && !guarded.equals(target), () -> "a proxy equals itself only");
  }

  public static void testABadOptionStillStopsTheApplicationAtStartAndAnythingElseDoesNot() {
    DriverPlugin badOption =
        Guard.wrap(
            DriverPlugin.class,
            new DriverPlugin() {
              @Override
              public Map<String, String> init(SparkContext sc, PluginContext ctx) {
                throw Config.invalid(Config.LOG_DIR.name, "x", "cannot write there");
              }
            },
            "the driver plugin",
            IllegalArgumentException.class);
    equal(
        Config.LOG_DIR.name + "=x is invalid: cannot write there",
        thrown(() -> badOption.init(null, null)));
    DriverPlugin unlinked =
        Guard.wrap(
            DriverPlugin.class,
            new DriverPlugin() {
              @Override
              public Map<String, String> init(SparkContext sc, PluginContext ctx) {
                throw new NoClassDefFoundError("scala/jdk/javaapi/CollectionConverters");
              }
            },
            "the driver plugin",
            IllegalArgumentException.class);
    check(
        unlinked.init(null, null) == null,
        () -> "a disabled driver plugin asks for no configuration");
  }

  /**
   * An Arrow IPC file of three record batches, in the layout of the library's log files (magic,
   * messages with the continuation marker, end marker, footer).
   */
  static byte[] threeBatches() throws Exception {
    try (BufferAllocator allocator = new RootAllocator();
        BigIntVector tsc = new BigIntVector("tsc", allocator);
        VectorSchemaRoot root = VectorSchemaRoot.of(tsc)) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      try (ArrowFileWriter writer = new ArrowFileWriter(root, null, Channels.newChannel(out))) {
        writer.start();
        for (int batch = 0; batch < 3; batch++) {
          tsc.allocateNew(100);
          for (int i = 0; i < 100; i++) tsc.set(i, batch * 100L + i);
          tsc.setValueCount(100);
          root.setRowCount(100);
          writer.writeBatch();
        }
        writer.end();
      }
      return out.toByteArray();
    }
  }

  /**
   * The batches an Arrow stream reader reads from the messages after the magic; throws inside a
   * message.
   */
  static int batchesIn(byte[] prefix) throws Exception {
    try (BufferAllocator allocator = new RootAllocator();
        ArrowStreamReader reader =
            new ArrowStreamReader(
                new ByteArrayInputStream(prefix, 8, prefix.length - 8), allocator)) {
      int n = 0;
      while (reader.loadNextBatch()) n++;
      return n;
    }
  }

  public static void testACopyOfAGrowingLogFileEndsAfterItsLastCompleteBatch() throws Exception {
    byte[] whole = threeBatches();
    Path file = Files.createTempFile("growing", ".arrows");
    try {
      Set<Long> ends = new HashSet<>();
      long previous = 0;
      for (int length = 0;
          length < whole.length;
          length++) { // the file at every length its writer may leave it
        int cut = length;
        long last = previous;
        Files.write(file, Arrays.copyOf(whole, cut));
        long n = CompleteBatches.length(file, 0);
        check(n <= cut && n >= last, () -> n + " of " + cut + " bytes after " + last);
        equal(n, CompleteBatches.length(file, previous)); // resumed where the last answer ended
        if (n > 0)
          batchesIn(Arrays.copyOf(whole, (int) n)); // whole messages only: reads without an error
        check(!CompleteBatches.closed(file), () -> cut + " bytes read as closed");
        ends.add(n);
        previous = n;
      }
      equal(5, ends.size()); // nothing yet, the schema, then each of the three batches
      equal(3, batchesIn(Arrays.copyOf(whole, (int) previous)));
      Files.write(file, whole);
      check(CompleteBatches.closed(file), () -> "the closed file read as open");
    } finally {
      Files.delete(file);
    }
  }

  /**
   * A file cut at every length its killed writer may leave it, completed as the collector completes
   * a lost executor's files: Arrow's file reader (which needs the footer) reads its complete
   * batches, and the footer says the file was not closed and what was cut.
   */
  public static void testACutFileIsCompletedUpToItsLastBatchForFileReaders() throws Exception {
    byte[] whole = threeBatches();
    byte[] withoutEnd = Arrays.copyOf(whole, (int) lengthBeforeItsEnd(whole));
    Path file = Files.createTempFile("cut", ".arrows");
    try {
      Set<Integer> seen = new HashSet<>();
      for (int length = 200; length <= withoutEnd.length; length++) {
        Files.write(file, Arrays.copyOf(withoutEnd, length));
        long complete = CompleteBatches.length(file, 0);
        byte[] tail = CompleteBatches.cutEnd(file, complete);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.write(withoutEnd, 0, (int) complete);
        out.write(tail);
        int cut = length;
        try (BufferAllocator allocator = new RootAllocator();
            SeekableByteChannel in = new ByteArrayReadableSeekableByteChannel(out.toByteArray());
            ArrowFileReader reader = new ArrowFileReader(in, allocator)) {
          int batches = reader.getRecordBlocks().size();
          long rows = 0;
          while (reader.loadNextBatch()) rows += reader.getVectorSchemaRoot().getRowCount();
          equal(100L * batches, rows);
          Map<String, String> meta = reader.getVectorSchemaRoot().getSchema().getCustomMetadata();
          equal("false", meta.get("closed"));
          equal(Long.toString(cut - complete), meta.get(CompleteBatches.CUT_BYTES));
          equal(Integer.toString(batches), meta.get(CompleteBatches.CUT_BATCHES));
          seen.add(batches);
        }
      }
      equal(Set.of(0, 1, 2, 3), seen);
    } finally {
      Files.delete(file);
    }
  }

  /** The length of a whole file's part before its end-of-stream marker: its last batch's end. */
  private static long lengthBeforeItsEnd(byte[] whole) throws Exception {
    Path file = Files.createTempFile("whole", ".arrows");
    try {
      Files.write(
          file, Arrays.copyOf(whole, whole.length - 1)); // no magic at its end: read as open
      return CompleteBatches.length(file, 0);
    } finally {
      Files.delete(file);
    }
  }

  /**
   * The WARN lines {@code logger} says while {@code body} runs (Spark's log4j2, which shows only
   * errors without a configuration).
   */
  static List<String> warnings(Class<?> logger, Callable<Void> body) throws Exception {
    LoggerContext context = (LoggerContext) LogManager.getContext(false);
    Configuration config = context.getConfiguration();
    List<String> lines = Collections.synchronizedList(new ArrayList<>());
    AbstractAppender capture =
        new AbstractAppender("capture", null, null, true, Property.EMPTY_ARRAY) {
          @Override
          public void append(LogEvent event) {
            lines.add(event.getMessage().getFormattedMessage());
          }
        };
    capture.start();
    LoggerConfig captured = new LoggerConfig(logger.getName(), Level.WARN, false);
    captured.addAppender(capture, Level.WARN, null);
    config.addLogger(logger.getName(), captured);
    context.updateLoggers();
    try {
      body.call();
    } finally {
      config.removeLogger(logger.getName());
      context.updateLoggers();
      capture.stop();
    }
    return new ArrayList<>(lines);
  }

  /**
   * An executor whose driver stops answering (it fails, then it hangs) keeps the rules it follows,
   * says so once, and follows the next version once the driver answers again.
   */
  public static void testAnExecutorKeepsItsRulesWhileTheDriverDoesNotAnswerAndSaysSoOnce()
      throws Exception {
    startLibrary("cp-rules-follower");
    try {
      AtomicInteger asked = new AtomicInteger();
      List<String> applied = Collections.synchronizedList(new ArrayList<>());
      Callable<Messages.RulesNow> driver =
          () -> {
            int n = asked.incrementAndGet();
            if (n == 1) return new Messages.RulesNow(1, "follow*=null");
            if (n <= 4) throw new IllegalStateException("the driver's endpoint is gone");
            if (n == 5) Thread.sleep(2 * RulesFollower.INTERVAL_MS); // an answer too late
            if (n <= 8) return null; // no answer
            return new Messages.RulesNow(2, "follow*=downsample:4");
          };
      List<String> said =
          warnings(
              RulesFollower.class,
              () -> {
                RulesFollower follower = new RulesFollower("7", driver, applied::add);
                try {
                  long deadline = System.nanoTime() + 20_000_000_000L;
                  while (asked.get() < 6 && System.nanoTime() < deadline) Thread.sleep(50);
                  equal(List.of("follow*=null"), new ArrayList<>(applied)); // kept while unanswered
                  check(
                      CloudProfiler.rules().contains("follow*=null"), () -> CloudProfiler.rules());
                  while (applied.size() < 2 && System.nanoTime() < deadline) Thread.sleep(50);
                } finally {
                  follower.stop();
                }
                return null;
              });
      equal(List.of("follow*=null", "follow*=downsample:4"), new ArrayList<>(applied));
      List<String> kept = said.stream().filter(l -> l.contains("keeps its rules")).toList();
      equal(1, kept.size()); // once, however long the driver does not answer
      check(
          kept.get(0).contains("executor 7 keeps its rules (version 1)")
              && kept.get(0).contains("the driver's endpoint is gone"),
          () -> kept.get(0));
    } finally {
      CloudProfiler.stop();
    }
  }

  /** Loads the JNI library and starts it with defaults, logging into a new temporary folder. */
  static void startLibrary(String prefix) throws IOException {
    loadNative();
    CloudProfiler.start(
        Files.createTempDirectory(prefix).toString(),
        CloudProfiler.COMPRESSION_NONE,
        0,
        0,
        CloudProfiler.FULL_BLOCK,
        CloudProfiler.TSC_ORDERED,
        -1);
  }

  static void loadNative() {
    String failure = NativeLoader.load(null);
    check(failure == null, () -> failure);
  }

  /**
   * A run to a registered responder answers; one to any other address or port is refused without a
   * probe.
   */
  public static void testTheProbeControlProbesOnlyRegisteredResponders() throws Exception {
    loadNative();
    byte[] secret = new byte[32];
    secret[0] = 7;
    long responder = CloudProfiler.responderStart("127.0.0.1", 0, secret);
    int port = CloudProfiler.responderPort(responder);
    try (ProbeControl control =
        new ProbeControl(secret, "127.0.0.1", (a, p) -> a.equals("127.0.0.1") && p == port)) {
      long[] run =
          ProbeControl.request("127.0.0.1", control.port(), secret, "127.0.0.1", port, 5, 500);
      check(run.length == 15 && run[2] != 0, () -> Arrays.toString(run));
      String[][] unregistered = {
        {"127.0.0.1", String.valueOf(port + 1)}, {"127.0.0.2", String.valueOf(port)}
      };
      for (String[] target : unregistered) {
        try {
          ProbeControl.request(
              "127.0.0.1", control.port(), secret, target[0], Integer.parseInt(target[1]), 5, 500);
          throw new AssertionError("probed " + String.join(":", target));
        } catch (ProbeControl.RunFailed e) {
          check(
              e.getMessage()
                  .contains(
                      target[0]
                          + ":"
                          + target[1]
                          + " is not a probe responder of this application"),
              e::getMessage);
        }
      }
    } finally {
      CloudProfiler.responderStop(responder);
    }
  }

  /**
   * The control listens on the address it was given only, and a flood of clients that connect and
   * say nothing or send garbage (more than a peer and all peers may keep waiting, more than the
   * workers and their queue) does not delay a run.
   */
  public static void testSilentAndGarbageClientsDoNotHoldTheProbeControlWhichListensOnOneAddress()
      throws Exception {
    loadNative();
    byte[] secret = TscDomain.newSecret();
    long responder = CloudProfiler.responderStart("127.0.0.1", 0, secret);
    int port = CloudProfiler.responderPort(responder);
    List<java.net.Socket> flood = new ArrayList<>();
    try (ProbeControl control = new ProbeControl(secret, "127.0.0.2", (a, p) -> p == port)) {
      try {
        new java.net.Socket("127.0.0.1", control.port()).close();
        throw new AssertionError("the control answers on 127.0.0.1 too");
      } catch (java.net.ConnectException refused) {
        // listening on 127.0.0.2 only
      }
      for (int i = 0; i < ProbeControl.PENDING + 44; i++) {
        java.net.Socket s = new java.net.Socket("127.0.0.2", control.port());
        if (i % 2 == 1) s.getOutputStream().write("\u0000garbage\nmore\n".getBytes());
        flood.add(s);
      }
      long t0 = System.nanoTime();
      long[] run =
          ProbeControl.request("127.0.0.2", control.port(), secret, "127.0.0.1", port, 5, 500);
      long ms = (System.nanoTime() - t0) / 1_000_000;
      check(
          run.length == 15 && ms < ProbeControl.REQUEST_TIMEOUT_MS / 2,
          () -> ms + " ms, " + Arrays.toString(run));
    } finally {
      for (java.net.Socket s : flood) s.close();
      CloudProfiler.responderStop(responder);
    }
  }

  /**
   * Only requests made with the application's secret run: the old token (a hash of the application
   * id), another secret's mac and a request seen on the network sent again are refused; a reply is
   * taken only when made with the secret.
   */
  public static void testTheProbeControlRunsOnlyRequestsMadeWithTheApplicationsSecret()
      throws Exception {
    loadNative();
    byte[] secret = TscDomain.newSecret(), other = TscDomain.newSecret();
    check(!Arrays.equals(secret, other), () -> "two secrets alike");
    long responder = CloudProfiler.responderStart("127.0.0.1", 0, secret);
    int port = CloudProfiler.responderPort(responder);
    String oldToken =
        HexFormat.of()
            .formatHex(
                java.security.MessageDigest.getInstance("SHA-256")
                    .digest("cloudprofiler:app-20260101000000-0000".getBytes()));
    try (ProbeControl control = new ProbeControl(secret, "127.0.0.1", (a, p) -> p == port)) {
      java.util.function.Function<String, String> exchange =
          line -> {
            try (java.net.Socket s = new java.net.Socket("127.0.0.1", control.port())) {
              s.getOutputStream().write((line + "\n").getBytes());
              return new java.io.BufferedReader(new java.io.InputStreamReader(s.getInputStream()))
                  .readLine();
            } catch (IOException e) {
              throw new java.io.UncheckedIOException(e);
            }
          };
      String body = "PROBE 7 127.0.0.1 " + port + " 5 500";
      String request = body + " " + ProbeControl.mac(secret, body); // as the network sees it
      String good = exchange.apply(request);
      check(good.startsWith("OK "), () -> good);
      String replayed = exchange.apply(request);
      check(replayed.startsWith("ERR request 7 is not after request 7"), () -> replayed);
      String[] refused = {
        exchange.apply("PROBE " + oldToken + " 127.0.0.1 " + port + " 5 500"),
        exchange.apply(
            "PROBE 8 127.0.0.1 " + port + " 5 500 " + ProbeControl.mac(other, "PROBE 8 127.0.0.1")),
        exchange.apply("PROBE 9 127.0.0.1 " + port + " 5 500 " + ProbeControl.mac(other, body))
      };
      for (String reply : refused) check(reply.startsWith("ERR expected PROBE"), () -> reply);
      try {
        ProbeControl.request("127.0.0.1", control.port(), other, "127.0.0.1", port, 5, 500);
        throw new AssertionError("a run for another secret");
      } catch (ProbeControl.RunFailed e) {
        throw new AssertionError("a reply taken without this secret: " + e.getMessage());
      } catch (IOException e) {
        check(e.getMessage().contains("not made with this application's secret"), e::getMessage);
      }
    } finally {
      CloudProfiler.responderStop(responder);
    }
  }

  /**
   * Records of tasks that start or end before the channels open reach them when they open; after an
   * abandon, none is kept.
   */
  public static void testTaskRecordsWaitForTheirChannels() throws Exception {
    startLibrary("cp-task-records");
    try {
      TaskRecords tasks = new TaskRecords();
      equal(0, tasks.channels().length);
      tasks.startAt(1, CloudProfiler.tsc());
      tasks.start(2);
      tasks.end(1);
      long start =
          CloudProfiler.openChannel(
              "t.start", "buffered", new long[0], new String[0], new String[0]);
      long end =
          CloudProfiler.openChannel("t.end", "buffered", new long[0], new String[0], new String[0]);
      tasks.open(start, end);
      tasks.end(2);
      equal(2L, CloudProfiler.stats(start)[0]);
      equal(2L, CloudProfiler.stats(end)[0]);
      equal(0L, tasks.abandon());
      TaskRecords never = new TaskRecords();
      never.start(3);
      never.end(3);
      equal(2L, never.abandon());
      never.start(4);
      equal(3L, never.abandon());
    } finally {
      CloudProfiler.stop();
    }
  }

  public static void main(String[] args) throws Exception {
    List<String> failed = new ArrayList<>();
    for (Method m : JvmTests.class.getDeclaredMethods()) {
      if (!m.getName().startsWith("test") || !Modifier.isPublic(m.getModifiers())) continue;
      try {
        m.invoke(null);
        System.out.println("ok " + m.getName());
      } catch (java.lang.reflect.InvocationTargetException e) {
        failed.add(m.getName());
        System.out.println("FAILED " + m.getName() + ": " + e.getCause());
      }
    }
    System.out.println(failed.size() + " failed");
    System.exit(failed.isEmpty() ? 0 : 1);
  }
}
