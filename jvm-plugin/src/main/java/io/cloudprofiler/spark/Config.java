package io.cloudprofiler.spark;

import java.io.File;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.apache.spark.SparkConf;

/** Every spark.cloudprofiler.* option: name, default, doc and validation, declared once. */
public final class Config {
  /** One option; {@code check} returns null when the value is valid, else what was expected. */
  public static final class Key {
    public final String name;
    public final String defaultValue;
    public final String doc;
    final Function<String, String> check;

    Key(String name, String defaultValue, String doc, Function<String, String> check) {
      this.name = name;
      this.defaultValue = defaultValue;
      this.doc = doc;
      this.check = check;
    }
  }

  /** Handlers the task channels may use and how many parameters each takes (native/include/cloudprofiler.h). */
  static final Map<String, Integer> HANDLERS = new LinkedHashMap<>();

  static {
    HANDLERS.put("null", 0);
    HANDLERS.put("identity", 0);
    HANDLERS.put("buffered", 0);
    HANDLERS.put("spc", 1);
    HANDLERS.put("mpc", 1);
    HANDLERS.put("downsample", 1);
    HANDLERS.put("xoy", 2);
    HANDLERS.put("firstlast", 0);
  }

  static String tmp(String leaf) {
    return new File(System.getProperty("java.io.tmpdir"), leaf).getPath();
  }

  public static final Key LOG_DIR = new Key("spark.cloudprofiler.logDir", tmp("cloudprofiler-logs"),
      "Folder (any Hadoop-compatible URI) that collects every executor's logs, one subfolder per application", v -> null);
  public static final Key LOCAL_DIR = new Key("spark.cloudprofiler.localDir", tmp("cloudprofiler-local"),
      "Executor-local folder the native library writes to before collection", v -> null);
  public static final Key TASK_ENABLED = new Key("spark.cloudprofiler.task.enabled", "true",
      "Log a TSC record at the start and at the end of every task attempt", Config::checkBoolean);
  public static final Key TASK_HANDLER = new Key("spark.cloudprofiler.task.handler", "buffered",
      "Handler of the task channels: " + String.join(", ", HANDLERS.keySet()), v -> null); // checked with params
  public static final Key TASK_PARAMS = new Key("spark.cloudprofiler.task.params", "",
      "Comma-separated integer parameters of the task handler", v -> null); // checked with the handler, by read()
  public static final Key COMPRESSION = new Key("spark.cloudprofiler.compression", "none",
      "Arrow body compression of the log files: none or zstd",
      v -> v.equals("none") || v.equals("zstd") ? null : "none or zstd");
  public static final Key TSC_READ = new Key("spark.cloudprofiler.tsc.read", "ordered",
      "How records read the TSC: ordered (lfence; rdtsc) or unordered (rdtsc: about half the cost, may read up to "
          + "the CPU's out-of-order window early)",
      v -> v.equals("ordered") || v.equals("unordered") ? null : "ordered or unordered");
  public static final Key CHANNEL_BLOCKS = new Key("spark.cloudprofiler.channelBlocks", "16",
      "Blocks of 65,536 records (1 MiB) one channel may hold: its memory bound",
      v -> checkInt(v, 2, 65536));
  public static final Key COLLECT_INTERVAL = new Key("spark.cloudprofiler.collect.intervalSeconds", "0",
      "Copy executor logs to logDir every this many seconds (0: only at executor shutdown)",
      v -> checkInt(v, 0, 86400));
  public static final Key CALIBRATION_ENABLED = new Key("spark.cloudprofiler.calibration.enabled", "true",
      "Relate executor hosts' TSCs to the driver's and to each other's with MinRTT probe rounds in both directions", Config::checkBoolean);
  public static final Key CALIBRATION_FORCE = new Key("spark.cloudprofiler.calibration.force", "false",
      "Calibrate even where the CPU does not report an invariant TSC (its durations may then be wrong)",
      Config::checkBoolean);
  public static final Key CALIBRATION_INTERVAL = new Key("spark.cloudprofiler.calibration.interval", "60",
      "Seconds between calibration rounds (also one when a host registers and one after each job)",
      v -> checkInt(v, 1, 86400));
  public static final Key CALIBRATION_PROBES = new Key("spark.cloudprofiler.calibration.probes", "100",
      "Probes per direction, pair of hosts and round", v -> checkInt(v, 1, 10000));
  public static final Key CALIBRATION_TIMEOUT = new Key("spark.cloudprofiler.calibration.timeoutMs", "100",
      "Wait for each probe's answer, in milliseconds (an unreachable host costs two of them per round)",
      v -> checkInt(v, 1, 10000));
  public static final Key CALIBRATION_PEERS = new Key("spark.cloudprofiler.calibration.peers", "8",
      "Host-to-host calibrations per executor host: every pair of hosts when there are at most peers + 1, else "
          + "this many partners each (0: hosts are calibrated against the driver only)",
      v -> checkInt(v, 0, 1000));
  public static final Key NATIVE_PATH = new Key("spark.cloudprofiler.native.path", "",
      "Path of libcloudprofiler_jni.so to load before the one in the jar, SparkFiles and java.library.path", v -> null);

  public static final List<Key> ALL = List.of(LOG_DIR, LOCAL_DIR, TASK_ENABLED, TASK_HANDLER, TASK_PARAMS,
      COMPRESSION, TSC_READ, CHANNEL_BLOCKS, COLLECT_INTERVAL, CALIBRATION_ENABLED, CALIBRATION_FORCE, CALIBRATION_INTERVAL, CALIBRATION_PROBES,
      CALIBRATION_TIMEOUT, CALIBRATION_PEERS, NATIVE_PATH);

  private Config() {}

  static String checkBoolean(String v) {
    return v.equals("true") || v.equals("false") ? null : "true or false";
  }

  static String checkInt(String v, int min, int max) {
    try {
      int n = Integer.parseInt(v.trim());
      return n >= min && n <= max ? null : "an integer from " + min + " to " + max;
    } catch (NumberFormatException e) {
      return "an integer from " + min + " to " + max;
    }
  }

  static long[] parseLongs(String v) {
    List<Long> out = new ArrayList<>();
    for (String part : v.split(",")) if (!part.trim().isEmpty()) out.add(Long.parseLong(part.trim()));
    return out.stream().mapToLong(Long::longValue).toArray();
  }

  /** A channel's handler and its parameters. */
  public record Handler(String name, long[] params) {}

  /**
   * The handler configured for trace channel {@code channel} ({@code spark.cloudprofiler.channel.<name>.handler}
   * and {@code .params}), or null when none is; throws naming the key and the bad value.
   */
  public static Handler channelHandler(SparkConf conf, String channel) {
    String handlerKey = CHANNEL_PREFIX + channel + HANDLER_SUFFIX;
    String paramsKey = CHANNEL_PREFIX + channel + PARAMS_SUFFIX;
    if (!conf.contains(handlerKey)) {
      if (conf.contains(paramsKey)) {
        throw new IllegalArgumentException(paramsKey + "=" + conf.get(paramsKey) + " is invalid: " + handlerKey
            + " is not set");
      }
      return null;
    }
    return handler(handlerKey, conf.get(handlerKey).trim(), paramsKey, conf.get(paramsKey, "").trim());
  }

  private static final String PREFIX = "spark.cloudprofiler.";
  private static final String CHANNEL_PREFIX = PREFIX + "channel.";
  private static final String HANDLER_SUFFIX = ".handler";
  private static final String PARAMS_SUFFIX = ".params";

  /** A handler and its parameters, checked against each other; the message names the key at fault. */
  private static Handler handler(String handlerKey, String handler, String paramsKey, String params) {
    Integer want = HANDLERS.get(handler);
    if (want == null) {
      throw new IllegalArgumentException(handlerKey + "=" + handler + " is invalid: expected one of "
          + String.join(", ", HANDLERS.keySet()));
    }
    long[] values;
    try {
      values = parseLongs(params);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(paramsKey + "=" + params + " is invalid: expected comma-separated integers");
    }
    if (values.length != want) {
      throw new IllegalArgumentException(paramsKey + "=" + params + " is invalid: handler " + handler + " takes "
          + want + " parameter(s)");
    }
    return new Handler(handler, values);
  }

  /**
   * Validated values of every option (defaults filled in); throws naming the key and the bad value, also for a
   * spark.cloudprofiler.* key that is no option (a misspelt option would otherwise be ignored without a word).
   */
  public static Map<String, String> read(SparkConf conf) {
    Map<String, String> values = new LinkedHashMap<>();
    for (Key key : ALL) {
      String value = conf.get(key.name, key.defaultValue).trim();
      String expected = key.check.apply(value);
      if (expected != null) {
        throw new IllegalArgumentException(key.name + "=" + value + " is invalid: expected " + expected);
      }
      values.put(key.name, value);
    }
    handler(TASK_HANDLER.name, values.get(TASK_HANDLER.name), TASK_PARAMS.name, values.get(TASK_PARAMS.name));
    for (scala.Tuple2<String, String> entry : conf.getAllWithPrefix(PREFIX)) {
      String key = PREFIX + entry._1();
      if (ALL.stream().anyMatch(k -> k.name.equals(key))) continue;
      String suffix = key.endsWith(HANDLER_SUFFIX) ? HANDLER_SUFFIX : key.endsWith(PARAMS_SUFFIX) ? PARAMS_SUFFIX : "";
      if (key.startsWith(CHANNEL_PREFIX) && !suffix.isEmpty()
          && key.length() > CHANNEL_PREFIX.length() + suffix.length()) {
        channelHandler(conf, key.substring(CHANNEL_PREFIX.length(), key.length() - suffix.length()));
        continue;
      }
      String near = ALL.stream().map(k -> k.name).filter(k -> k.equalsIgnoreCase(key)).findFirst().orElse(null);
      throw new IllegalArgumentException(key + " is not an option of cloudprofiler" + (near != null
          ? ": did you mean " + near + "?"
          : ": expected one of " + String.join(", ", ALL.stream().map(k -> k.name).toList()) + ", or "
              + CHANNEL_PREFIX + "<name>" + HANDLER_SUFFIX + " / " + PARAMS_SUFFIX));
    }
    return values;
  }
}
