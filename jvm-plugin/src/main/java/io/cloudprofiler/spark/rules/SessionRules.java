package io.cloudprofiler.spark.rules;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.spark.Config;
import io.cloudprofiler.spark.Messages;
import io.cloudprofiler.spark.executor.CloudProfilerExecutorPlugin;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.TaskContext;

/**
 * The rules a Spark Connect session set for itself through SQL ({@code cp_set_rules}): any SQL
 * client of a Connect server may run it, so its rules apply to that session's operations only,
 * never to the application's (which come from the driver's Python API, the configuration and {@code
 * cloudprofiler config set}). A task knows its session from the tag Spark Connect gives each
 * operation's jobs; its {@code cp_trace} channels follow its session's rules when that session set
 * some, with the handler chosen here as the native library chooses it (the first rule whose
 * pattern, an {@code fnmatch} pattern, matches the channel's name; buffered where none does).
 */
public final class SessionRules {
  /** Spark Connect's tag of an operation's jobs: {@code ..._Session_<id>_Operation_<id>}. */
  private static final Pattern CONNECT_TAG =
      Pattern.compile("SparkConnect_OperationTag_User_.*_Session_([^_,]+)_Operation_");

  /** How long an executor keeps a session's rules before asking the driver again. */
  private static final long FRESH_NANOS = TimeUnit.SECONDS.toNanos(1);

  /** Sessions known to an executor beyond which the stale ones are forgotten. */
  private static final int PRUNE_AT = 256;

  private record Known(long atNanos, Messages.RulesNow rules) {}

  private static final Map<String, Known> KNOWN = new ConcurrentHashMap<>();

  private SessionRules() {}

  /** The Spark Connect session of the task this thread runs, or null (none, or not a task). */
  public static String currentSession() {
    TaskContext task = TaskContext.get();
    String tags = task == null ? null : task.getLocalProperty("spark.job.tags");
    if (tags == null) return null;
    Matcher m = CONNECT_TAG.matcher(tags);
    return m.find() ? m.group(1) : null;
  }

  /**
   * The rules {@code session} set (version 1 and up), or version 0 when it set none: in the
   * driver's JVM from its {@link RuleChanges}, else asked of the driver at most once a second.
   */
  public static Messages.RulesNow of(String session) throws Exception {
    RuleChanges rules = RuleChanges.running();
    if (rules != null) return rules.ofSession(session);
    Known known = KNOWN.get(session);
    if (known != null && System.nanoTime() - known.atNanos() < FRESH_NANOS) return known.rules();
    Messages.RulesNow now =
        (Messages.RulesNow)
            CloudProfilerExecutorPlugin.askDriver(new Messages.SessionRulesNow(session));
    long at = System.nanoTime();
    // a cache of the sessions whose tasks ran here lately: stale entries go once there are many, so
    // that an executor that served many Connect sessions keeps only the recent ones
    if (KNOWN.size() >= PRUNE_AT) KNOWN.values().removeIf(k -> at - k.atNanos() >= FRESH_NANOS);
    KNOWN.put(session, new Known(at, now));
    return now;
  }

  /**
   * Checks every rule of {@code text} as the native library would (its handler and parameters by
   * the library's own check, its pattern for the bytes fnmatch would misread); throws naming the
   * rule. The library must be loaded.
   */
  static void check(String text) {
    int line = 0;
    for (String rule : Config.rulesText(text).split("\n")) {
      line++;
      String r = rule.strip();
      if (r.isEmpty() || r.startsWith("#")) continue;
      try {
        Rule parsed = parse(r);
        CloudProfiler.checkHandler(
            CloudProfiler.handlerFromName(parsed.handler().name()), parsed.handler().params());
      } catch (RuntimeException e) {
        throw new IllegalArgumentException(
            "rule at line " + line + " '" + r + "': " + e.getMessage(), e);
      }
    }
  }

  /**
   * The handler of channel {@code name} under {@code text}: its first matching rule's, else
   * buffered.
   */
  public static Config.Handler handlerFor(String text, String name) {
    for (String rule : Config.rulesText(text).split("\n")) {
      String r = rule.strip();
      if (r.isEmpty() || r.startsWith("#")) continue;
      Rule parsed = parse(r);
      if (parsed.pattern().matcher(name).matches()) return parsed.handler();
    }
    return new Config.Handler("buffered", new long[0]);
  }

  private record Rule(Pattern pattern, Config.Handler handler) {}

  /** {@code pattern=handler[:param...]}. */
  private static Rule parse(String rule) {
    int eq = rule.lastIndexOf('=');
    if (eq <= 0) throw new IllegalArgumentException("expected pattern=handler[:param...]");
    String pattern = rule.substring(0, eq).strip();
    String[] parts = rule.substring(eq + 1).strip().split(":", -1);
    long[] params = new long[parts.length - 1];
    for (int i = 1; i < parts.length; i++) {
      try {
        params[i - 1] = Long.parseLong(parts[i].strip());
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException("parameter '" + parts[i] + "' is not an integer");
      }
    }
    return new Rule(glob(pattern), new Config.Handler(parts[0].strip(), params));
  }

  /** An fnmatch pattern (flags 0: *, ?, [...] with ! or ^ negating, \ escaping) as a regex. */
  static Pattern glob(String pattern) {
    StringBuilder re = new StringBuilder();
    for (int i = 0; i < pattern.length(); i++) {
      char c = pattern.charAt(i);
      if (c == '*') re.append(".*");
      else if (c == '?') re.append('.');
      else if (c == '\\' && i + 1 < pattern.length())
        re.append(Pattern.quote("" + pattern.charAt(++i)));
      else if (c == '[') {
        int end = pattern.indexOf(']', i + 2);
        if (end < 0)
          throw new IllegalArgumentException("unterminated bracket in '" + pattern + "'");
        String set = pattern.substring(i + 1, end);
        if (set.startsWith("!")) set = "^" + set.substring(1);
        re.append('[').append(set.replace("\\", "\\\\").replace("[", "\\[")).append(']');
        i = end;
      } else if (Character.isWhitespace(c) || Character.isISOControl(c))
        throw new IllegalArgumentException("blank or control character in '" + pattern + "'");
      else re.append(Pattern.quote("" + c));
    }
    return Pattern.compile(re.toString(), Pattern.DOTALL);
  }
}
