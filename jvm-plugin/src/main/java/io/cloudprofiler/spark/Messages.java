package io.cloudprofiler.spark;

import io.cloudprofiler.spark.calibration.CalibrationCoordinator;
import io.cloudprofiler.spark.calibration.TscDomain;
import io.cloudprofiler.spark.rules.RuleChanges;
import java.lang.reflect.RecordComponent;
import java.util.ArrayList;
import java.util.List;

/**
 * What an executor's plugin asks the driver's ({@code PluginContext.ask}) to find its TSC domain,
 * to be calibrated a last time and to learn the rules of the trace channels, and the driver's
 * answers. See {@link CalibrationCoordinator} and {@link RuleChanges}.
 *
 * <p>On the wire a message is JDK values only ({@link #toWire}): Spark deserializes an answer on an
 * executor with a class loader that does not see the plugin's jar, and a class it cannot find there
 * ends the executor.
 */
public final class Messages {
  private Messages() {}

  /**
   * The first question of an executor: the domains of its boot id. The first one the driver gets
   * also names the application's folder, where the calibration tables go. Answer: {@link Welcome}.
   */
  public record Hello(String bootId, String appId, String logDir) {}

  /**
   * The application's probe secret in hex (made at random by the driver, {@link
   * TscDomain#newSecret}; empty when the driver does not calibrate) and the domains of the
   * executor's boot id.
   */
  public record Welcome(String secret, List<Candidate> domains) {}

  /**
   * A domain and the member that answers probes for it; {@code process} names that member's JVM
   * ({@link TscDomain#PROCESS}).
   */
  public record Candidate(String domain, String host, int responderPort, String process) {}

  public record Candidates(List<Candidate> domains) {}

  /**
   * An executor joins {@code domain}, whose member's TSC agreed with its own, or founds one ({@code
   * domain} empty) after the first {@code checked} candidates all differed; {@code check} says what
   * its probes found; {@code tscHz} its TSC's frequency (0 where unknown), in which the driver
   * states its probes' round trips; {@code tscSimulation} its TSC's simulation ({@link
   * io.cloudprofiler.spark.calibration.TscDomain#simulation}). Answer: {@link Joined}, or {@link
   * Candidates} to check first when domains of its boot id appeared meanwhile.
   */
  public record Join(
      String bootId,
      String domain,
      int checked,
      String host,
      int responderPort,
      int controlPort,
      String executorId,
      long pid,
      String process,
      String check,
      double tscHz,
      String tscSimulation) {}

  public record Joined(String domain) {}

  /**
   * An executor that stops asks for a last probe run each way with the driver. Answer: whether it
   * ran.
   */
  public record Last(String executorId) {}

  /**
   * The probe responders registered for this application, which alone an executor's probe control
   * probes. Answer: {@link Candidates}, one per process.
   */
  public record Responders() {}

  /**
   * An executor asks for the rules of the trace channels, about once a second. Answer: {@link
   * RulesNow}.
   */
  public record CurrentRules() {}

  /**
   * The rules in force on the driver, one a line, and their version (0 for those at start, then 1,
   * 2, ...).
   */
  public record RulesNow(long version, String text) {}

  /**
   * An executor asks what to follow, every {@code RulesFollower.INTERVAL_MS}: the rules, and
   * whether to collect its logs now. Answer: {@link Directions}.
   */
  public record Follow(String executorId) {}

  /**
   * The rules in force ({@link RulesNow}'s version and text) and the driver's latest request that
   * the executors collect their logs now ({@code collection}: 0 for none, then 1, 2, ...).
   */
  public record Directions(long version, String text, long collection) {}

  /**
   * Executor to driver, one way: it collected its logs, up to their last record, as the driver's
   * request {@code collection} asked.
   */
  public record Collected(String executorId, long collection) {}

  /**
   * A task's cp_set_rules on an executor. Answer: {@link RulesNow}, or the refusal's message (a
   * String).
   */
  public record SetRules(String text, String session) {}

  /**
   * The rules Spark Connect session {@code session} set for itself (version 0 and the application's
   * rules when it set none). Answer: {@link RulesNow}.
   */
  public record SessionRulesNow(String session) {}

  /**
   * Executor to driver, one way, at the collection interval when they changed and at the executor's
   * end: its library's counters since it started (every channel of the process), and its busiest
   * channels' over the last interval (the executor's {@code interval}-th, 1 the first, {@code
   * intervalSeconds} long; the other channels counted in {@code channelsLeftOut}), for the tab and
   * the metrics; and what that work has cost the executor so far: {@code workNanos} building and
   * sending these messages and the samples', {@code scanNanos} its library's scan of {@code
   * scannedRecords} records for the samples (off the logging path).
   */
  public record Counters(
      String executorId,
      long recordsLogged,
      long recordsDropped,
      long bytesWritten,
      long interval,
      double intervalSeconds,
      List<ChannelCount> channels,
      int channelsLeftOut,
      long workNanos,
      long scanNanos,
      long scannedRecords) {}

  /**
   * A channel's records logged and dropped since the executor's library started (its channels of
   * that name summed), and per second over the last interval.
   */
  public record ChannelCount(
      String channel,
      long recordsLogged,
      long recordsDropped,
      double recordsPerSecond,
      double dropsPerSecond) {}

  /**
   * Executor to driver, one way, at the collection interval where its library kept any: the records
   * its trace channels kept for the hops' latency since the last message (the library's {@code
   * cp_channel_samples_take}), with the executor's TSC domain and its TSC's frequency.
   */
  public record Samples(
      String executorId, String domain, double tscHz, List<ChannelSamples> channels) {}

  /** A channel's samples: its level (ids whose level reaches it were kept), ids and TSC ticks. */
  public record ChannelSamples(String channel, int level, long[] ids, long[] ticks) {}

  /**
   * Executor to driver, one way: it collected the files of a lost process of its host (process
   * {@code pid}, its local folder {@code folder}): {@code files} of them, {@code cut} cut where it
   * died.
   */
  public record LostCollected(String executorId, long pid, String folder, int files, int cut) {}

  private static final List<Class<? extends Record>> TYPES =
      List.of(
          Hello.class,
          Welcome.class,
          Candidate.class,
          Candidates.class,
          Join.class,
          Joined.class,
          Last.class,
          Responders.class,
          CurrentRules.class,
          RulesNow.class,
          Follow.class,
          Directions.class,
          Collected.class,
          SetRules.class,
          SessionRulesNow.class,
          Counters.class,
          ChannelCount.class,
          Samples.class,
          ChannelSamples.class,
          LostCollected.class);

  /**
   * A record as an Object[] of its name and its components, lists element by element; other values
   * as they are.
   */
  public static Object toWire(Object value) {
    if (value instanceof List<?> list)
      return new ArrayList<>(list.stream().map(Messages::toWire).toList());
    if (!(value instanceof Record message)) return value;
    RecordComponent[] parts = message.getClass().getRecordComponents();
    Object[] out = new Object[parts.length + 1];
    out[0] = message.getClass().getSimpleName();
    try {
      for (int i = 0; i < parts.length; i++)
        out[i + 1] = toWire(parts[i].getAccessor().invoke(message));
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("cannot encode " + message, e);
    }
    return out;
  }

  /** The message that {@link #toWire} encoded; null for an Object[] that encodes none of them. */
  public static Object fromWire(Object wire) {
    if (wire instanceof List<?> list) return list.stream().map(Messages::fromWire).toList();
    if (!(wire instanceof Object[] fields) || fields.length == 0) return wire;
    Class<? extends Record> type =
        TYPES.stream().filter(t -> t.getSimpleName().equals(fields[0])).findFirst().orElse(null);
    if (type == null || type.getRecordComponents().length != fields.length - 1) return null;
    RecordComponent[] parts = type.getRecordComponents();
    Class<?>[] types = new Class<?>[parts.length];
    Object[] values = new Object[parts.length];
    for (int i = 0; i < parts.length; i++) {
      types[i] = parts[i].getType();
      values[i] = fromWire(fields[i + 1]);
    }
    try {
      return type.getDeclaredConstructor(types).newInstance(values);
    } catch (ReflectiveOperationException
        | IllegalArgumentException e) { // fields of the wrong type
      return null;
    }
  }
}
