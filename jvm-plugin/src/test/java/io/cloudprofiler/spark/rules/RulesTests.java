package io.cloudprofiler.spark.rules;

import static io.cloudprofiler.spark.JvmTests.check;
import static io.cloudprofiler.spark.JvmTests.equal;
import static io.cloudprofiler.spark.JvmTests.loadNative;
import static io.cloudprofiler.spark.JvmTests.startLibrary;
import static io.cloudprofiler.spark.JvmTests.thrown;
import static io.cloudprofiler.spark.JvmTests.warnings;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.spark.Messages;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowFileReader;

/**
 * Tests of the rules of the trace channels: a rules file, and an executor's copy of the driver's
 * rules.
 */
public final class RulesTests {
  private RulesTests() {}

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

  /**
   * An executor whose driver stops answering (it fails, then it hangs) keeps the rules it follows,
   * says so once, and follows the next version once the driver answers again; each request to
   * collect now that the answers carry is passed on once.
   */
  public static void testAnExecutorKeepsItsRulesWhileTheDriverDoesNotAnswerAndSaysSoOnce()
      throws Exception {
    startLibrary("cp-rules-follower");
    try {
      AtomicInteger asked = new AtomicInteger();
      List<String> applied = Collections.synchronizedList(new ArrayList<>());
      List<Long> collects = Collections.synchronizedList(new ArrayList<>());
      Callable<Messages.Directions> driver =
          () -> {
            int n = asked.incrementAndGet();
            if (n == 1) return new Messages.Directions(1, "follow*=null", 1);
            if (n <= 4) throw new IllegalStateException("the driver's endpoint is gone");
            if (n == 5) Thread.sleep(2 * RulesFollower.INTERVAL_MS); // an answer too late
            if (n <= 8) return null; // no answer
            return new Messages.Directions(2, "follow*=downsample:4", n < 12 ? 1 : 2);
          };
      List<String> said =
          warnings(
              RulesFollower.class,
              () -> {
                RulesFollower follower =
                    new RulesFollower("7", driver, applied::add, collects::add);
                try {
                  long deadline = System.nanoTime() + 20_000_000_000L;
                  while (asked.get() < 6 && System.nanoTime() < deadline) Thread.sleep(50);
                  equal(List.of("follow*=null"), new ArrayList<>(applied)); // kept while unanswered
                  check(
                      CloudProfiler.rules().contains("follow*=null"), () -> CloudProfiler.rules());
                  while ((applied.size() < 2 || collects.size() < 2)
                      && System.nanoTime() < deadline) Thread.sleep(50);
                } finally {
                  follower.stop();
                }
                return null;
              });
      equal(List.of("follow*=null", "follow*=downsample:4"), new ArrayList<>(applied));
      equal(List.of(1L, 2L), new ArrayList<>(collects)); // each request once
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

  /**
   * A driver that answers, but late (a busy driver as the application starts), is no reason to warn
   * until it has been silent for SILENT_WARN_MS: every application on a loaded host said so once.
   */
  public static void testAnswersThatComeLateAreWaitedForWithoutAWarning() throws Exception {
    AtomicInteger asked = new AtomicInteger();
    Callable<Messages.Directions> driver =
        () -> {
          asked.incrementAndGet();
          Thread.sleep(2 * RulesFollower.INTERVAL_MS);
          return null; // unchanged
        };
    List<String> said =
        warnings(
            RulesFollower.class,
            () -> {
              RulesFollower follower = new RulesFollower("8", driver, text -> {}, request -> {});
              try {
                while (asked.get() < 3) Thread.sleep(50);
              } finally {
                follower.stop();
              }
              return null;
            });
    equal(List.of(), said);
  }

  /**
   * A Connect server whose clients come and go keeps the rules of at most MAX_SESSIONS sessions:
   * the least recently used is forgotten (and follows the application's rules), the others keep
   * theirs. Their changes are recorded beside the application's, naming the session, up to
   * MAX_SESSION_CHANGES, beyond which one line says so.
   */
  public static void testTheRulesOfTheLeastRecentlyUsedSessionAreForgottenBeyondTheBound()
      throws Exception {
    loadNative();
    RuleChanges rules = new RuleChanges("*=buffered", 0);
    List<String> said =
        warnings(
            RuleChanges.class,
            () -> {
              for (int i = 0; i < RuleChanges.MAX_SESSIONS; i++)
                rules.trySetSession("s" + i, "x*=null");
              equal(1L, rules.ofSession("s0").version()); // used: now the most recent
              rules.trySetSession("late", "y*=null");
              rules.trySetSession("late", "y*=null;z*=null");
              return null;
            });
    equal(0L, rules.ofSession("s1").version());
    equal("*=buffered", rules.ofSession("s1").text());
    equal(1L, rules.ofSession("s0").version());
    equal(2L, rules.ofSession("late").version());
    equal(
        1L,
        said.stream().filter(l -> l.contains("keeps the first 10000 changes of Spark")).count());
    Path dir = Files.createTempDirectory("rules-changes");
    try {
      rules.publish(dir.toString());
      Path table = Path.of(RuleChanges.TABLE.in(dir.toString()));
      List<List<Object>> rows = new ArrayList<>();
      try (BufferAllocator allocator = new RootAllocator();
          ArrowFileReader reader = new ArrowFileReader(Files.newByteChannel(table), allocator)) {
        while (reader.loadNextBatch()) {
          VectorSchemaRoot root = reader.getVectorSchemaRoot();
          for (int i = 0; i < root.getRowCount(); i++) {
            List<Object> row = new ArrayList<>();
            for (String column : List.of("version", "rules", "session")) {
              Object value = root.getVector(column).getObject(i);
              row.add(value == null ? null : value.toString());
            }
            rows.add(row);
          }
        }
      }
      equal(1 + RuleChanges.MAX_SESSION_CHANGES, rows.size());
      equal(Arrays.asList("0", "*=buffered", null), rows.get(0)); // the application's
      equal(Arrays.asList("1", "x*=null", "s0"), rows.get(1));
      equal(Arrays.asList("1", "x*=null", "s9999"), rows.get(rows.size() - 1));
    } finally {
      try (var walk = Files.walk(dir)) {
        for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) Files.delete(p);
      }
    }
  }
}
