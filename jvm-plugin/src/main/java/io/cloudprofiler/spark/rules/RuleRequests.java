package io.cloudprofiler.spark.rules;

import io.cloudprofiler.spark.Config;
import io.cloudprofiler.spark.DaemonThreads;
import io.cloudprofiler.spark.Messages;
import io.cloudprofiler.spark.tables.ArrowTables;
import java.io.FileNotFoundException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The rules of the running application from the command line ({@code cloudprofiler config set|get
 * --app <logDir>/<app id>}) with nothing listening: once a second the driver looks for {@value
 * #REQUEST} in the application's folder (one stat, on any Hadoop file system), applies or refuses
 * it with {@link RuleChanges}, deletes it and answers in {@code rules-result-<token>.txt}. Only who
 * can write the application's folder can change its rules: its owner, by the file system's
 * permissions.
 *
 * <p>A request: its first line {@code cloudprofiler-rules-request <token> set|get}, then (set) the
 * rules, one a line. An answer: {@code accepted <version>}, {@code refused <message>} or {@code
 * rules <version>} followed by the rules in force, one a line. The command line writes its request
 * under another name and renames it, so that the driver never reads a part of one.
 */
public final class RuleRequests {
  private static final Logger LOG = LoggerFactory.getLogger(RuleRequests.class);
  static final String REQUEST = "rules-request.txt";
  private static final Pattern FIRST_LINE =
      Pattern.compile("cloudprofiler-rules-request ([0-9a-f]{8,64}) (set|get)");
  private static final int REQUEST_MAX = 1 << 20;

  /** Where the file system has permissions, the answer is the owner's only. */
  private static final FsPermission OWNER_ONLY = new FsPermission((short) 0600);

  private final RuleChanges rules;
  private final Supplier<String> appFolder;
  private final ScheduledExecutorService timer =
      Executors.newSingleThreadScheduledExecutor(
          DaemonThreads.named("cloudprofiler-rule-requests"));
  private boolean warned;

  /**
   * {@code appFolder}: the application's folder, null until the application has its id (no request
   * is read before).
   */
  public RuleRequests(RuleChanges rules, Supplier<String> appFolder) {
    this.rules = rules;
    this.appFolder = appFolder;
    timer.scheduleWithFixedDelay(
        DaemonThreads.guarded("the rule requests of the command line", this::poll),
        1,
        1,
        TimeUnit.SECONDS);
  }

  public void stop() {
    timer.shutdownNow();
  }

  private void poll() {
    if (appFolder.get() == null) return; // the application has no id yet
    try {
      Path request = new Path(ArrowTables.path(appFolder.get()), REQUEST);
      byte[] bytes = take(request);
      if (bytes == null) return;
      String text = new String(bytes, StandardCharsets.UTF_8);
      int end = text.indexOf('\n');
      Matcher first = FIRST_LINE.matcher(end < 0 ? text : text.substring(0, end));
      if (!first.matches() || bytes.length > REQUEST_MAX) {
        LOG.warn(
            "cloudprofiler: ignored {} (not a rules request of at most {} bytes)",
            request,
            REQUEST_MAX);
        return;
      }
      String answer = answer(first.group(2), end < 0 ? "" : text.substring(end + 1));
      ArrowTables.replace(
          appFolder.get() + "/rules-result-" + first.group(1) + ".txt",
          OWNER_ONLY,
          out -> out.write(answer.getBytes(StandardCharsets.UTF_8)));
      warned = false;
    } catch (Exception e) {
      if (!warned)
        LOG.warn("cloudprofiler: cannot read or answer rules requests in " + appFolder.get(), e);
      warned = true;
    }
  }

  /**
   * The request's bytes (at most one more than REQUEST_MAX), then the request is removed; null
   * where there is none. A local folder is read with java.nio: Hadoop's file system would load its
   * classes in the driver (about 0.6 s of CPU) a second after the application's start.
   */
  private static byte[] take(Path request) throws Exception {
    java.nio.file.Path local = ArrowTables.local(request);
    if (local != null) {
      byte[] bytes;
      try (InputStream in = Files.newInputStream(local, LinkOption.NOFOLLOW_LINKS)) {
        bytes = in.readNBytes(REQUEST_MAX + 1);
      } catch (NoSuchFileException e) {
        return null;
      }
      Files.delete(local);
      return bytes;
    }
    FileSystem fs = ArrowTables.fileSystem(request);
    byte[] bytes;
    try (InputStream in = fs.open(request)) {
      bytes = in.readNBytes(REQUEST_MAX + 1);
    } catch (FileNotFoundException e) {
      return null;
    }
    fs.delete(request, false);
    return bytes;
  }

  private String answer(String kind, String text) {
    if (kind.equals("get")) {
      Messages.RulesNow now = rules.now();
      return "rules " + now.version() + "\n" + now.text();
    }
    try {
      long version = rules.set(Config.rulesText(text));
      LOG.info(
          "cloudprofiler: rules version {} from a request in the application's folder: {}",
          version,
          text.strip().replace('\n', ';'));
      return "accepted " + version + "\n";
    } catch (RuntimeException e) {
      return "refused " + e.getMessage() + "\n";
    }
  }
}
