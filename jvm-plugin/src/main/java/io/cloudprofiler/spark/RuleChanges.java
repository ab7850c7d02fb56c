package io.cloudprofiler.spark;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.CloudProfilerException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The driver's rules for the trace channels of its application, which change while it runs: the
 * rules text and its version (0 for {@code spark.cloudprofiler.rules}, then one more per accepted
 * change). Executors ask for them about once a second ({@link Messages.CurrentRules}) and apply a
 * new version. Python reaches the one of the running application through {@link #setRules} and
 * {@link #rules} (cps.set_rules and cps.rules: over py4j, or on Spark Connect through the SQL
 * functions cp_set_rules and cp_rules of {@link RulesFunctions}), the command line through {@link
 * RuleRequests}.
 *
 * <p>New rules are checked with the native library's own check (they are set in the driver's
 * process, whose channels follow them too); a bad rule is refused with the library's message naming
 * it, and the rules in force stay. Every accepted rules text is kept with its wall time and TSC,
 * for the application's {@code rules-changes.arrows}.
 */
public final class RuleChanges {
  private static volatile RuleChanges running;

  private final List<Object[]> changes = new ArrayList<>();
  private long version;
  private String text;

  /**
   * The rules at start, one a line (checked by the caller), taken at the driver's TSC {@code tsc}
   * (0 when the driver has no native library).
   */
  RuleChanges(String text, long tsc) {
    this.text = text;
    changes.add(new Object[] {System.currentTimeMillis() * 1_000_000L, tsc, 0L, text});
  }

  /** Makes these the rules that {@link #setRules} changes (null: the application has stopped). */
  static void run(RuleChanges rules) {
    running = rules;
  }

  /**
   * Replaces the rules of the running application ({@code ;} or new lines between rules): returns
   * their new version, or the refusal naming the bad rule (the rules in force then stay). A result,
   * not an exception: SQL calls this through {@code reflect()}, whose failure wraps the cause, and
   * Spark Connect clients get that message cut before it. In the driver's JVM (where a local mode's
   * tasks run too) directly, else asked of the driver by the executor that runs the task.
   */
  public static String setRules(String text) {
    try {
      DaemonThreads.faultPoint(RulesFunctions.SET);
      RuleChanges rules = running;
      Object answer =
          rules != null
              ? rules.trySet(text)
              : CloudProfilerExecutorPlugin.askDriver(new Messages.SetRules(text));
      return answer instanceof Messages.RulesNow now
          ? Long.toString(now.version())
          : String.valueOf(answer);
    } catch (Throwable e) { // the profiler never fails the user's task: the answer says what failed
      return "rules not set, the rules in force stay: " + e;
    }
  }

  /**
   * The rules in force in the running application, one a line; or, where they cannot be had (the
   * driver does not answer, the library failed), a line saying why, not a failed task.
   */
  public static String rules() {
    try {
      DaemonThreads.faultPoint(RulesFunctions.GET);
      RuleChanges rules = running;
      Object answer =
          rules != null
              ? rules.now()
              : CloudProfilerExecutorPlugin.askDriver(new Messages.CurrentRules());
      return ((Messages.RulesNow) answer).text();
    } catch (Throwable e) {
      return "rules unknown: " + e;
    }
  }

  synchronized long set(String newText) {
    // taken before the rules go into force: in the driver's own library (a local mode's executor)
    // channels switch during setRules, and every switch must come after its change's TSC
    long tsc;
    try {
      tsc = CloudProfiler.tsc();
      CloudProfiler.setRules(newText);
    } catch (CloudProfilerException e) {
      throw new IllegalArgumentException(
          "rules refused, the rules in force stay: " + e.getMessage(), e);
    } catch (LinkageError e) {
      throw new IllegalStateException(
          "rules cannot be checked: the driver could not load the native library", e);
    }
    text = newText;
    version++;
    changes.add(new Object[] {System.currentTimeMillis() * 1_000_000L, tsc, version, text});
    return version;
  }

  /** {@link #set}: the new rules and version, or the refusal's message. */
  synchronized Object trySet(String newText) {
    try {
      set(Config.rulesText(newText));
      return now();
    } catch (IllegalArgumentException e) {
      return e.getMessage();
    }
  }

  synchronized Messages.RulesNow now() {
    return new Messages.RulesNow(version, text);
  }

  /**
   * Writes every accepted rules text (when, as wall time and the driver's TSC, version, text) to
   * {@code target}.
   */
  void publish(String target) throws Exception {
    List<Object[]> rows;
    synchronized (this) {
      rows = new ArrayList<>(changes);
    }
    ArrowTables.writeRows(
        target, Map.of(), List.of("realtime_ns", "tsc", "version", "rules"), rows);
  }
}
