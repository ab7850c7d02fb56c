package io.cloudprofiler.spark.rules;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.CloudProfilerException;
import io.cloudprofiler.spark.Config;
import io.cloudprofiler.spark.DaemonThreads;
import io.cloudprofiler.spark.Messages;
import io.cloudprofiler.spark.executor.CloudProfilerExecutorPlugin;
import io.cloudprofiler.spark.sql.RulesFunctions;
import io.cloudprofiler.spark.tables.ArrowTables;
import io.cloudprofiler.spark.tables.Table;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.TaskContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The driver's rules for the trace channels of its application, which change while it runs: the
 * rules text and its version (0 for {@code spark.cloudprofiler.rules}, then one more per accepted
 * change). Executors ask for them about once a second ({@link Messages.CurrentRules}) and apply a
 * new version. Python reaches the one of the running application through {@link #setRules} and
 * {@link #rules} (cps.set_rules and cps.rules over py4j), the command line through {@link
 * RuleRequests}. A Spark Connect session sets rules of its own through the SQL functions
 * cp_set_rules and cp_rules of {@link RulesFunctions} ({@link #setSessionRules}, {@link
 * #sessionRules}): kept here per session, for that session's cp_trace channels ({@link
 * SessionRules}).
 *
 * <p>New rules are checked with the native library's own check (they are set in the driver's
 * process, whose channels follow them too); a bad rule is refused with the library's message naming
 * it, and the rules in force stay. Every accepted rules text, the application's and each Connect
 * session's, is kept with its wall time and TSC, for the application's {@link #TABLE}.
 */
public final class RuleChanges {
  public static final Table TABLE =
      new Table(
          "rules_changes",
          "rules-changes.arrows",
          Table.APPLICATION,
          "a row per accepted rules text of the trace channels: when (wall time and the driver's"
              + " TSC), its version, the text, the Spark Connect session it is for (null: the"
              + " application's)",
          List.of("realtime_ns", "tsc", "version", "rules", "session"),
          List.of(Long.class, Long.class, Long.class, String.class, String.class));

  private static final Logger LOG = LoggerFactory.getLogger(RuleChanges.class);
  private static volatile RuleChanges running;

  private final List<Object[]> changes = new ArrayList<>();

  /**
   * The Connect sessions that set rules, the least recently used first: beyond {@link
   * #MAX_SESSIONS} the oldest is forgotten (its operations then follow the application's rules),
   * which the log says, so that a server whose clients come and go keeps bounded memory.
   */
  private final Map<String, Messages.RulesNow> sessions =
      new LinkedHashMap<>(16, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Messages.RulesNow> eldest) {
          if (size() <= MAX_SESSIONS) return false;
          LOG.warn(
              "cloudprofiler: forgot the rules of Spark Connect session {}, the least recently used"
                  + " of more than {} that set rules: its operations follow the application's"
                  + " rules",
              eldest.getKey(),
              MAX_SESSIONS);
          return true;
        }
      };

  static final int MAX_SESSIONS = 10_000;

  /**
   * Connect sessions' changes kept for {@link #TABLE}, beyond which they are counted and said once,
   * not kept: any SQL client may make them, and the whole table is published every interval.
   */
  static final int MAX_SESSION_CHANGES = 10_000;

  private long sessionChanges;
  private long version;
  private String text;

  /**
   * The rules at start, one a line (checked by the caller), taken at the driver's TSC {@code tsc}
   * (0 when the driver has no native library).
   */
  public RuleChanges(String text, long tsc) {
    this.text = text;
    keep(tsc, 0, text, null);
  }

  /**
   * Keeps an accepted rules text for {@link #TABLE}: when (wall time, the driver's TSC), its
   * version, and the Connect session it is for (null: the application's).
   */
  private void keep(long tsc, long version, String text, String session) {
    changes.add(
        new Object[] {System.currentTimeMillis() * 1_000_000L, tsc, version, text, session});
  }

  /** Makes these the rules that {@link #setRules} changes (null: the application has stopped). */
  public static void run(RuleChanges rules) {
    running = rules;
  }

  /**
   * Replaces the rules of the running application ({@code ;} or new lines between rules): returns
   * their new version, or the refusal naming the bad rule (the rules in force then stay). The
   * driver's Python API (py4j) only: called in a task (SQL's {@code reflect()}) it is refused, for
   * SQL sets a Connect session's rules ({@link #setSessionRules}). A result, not an exception:
   * Spark Connect clients get an exception's message cut.
   */
  public static String setRules(String text) {
    try {
      RuleChanges rules = running;
      // in a task: SQL's reflect(), which reaches any public static method, called it
      if (rules == null || TaskContext.get() != null)
        return "rules not set: the application's rules are set on the driver (cps.set_rules), by "
            + Config.RULES.name
            + " or by cloudprofiler config set; SQL's cp_set_rules sets a Spark Connect"
            + " session's";
      Object answer = rules.trySet(text);
      return answer instanceof Messages.RulesNow now
          ? Long.toString(now.version())
          : String.valueOf(answer);
    } catch (Throwable e) {
      return "rules not set, the rules in force stay: " + e;
    }
  }

  /**
   * cp_set_rules: replaces the rules of the Spark Connect session whose task runs this, for that
   * session's operations only; returns their version in that session, or the refusal naming the bad
   * rule. Outside a Connect session it is refused: the application's rules are the driver's.
   */
  public static String setSessionRules(String text) {
    try {
      DaemonThreads.faultPoint(RulesFunctions.SET);
      String session = SessionRules.currentSession();
      RuleChanges rules = running;
      Object answer =
          rules != null
              ? rules.trySetSession(session, text)
              : CloudProfilerExecutorPlugin.askDriver(new Messages.SetRules(text, session));
      return answer instanceof Messages.RulesNow now
          ? Long.toString(now.version())
          : String.valueOf(answer);
    } catch (Throwable e) { // the profiler never fails the user's task: the answer says what failed
      return "rules not set, the rules in force stay: " + e;
    }
  }

  /** cp_rules: the rules of the Connect session whose task runs this, else the application's. */
  public static String sessionRules() {
    try {
      DaemonThreads.faultPoint(RulesFunctions.GET);
      String session = SessionRules.currentSession();
      if (session != null) return SessionRules.of(session).text();
      return rules();
    } catch (Throwable e) {
      return "rules unknown: " + e;
    }
  }

  /** The running application's rules, or null when it has stopped. */
  static RuleChanges running() {
    return running;
  }

  /**
   * The rules in force in the running application, one a line; or, where they cannot be had (the
   * driver does not answer, the library failed), a line saying why, not a failed task.
   */
  public static String rules() {
    try {
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
    keep(tsc, version, text, null);
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

  /**
   * A session's rules from SQL: checked as the library checks them, kept for that session's
   * operations; the new rules and their version in that session, or the refusal's message.
   */
  public synchronized Object trySetSession(String session, String newText) {
    String text = Config.rulesText(newText);
    try {
      SessionRules.check(text);
    } catch (IllegalArgumentException e) {
      return "rules refused, the rules in force stay: " + e.getMessage();
    } catch (LinkageError e) {
      return "rules cannot be checked: the driver could not load the native library";
    }
    if (session == null || session.isEmpty())
      return "rules not set: cp_set_rules sets the rules of the Spark Connect session that runs it,"
          + " and this query runs in none; the application's rules are set on the driver"
          + " (cps.set_rules), by "
          + Config.RULES.name
          + " or by cloudprofiler config set";
    Messages.RulesNow now = new Messages.RulesNow(ofSession(session).version() + 1, text);
    sessions.put(session, now);
    if (++sessionChanges <= MAX_SESSION_CHANGES) {
      keep(CloudProfiler.tsc(), now.version(), text, session);
    } else if (sessionChanges == MAX_SESSION_CHANGES + 1) {
      LOG.warn(
          "cloudprofiler: {} keeps the first {} changes of Spark Connect"
              + " sessions' rules; later ones are in force but not recorded",
          TABLE.file(),
          MAX_SESSION_CHANGES);
    }
    return now;
  }

  /** The rules of {@code session}: those it set, else version 0 and the application's. */
  public synchronized Messages.RulesNow ofSession(String session) {
    Messages.RulesNow set = session == null ? null : sessions.get(session);
    return set != null ? set : new Messages.RulesNow(0, text);
  }

  public synchronized Messages.RulesNow now() {
    return new Messages.RulesNow(version, text);
  }

  /**
   * Writes every accepted rules text (when, as wall time and the driver's TSC, version, text, and
   * the Connect session it is for: null for the application's) to {@code appFolder}.
   */
  public void publish(String appFolder) throws Exception {
    List<Object[]> rows;
    synchronized (this) {
      rows = new ArrayList<>(changes);
    }
    ArrowTables.writeRows(TABLE, appFolder, Map.of(), rows);
  }
}
