package io.cloudprofiler.spark;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.CloudProfilerException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.function.Function;
import org.apache.spark.SparkConf;

/**
 * Every spark.cloudprofiler.* option, declared once: name, default, doc and the values it takes.
 * {@link #read} turns a configuration into typed {@link Options}, checked once, with messages that
 * name the key and the value. {@link #main} writes the table as JSON, which jvm-plugin/build.sh
 * puts into the jar for the Python helper (cloudprofiler.spark), so that neither side copies the
 * other.
 */
public final class Config {
  /**
   * One option; {@code parse} returns its typed value, or null when the text is not one of {@code
   * expected}.
   */
  public static final class Key<T> {
    public final String name;

    /**
     * As the README shows it: {@code <tmp>} stands for the temporary folder of the process that
     * reads it, {@code <user>} for the name of the user it runs as.
     */
    public final String defaultValue;

    public final String doc;

    /** What the value may be, in words: "true or false", "an integer from 2 to 65536". */
    public final String expected;

    /**
     * What the value is, for checks made outside the JVM (the Python helper): "text" (anything),
     * "choice" (one of {@code choices}), "integer" (from {@code min} to {@code max}, null: no
     * bound, or one of {@code choices}), "integers" (comma-separated) or "handler" (a handler of
     * the native library).
     */
    public final String kind;

    /** The range of an integer option, else null. */
    public final Integer min, max;

    /** The values a choice takes; for an integer, the values it takes outside its range. */
    public final List<String> choices;

    private final Function<String, T> parse;

    private Key(
        String name,
        String defaultValue,
        String doc,
        String expected,
        Function<String, T> parse,
        String kind,
        Integer min,
        Integer max,
        List<String> choices) {
      this.name = name;
      this.defaultValue = defaultValue;
      this.doc = doc;
      this.expected = expected;
      this.parse = parse;
      this.kind = kind;
      this.min = min;
      this.max = max;
      this.choices = choices;
    }

    /** The value in effect: the configured one, else the default. */
    public String text(SparkConf conf) {
      String fallback =
          defaultValue
              .replace(TMP, System.getProperty("java.io.tmpdir"))
              .replace(USER, System.getProperty("user.name"));
      return conf.get(name, fallback).trim();
    }

    public T read(SparkConf conf) {
      String value = text(conf);
      T parsed = parse(value);
      if (parsed == null) throw invalid(name, value, "expected " + expected);
      return parsed;
    }

    /** The typed value of {@code text}, or null when it is not one of {@code expected}. */
    public T parse(String text) {
      return parse.apply(text);
    }
  }

  /** In a default: the temporary folder of the process that reads it. */
  static final String TMP = "<tmp>";

  /** In a default: the name of the user the process that reads it runs as. */
  static final String USER = "<user>";

  static Key<String> text(String name, String defaultValue, String doc) {
    return new Key<>(name, defaultValue, doc, "any text", v -> v, "text", null, null, List.of());
  }

  static Key<Boolean> bool(String name, String defaultValue, String doc) {
    return new Key<>(
        name,
        defaultValue,
        doc,
        "true or false",
        v -> v.equals("true") ? Boolean.TRUE : v.equals("false") ? Boolean.FALSE : null,
        "choice",
        null,
        null,
        List.of("true", "false"));
  }

  static Key<Integer> integer(String name, int defaultValue, int min, int max, String doc) {
    return new Key<>(
        name,
        String.valueOf(defaultValue),
        doc,
        "an integer from " + min + " to " + max,
        v -> {
          try {
            int n = Integer.parseInt(v);
            return n >= min && n <= max ? n : null;
          } catch (NumberFormatException e) {
            return null;
          }
        },
        "integer",
        min,
        max,
        List.of());
  }

  /** One of the constants of {@code type}, written in lower case. */
  static <E extends Enum<E>> Key<E> choice(String name, E defaultValue, Class<E> type, String doc) {
    List<String> names = new ArrayList<>();
    for (E e : type.getEnumConstants()) names.add(e.name().toLowerCase(Locale.ROOT));
    return new Key<>(
        name,
        defaultValue.name().toLowerCase(Locale.ROOT),
        doc,
        String.join(" or ", names),
        v -> {
          int i = names.indexOf(v);
          return i < 0 ? null : type.getEnumConstants()[i];
        },
        "choice",
        null,
        null,
        List.copyOf(names));
  }

  static Key<long[]> integers(String name, String doc) {
    return new Key<>(
        name,
        "",
        doc,
        "comma-separated integers",
        Config::parseLongs,
        "integers",
        null,
        null,
        List.of());
  }

  public enum Compression {
    NONE,
    ZSTD
  }

  public enum TscRead {
    ORDERED,
    UNORDERED
  }

  public static final Key<String> LOG_DIR =
      text(
          "spark.cloudprofiler.logDir",
          TMP + "/cloudprofiler-logs-" + USER,
          "Folder (any Hadoop-compatible URI) that collects every executor's logs, one subfolder"
              + " per application (by default this user's own: users who share a host never share"
              + " it)");

  /**
   * The folder of application {@code appId} in {@code logDir}, {@code <logDir>/<app id>}, where its
   * tables and its executors' folders lie (logDir's trailing slashes dropped: an object store would
   * take "a//b" for another key than "a/b"); the Python side's is cloudprofiler.tables.app_folder.
   */
  public static String appFolder(String logDir, String appId) {
    return logDir.replaceAll("/+$", "") + "/" + appId;
  }

  public static final Key<String> LOCAL_DIR =
      text(
          "spark.cloudprofiler.localDir",
          TMP + "/cloudprofiler-local-" + USER,
          "Executor-local folder the native library writes to before collection (this user's"
              + " own: made 0700, another user's is refused)");
  public static final Key<Boolean> TASK_ENABLED =
      bool(
          "spark.cloudprofiler.task.enabled",
          "true",
          "Log a TSC record at the start and at the end of every task attempt");
  public static final Key<Boolean> OPERATORS =
      bool(
          "spark.cloudprofiler.operators",
          "false",
          "Time every operator of every SQL query inside whole-stage code generation: rows, and the"
              + " time of each operator with and without its children, from a sample of the gaps"
              + " between rows (read per query from the session's configuration)");
  public static final Key<Integer> OPERATOR_ROWS_X =
      integer(
          "spark.cloudprofiler.operators.rows.x",
          1,
          0,
          1 << 30,
          "With operators on: the latency of a row from operator to operator along the operators"
              + " that keep a row's identity is logged for the rows whose id mod"
              + " spark.cloudprofiler.operators.rows.y is below this (XoY, as cp_trace samples;"
              + " 0: none; read per query)");
  public static final Key<Integer> OPERATOR_ROWS_Y =
      integer(
          "spark.cloudprofiler.operators.rows.y",
          1024,
          1,
          1 << 30,
          "The y of spark.cloudprofiler.operators.rows.x: x rows in every y get their latency"
              + " logged from operator to operator (a power of two costs no division per row)");
  public static final Key<Integer> OPERATOR_ROW_CHANNELS =
      integer(
          "spark.cloudprofiler.operators.rows.channels",
          256,
          1,
          1 << 16,
          "The sampled rows' channels (one per operator of a run of a query, each a file"
              + " descriptor) a JVM keeps open at most: past it a new operator's channel takes the"
              + " place of the one no task has used for longest (a second at least), which closes;"
              + " with none such its rows are not logged. Read when the JVM first logs a row");
  public static final Key<Integer> OPERATOR_ROWS_IDLE =
      integer(
          "spark.cloudprofiler.operators.rows.idleSeconds",
          60,
          1,
          86_400,
          "A sampled rows' channel that no task of its JVM has used for this many seconds closes at"
              + " the executor's next collection (its records in its file, which ends; a later task"
              + " of its operator opens it again, in a file of its own), so that the channels of"
              + " queries that ended give back their file descriptors and buffers. Read when the"
              + " JVM first logs a row");
  public static final Key<Boolean> UI_ENABLED =
      bool(
          "spark.cloudprofiler.ui.enabled",
          "true",
          "The Cloudprofiler tab in the Spark UI and its Prometheus page, the driver's totals in"
              + " Spark's metrics system, the tab's figures in the event log for the History"
              + " Server, and the executors' counters sent for them at each collection interval");
  public static final Key<Boolean> PYTHON_HANDOFF =
      bool(
          "spark.cloudprofiler.python.handoff",
          "true",
          "Python workers' trace points log into their executor's buffers through shared memory"
              + " (false: each worker that logs starts a library with files of its own)");
  public static final Key<Boolean> UDFS =
      bool(
          "spark.cloudprofiler.udfs",
          "false",
          "Python workers time every batch of the Python UDFs they run (waiting for the JVM,"
              + " reading, the function, serializing back): needs"
              + " spark.python.daemon.module=cloudprofiler_udfs (workers started without the"
              + " daemon: spark.python.worker.module=cloudprofiler_udfs.worker), which the Python"
              + " helper sets unless the application set PySpark's daemon or worker module");

  /**
   * PySpark's daemon whose workers time every Python UDF batch ({@link #UDFS}), and PySpark's
   * worker that does where the JVM starts workers without the daemon ({@link #USE_DAEMON_KEY}
   * false): a Python package shipped with the cloudprofiler Python package.
   */
  public static final String UDF_DAEMON_MODULE = "cloudprofiler_udfs",
      UDF_WORKER_MODULE = "cloudprofiler_udfs.worker";

  /** PySpark's settings of the Python daemon and worker modules, and of the daemon's use. */
  public static final String DAEMON_MODULE_KEY = "spark.python.daemon.module",
      WORKER_MODULE_KEY = "spark.python.worker.module",
      USE_DAEMON_KEY = "spark.python.use.daemon";

  public static final Key<String> TASK_HANDLER =
      new Key<>(
          "spark.cloudprofiler.task.handler",
          "buffered",
          "Handler of the task channels",
          "a handler of the native library, checked with its parameters",
          v -> v,
          "handler",
          null,
          null,
          List.of());
  public static final Key<long[]> TASK_PARAMS =
      integers(
          "spark.cloudprofiler.task.params",
          "Comma-separated integer parameters of the task handler");
  public static final Key<Compression> COMPRESSION =
      choice(
          "spark.cloudprofiler.compression",
          Compression.NONE,
          Compression.class,
          "Arrow body compression of the log files");
  public static final Key<TscRead> TSC_READ =
      choice(
          "spark.cloudprofiler.tsc.read",
          TscRead.ORDERED,
          TscRead.class,
          "How records read the TSC: ordered (lfence; rdtsc) or unordered (rdtsc: about half the"
              + " cost, may read up to the CPU's out-of-order window early)");
  public static final Key<Integer> CHANNEL_BLOCKS =
      integer(
          "spark.cloudprofiler.channelBlocks",
          16,
          2,
          65536,
          "Blocks of 65,536 records (1 MiB) one channel may hold: its memory bound");

  /**
   * The native library's own range (cp_options.roll_bytes: CP_ROLL_BYTES_MIN,
   * CP_ROLL_BYTES_DEFAULT).
   */
  public static final Key<Long> ROLL_BYTES =
      new Key<>(
          "spark.cloudprofiler.roll.bytes",
          String.valueOf(64L << 20),
          "A channel's file rolls into a new segment (the next file of the channel) once it has"
              + " passed this many bytes, so that collection copies a closed segment once and"
              + " re-copies only the newest (0: never)",
          "0 (never) or a number of bytes from 65536",
          v -> {
            try {
              long n = Long.parseLong(v);
              return n == 0 || n >= 65536 ? n : null;
            } catch (NumberFormatException e) {
              return null;
            }
          },
          "integer",
          65536,
          null,
          List.of("0"));

  public static final Key<Integer> COLLECT_INTERVAL =
      integer(
          "spark.cloudprofiler.collect.intervalSeconds",
          15,
          0,
          86400,
          "Copy what changed in executor logs to logDir, and publish the driver's task table, every"
              + " this many seconds (0: only at shutdown)");
  public static final Key<Boolean> CALIBRATION_ENABLED =
      bool(
          "spark.cloudprofiler.calibration.enabled",
          "true",
          "Relate executor hosts' TSCs to the driver's and to each other's with MinRTT probe rounds"
              + " in both directions");
  public static final Key<Boolean> CALIBRATION_FORCE =
      bool(
          "spark.cloudprofiler.calibration.force",
          "false",
          "Calibrate even where the CPU does not report an invariant TSC (its durations may then be"
              + " wrong)");
  public static final Key<Integer> CALIBRATION_INTERVAL =
      integer(
          "spark.cloudprofiler.calibration.interval",
          60,
          1,
          86400,
          "Seconds between calibration rounds (also one when a host registers and one after each"
              + " job)");
  public static final Key<Integer> CALIBRATION_PROBES =
      integer(
          "spark.cloudprofiler.calibration.probes",
          100,
          1,
          10000,
          "Probes per direction, pair of hosts and round");
  public static final Key<Integer> CALIBRATION_TIMEOUT =
      integer(
          "spark.cloudprofiler.calibration.timeoutMs",
          100,
          1,
          10000,
          "Wait for each probe's answer, in milliseconds (an unreachable host costs two of them per"
              + " round)");
  public static final Key<Integer> CALIBRATION_PEERS =
      integer(
          "spark.cloudprofiler.calibration.peers",
          8,
          0,
          1000,
          "Host-to-host calibrations per executor host: every pair of hosts when there are at most"
              + " peers + 1, else this many partners each (0: hosts are calibrated against the"
              + " driver only)");
  public static final Key<String> NATIVE_PATH =
      text(
          "spark.cloudprofiler.native.path",
          "",
          "Path of libcloudprofiler_jni.so to load before the one in the jar, SparkFiles and"
              + " java.library.path");

  public static final Key<String> RULES =
      text(
          "spark.cloudprofiler.rules",
          "",
          "Rules that choose the handler of each trace channel whose channel.<name>.handler is"
              + " unset: pattern=handler[:param...], separated by new lines or ';', the first match"
              + " wins (buffered where none does)");
  public static final Key<String> RULES_FILE =
      text(
          "spark.cloudprofiler.rules.file",
          "",
          "A rules file in JSON (any Hadoop-compatible URI), read by the driver at start: its rules"
              + " follow those of spark.cloudprofiler.rules");

  public static final List<Key<?>> ALL =
      List.of(
          LOG_DIR,
          LOCAL_DIR,
          TASK_ENABLED,
          OPERATORS,
          OPERATOR_ROWS_X,
          OPERATOR_ROWS_Y,
          OPERATOR_ROW_CHANNELS,
          OPERATOR_ROWS_IDLE,
          UDFS,
          UI_ENABLED,
          PYTHON_HANDOFF,
          TASK_HANDLER,
          TASK_PARAMS,
          RULES,
          RULES_FILE,
          COMPRESSION,
          TSC_READ,
          CHANNEL_BLOCKS,
          ROLL_BYTES,
          COLLECT_INTERVAL,
          CALIBRATION_ENABLED,
          CALIBRATION_FORCE,
          CALIBRATION_INTERVAL,
          CALIBRATION_PROBES,
          CALIBRATION_TIMEOUT,
          CALIBRATION_PEERS,
          NATIVE_PATH);

  private static final String PREFIX = "spark.cloudprofiler.";
  private static final String CHANNEL_PREFIX = PREFIX + "channel.";
  private static final String HANDLER_SUFFIX = ".handler";
  private static final String PARAMS_SUFFIX = ".params";

  /**
   * Under localDir: the folder where each executor names its own folder for its Python workers, in
   * a file named after its process id ({@code <localDir>/executors/<pid>}).
   */
  public static final String EXECUTOR_FOLDERS = "executors";

  /** Beside an executor's name of its folder: the rules it follows, for its Python workers. */
  public static final String RULES_FILE_SUFFIX = ".rules";

  /**
   * Beside an executor's name of its folder: the folder of its inbox, where its Python workers open
   * hand-off channels.
   */
  public static final String INBOX_SUFFIX = ".inbox";

  private Config() {}

  public static IllegalArgumentException invalid(String key, String value, String why) {
    return new IllegalArgumentException(key + "=" + value + " is invalid: " + why);
  }

  /** Comma-separated integers (none for an empty text); null when a part is no integer. */
  static long[] parseLongs(String v) {
    List<Long> out = new ArrayList<>();
    try {
      for (String part : v.split(","))
        if (!part.trim().isEmpty()) out.add(Long.parseLong(part.trim()));
    } catch (NumberFormatException e) {
      return null;
    }
    return out.stream().mapToLong(Long::longValue).toArray();
  }

  /**
   * Rules as the native library takes them, one a line: {@code text} with its ';' separators made
   * new lines.
   */
  public static String rulesText(String text) {
    return text.replace(';', '\n');
  }

  /** A channel's handler and its parameters. */
  public record Handler(String name, long[] params) {}

  /** A handler as configured: the keys that set it and the text of its parameters, for messages. */
  public record HandlerOption(
      String handlerKey, String paramsKey, String paramsText, Handler handler) {
    /**
     * The native library's own check of the handler and its parameters (their number and ranges),
     * the one {@link CloudProfiler#openChannel} makes; throws naming the key at fault. The library
     * must be loaded.
     */
    public void check() {
      int number;
      try {
        number = CloudProfiler.handlerFromName(handler.name());
      } catch (CloudProfilerException e) {
        throw invalid(handlerKey, handler.name(), e.getMessage());
      }
      try {
        CloudProfiler.checkHandler(number, handler.params());
      } catch (CloudProfilerException e) {
        throw invalid(paramsKey, paramsText, e.getMessage());
      }
    }
  }

  /**
   * The handler configured for trace channel {@code channel} ({@code
   * spark.cloudprofiler.channel.<name>.handler} and {@code .params}), or null when none is; throws
   * naming the key and the bad value.
   */
  public static HandlerOption channelHandler(SparkConf conf, String channel) {
    String handlerKey = CHANNEL_PREFIX + channel + HANDLER_SUFFIX;
    String paramsKey = CHANNEL_PREFIX + channel + PARAMS_SUFFIX;
    if (!conf.contains(handlerKey)) {
      if (conf.contains(paramsKey))
        throw invalid(paramsKey, conf.get(paramsKey), handlerKey + " is not set");
      return null;
    }
    Key<long[]> params = integers(paramsKey, "");
    return new HandlerOption(
        handlerKey,
        paramsKey,
        params.text(conf),
        new Handler(conf.get(handlerKey).trim(), params.read(conf)));
  }

  /**
   * The trace channels' handlers; throws for a spark.cloudprofiler.* key that is no option (a
   * misspelt option would otherwise be ignored without a word).
   */
  private static List<HandlerOption> channelHandlers(SparkConf conf) {
    List<HandlerOption> out = new ArrayList<>();
    List<String> names = ALL.stream().map(k -> k.name).toList();
    for (scala.Tuple2<String, String> entry : conf.getAllWithPrefix(PREFIX)) {
      String key = PREFIX + entry._1();
      if (names.contains(key)) continue;
      String suffix =
          key.endsWith(HANDLER_SUFFIX)
              ? HANDLER_SUFFIX
              : key.endsWith(PARAMS_SUFFIX) ? PARAMS_SUFFIX : "";
      if (key.startsWith(CHANNEL_PREFIX)
          && !suffix.isEmpty()
          && key.length() > CHANNEL_PREFIX.length() + suffix.length()) {
        String channel = key.substring(CHANNEL_PREFIX.length(), key.length() - suffix.length());
        HandlerOption handler = channelHandler(conf, channel);
        if (suffix.equals(HANDLER_SUFFIX)) out.add(handler);
        continue;
      }
      String near = names.stream().filter(k -> k.equalsIgnoreCase(key)).findFirst().orElse(null);
      throw new IllegalArgumentException(
          key
              + " is not an option of cloudprofiler"
              + (near != null
                  ? ": did you mean " + near + "?"
                  : ": expected one of "
                      + String.join(", ", names)
                      + ", or "
                      + CHANNEL_PREFIX
                      + "<name>"
                      + HANDLER_SUFFIX
                      + " / "
                      + PARAMS_SUFFIX));
    }
    return out;
  }

  /**
   * The table as JSON: every option (key, default, what it takes, doc), the trace channels' keys
   * and the executors' folder names, for the Python helper.
   */
  static String json() {
    StringBuilder out = new StringBuilder("{\"options\": [");
    for (Key<?> key : ALL) {
      out.append(key == ALL.get(0) ? "\n  " : ",\n  ")
          .append("{\"key\": ")
          .append(quote(key.name))
          .append(", \"default\": ")
          .append(quote(key.defaultValue))
          .append(", \"expected\": ")
          .append(quote(key.expected))
          .append(", \"kind\": ")
          .append(quote(key.kind))
          .append(", \"choices\": [")
          .append(String.join(", ", key.choices.stream().map(Config::quote).toList()))
          .append("], \"min\": ")
          .append(key.min)
          .append(", \"max\": ")
          .append(key.max)
          .append(", \"doc\": ")
          .append(quote(key.doc))
          .append('}');
    }
    return out.append("\n],\n\"tmp\": ")
        .append(quote(TMP))
        .append(",\n\"user\": ")
        .append(quote(USER))
        .append(",\n\"channel_handler\": ")
        .append(quote(CHANNEL_PREFIX + "<name>" + HANDLER_SUFFIX))
        .append(",\n\"channel_params\": ")
        .append(quote(CHANNEL_PREFIX + "<name>" + PARAMS_SUFFIX))
        .append(",\n\"executor_folders\": ")
        .append(quote(EXECUTOR_FOLDERS))
        .append(",\n\"rules_file_suffix\": ")
        .append(quote(RULES_FILE_SUFFIX))
        .append(",\n\"inbox_suffix\": ")
        .append(quote(INBOX_SUFFIX))
        .append(",\n\"udf_daemon_module\": ")
        .append(quote(UDF_DAEMON_MODULE))
        .append(",\n\"udf_worker_module\": ")
        .append(quote(UDF_WORKER_MODULE))
        .append(",\n\"python_module_keys\": [")
        .append(quote(DAEMON_MODULE_KEY))
        .append(", ")
        .append(quote(WORKER_MODULE_KEY))
        .append("]")
        .append("\n}\n")
        .toString();
  }

  /** {@code text} as a JSON string. */
  static String quote(String text) {
    StringBuilder out = new StringBuilder("\"");
    for (char c : text.toCharArray()) {
      if (c == '"' || c == '\\') out.append('\\').append(c);
      else if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
      else out.append(c);
    }
    return out.append('"').toString();
  }

  /**
   * Writes {@link #json} to the file named by the argument (jvm-plugin/build.sh, at build time).
   */
  public static void main(String[] args) throws IOException {
    Files.writeString(Path.of(args[0]), json());
  }

  /**
   * Every option of {@code conf}, checked and typed (defaults filled in); throws naming the key and
   * the bad value. Handler parameters are checked by {@link HandlerOption#check}, which needs the
   * native library.
   */
  public static Options read(SparkConf conf) {
    List<HandlerOption> channels = channelHandlers(conf);
    HandlerOption task =
        new HandlerOption(
            TASK_HANDLER.name,
            TASK_PARAMS.name,
            TASK_PARAMS.text(conf),
            new Handler(TASK_HANDLER.read(conf), TASK_PARAMS.read(conf)));
    return new Options(
        LOG_DIR.read(conf),
        LOCAL_DIR.read(conf),
        TASK_ENABLED.read(conf),
        UI_ENABLED.read(conf),
        PYTHON_HANDOFF.read(conf),
        task,
        channels,
        rulesText(RULES.read(conf)),
        COMPRESSION.read(conf),
        TSC_READ.read(conf),
        CHANNEL_BLOCKS.read(conf),
        ROLL_BYTES.read(conf),
        COLLECT_INTERVAL.read(conf),
        CALIBRATION_ENABLED.read(conf),
        CALIBRATION_FORCE.read(conf),
        CALIBRATION_INTERVAL.read(conf),
        CALIBRATION_PROBES.read(conf),
        CALIBRATION_TIMEOUT.read(conf),
        CALIBRATION_PEERS.read(conf),
        NATIVE_PATH.read(conf));
  }
}
