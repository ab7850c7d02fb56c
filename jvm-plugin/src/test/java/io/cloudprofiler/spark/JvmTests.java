package io.cloudprofiler.spark;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.NativeLoader;
import io.cloudprofiler.spark.analysis.AnalysisTests;
import io.cloudprofiler.spark.calibration.CalibrationTests;
import io.cloudprofiler.spark.executor.ExecutorTests;
import io.cloudprofiler.spark.rules.RulesTests;
import io.cloudprofiler.spark.sql.SqlTests;
import io.cloudprofiler.spark.tables.TablesTests;
import io.cloudprofiler.spark.ui.UiTests;
import java.io.IOException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.function.Supplier;
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
 * Tests of the plugin's JVM functions, each a public static method named test* of this class (the
 * options, the messages, the guard) or of a room's own tests ({@link #ROOMS}, beside the classes
 * they test); main runs them all, prints one line each and exits 1 if any failed
 * (tests/test_java.py compiles and runs this with the plugin jar and Spark's jars). The probe
 * control and the task records run on the real native library (loaded from the jar) and real
 * sockets. The checks that every room's tests use are here.
 */
public final class JvmTests {
  private JvmTests() {}

  public static void check(boolean condition, Supplier<String> what) {
    if (!condition) throw new AssertionError(what.get());
  }

  public static void equal(Object expected, Object actual) {
    check(expected.equals(actual), () -> "expected " + expected + ", got " + actual);
  }

  public static String thrown(Runnable action) {
    try {
      action.run();
    } catch (RuntimeException e) {
      return e.getMessage();
    }
    throw new AssertionError("nothing thrown");
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
    equal(
        System.getProperty("java.io.tmpdir")
            + "/cloudprofiler-local-"
            + System.getProperty("user.name"),
        o.localDir());
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
                "differs from boot; founds a domain",
                2.5e9,
                "null"),
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
   * The WARN lines {@code logger} says while {@code body} runs (Spark's log4j2, which shows only
   * errors without a configuration).
   */
  public static List<String> warnings(Class<?> logger, Callable<Void> body) throws Exception {
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
   * Loads the JNI library and starts it with defaults, logging into a new temporary folder named
   * from {@code prefix}, which it returns.
   */
  public static Path startLibrary(String prefix) throws IOException {
    loadNative();
    Path folder = Files.createTempDirectory(prefix);
    CloudProfiler.start(
        folder.toString(),
        CloudProfiler.COMPRESSION_NONE,
        0,
        0,
        CloudProfiler.FULL_BLOCK,
        CloudProfiler.TSC_ORDERED,
        -1);
    return folder;
  }

  public static void loadNative() {
    String failure = NativeLoader.load(null);
    check(failure == null, () -> failure);
  }

  /** The test classes of the rooms, each beside the classes it tests. */
  static final List<Class<?>> ROOMS =
      List.of(
          JvmTests.class,
          AnalysisTests.class,
          CalibrationTests.class,
          ExecutorTests.class,
          RulesTests.class,
          SqlTests.class,
          TablesTests.class,
          UiTests.class);

  public static void main(String[] args) throws Exception {
    List<String> failed = new ArrayList<>();
    for (Class<?> room : ROOMS)
      for (Method m : room.getDeclaredMethods()) {
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
