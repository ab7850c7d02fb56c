package io.cloudprofiler.spark.ui;

import io.cloudprofiler.PrivateFiles;
import io.cloudprofiler.spark.tables.ArrowTables;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFileAttributes;
import java.time.Instant;

/**
 * The full report (the HTML page of {@code cloudprofiler report}, {@code cps.report(spark)}) as a
 * download of the tab: the analysis places a copy of each report it writes in the application's
 * folder under {@value #FILE}, where the tab finds the latest. Only a local folder's: a regular
 * file (not a link) of the folder's owner, in a folder that is no link, at most {@link #MAX_BYTES}.
 * The History Server takes the folder from the event log, so it serves only what the application's
 * user wrote there, where it may read it.
 */
public final class ReportDownload {
  /** The report's file in the application's folder (declared for the analysis in tables.json). */
  public static final String FILE = "cloudprofiler-report.html";

  /** Larger reports are not served (the demo's is 2-4 MB). */
  static final long MAX_BYTES = 256L << 20;

  private static final LinkOption NOFOLLOW = LinkOption.NOFOLLOW_LINKS;

  /** A report found: its file, size and when it was written. */
  record Found(Path file, long bytes, Instant written) {}

  private ReportDownload() {}

  /** The report in {@code appFolder}; null where there is none that can be served. */
  static Found find(String appFolder) {
    Path folder = localFolder(appFolder);
    if (folder == null) return null;
    try {
      PosixFileAttributes f = Files.readAttributes(folder, PosixFileAttributes.class, NOFOLLOW);
      Path file = folder.resolve(FILE);
      PosixFileAttributes a = Files.readAttributes(file, PosixFileAttributes.class, NOFOLLOW);
      if (!f.isDirectory()
          || !a.isRegularFile()
          || PrivateFiles.owner(file) != PrivateFiles.owner(folder)
          || a.size() > MAX_BYTES) return null;
      return new Found(file, a.size(), a.lastModifiedTime().toInstant());
    } catch (IOException | UnsupportedOperationException e) {
      return null; // none yet, or not this user's to read
    }
  }

  /**
   * The page served at the tab's {@code report}: the report, or a short page that says how to make
   * one.
   */
  static String page(String appFolder) {
    Found found = find(appFolder);
    if (found != null) {
      try (InputStream in = Files.newInputStream(found.file(), StandardOpenOption.READ, NOFOLLOW)) {
        byte[] bytes = in.readNBytes((int) MAX_BYTES + 1);
        if (bytes.length <= MAX_BYTES) return new String(bytes, StandardCharsets.UTF_8);
      } catch (IOException e) {
        // gone or replaced since find: said as if there were none
      }
    }
    return "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>No Cloudprofiler"
        + " report</title></head><body><p>No report of this application yet. "
        + TabContent.escape(howToMake(appFolder))
        + "</p></body></html>";
  }

  /** How a user makes the report that the tab then offers. */
  static String howToMake(String appFolder) {
    return "Make one with cps.report(spark) in the application's session, or with: cloudprofiler"
        + " report "
        + appFolder
        + " (the tab offers the latest for download).";
  }

  /**
   * The folder as a local path, as the plugin writes there; null for a folder of another file
   * system (hdfs:, s3a:...).
   */
  private static Path localFolder(String appFolder) {
    if (appFolder == null || appFolder.isEmpty()) return null;
    try {
      return ArrowTables.local(ArrowTables.path(appFolder));
    } catch (Exception e) {
      return null;
    }
  }
}
