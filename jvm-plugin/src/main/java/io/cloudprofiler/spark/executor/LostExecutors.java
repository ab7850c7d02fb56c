package io.cloudprofiler.spark.executor;

import io.cloudprofiler.PrivateFiles;
import io.cloudprofiler.spark.Config;
import io.cloudprofiler.spark.DaemonThreads;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Instant;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Collects the local folders of executors on this host whose process is gone (SIGKILL, the OOM
 * killer): each running executor names its folder in {@code <localDir>/executors/<pid>} and removes
 * that name as it finishes, so a name whose process no longer runs belongs to a killed one. Its
 * folder names where its files go ({@link LogCollector#TARGET_FILE}); they are copied there, marked
 * as a lost process's, and removed. Runs off the task path, in a daemon thread of the executor (and
 * of the driver) as it starts.
 *
 * <p>Other users of the host may write in a shared localDir: only a names folder and names that
 * this user owns are followed, never through a link ({@link PrivateFiles}), and only into the
 * folders this library makes (an executor's folder under localDir, an inbox of its own); a name
 * that is another user's is left alone.
 */
public final class LostExecutors {
  private static final Logger LOG = LoggerFactory.getLogger(LostExecutors.class);
  private static final String INBOX_PREFIX = "cloudprofiler-inbox-";
  private static final Path SHARED_MEMORY = Path.of("/dev/shm");

  private LostExecutors() {}

  /** Told of each lost process whose files were collected, for the driver's tab. */
  public interface Collected {
    /** Process {@code pid}'s folder {@code folder}: {@code files} collected, {@code cut} cut. */
    void collected(long pid, String folder, int files, int cut) throws Exception;
  }

  /**
   * Collects, in a daemon thread, the folders of the dead executors named under {@code localDir},
   * telling {@code told} of each.
   */
  public static void collectInBackground(String localDir, Collected told) {
    DaemonThreads.start(
        "cloudprofiler-collect-lost",
        () -> collect(Path.of(localDir).toAbsolutePath().normalize(), told));
  }

  private static void collect(Path localDir, Collected told) {
    Path names = localDir.resolve(Config.EXECUTOR_FOLDERS);
    try {
      if (!Files.exists(names, LinkOption.NOFOLLOW_LINKS)) return;
      String why = PrivateFiles.untrustedFolder(names);
      if (why != null) {
        LOG.warn("cloudprofiler: collects no lost executor's logs on this host: {}", why);
        return;
      }
    } catch (Exception e) {
      LOG.warn("cloudprofiler: collects no lost executor's logs on this host: {}", e.toString());
      return;
    }
    File[] pointers = names.toFile().listFiles((dir, name) -> name.matches("[0-9]+"));
    if (pointers == null) return;
    for (File pointer : pointers) {
      try {
        if (PrivateFiles.untrustedFile(pointer.toPath()) != null) continue; // another user's
        if (!alive(Long.parseLong(pointer.getName()), pointer.lastModified())) {
          collectLost(localDir, pointer, told);
          removeInbox(names, pointer.getName());
        }
      } catch (Exception e) {
        LOG.warn(
            "cloudprofiler: could not collect the logs of the lost executor named in " + pointer,
            e);
      }
    }
  }

  /**
   * Removes a lost executor's inbox (shared memory that no process would free): the hand-off files
   * its Python workers left there had no executor left to write them, which one log line says. Only
   * an inbox folder of this user, where the library makes them (in /dev/shm or beside the names),
   * and only this user's files in it.
   */
  private static void removeInbox(Path names, String pid) throws Exception {
    Path pointer = names.resolve(pid + Config.INBOX_SUFFIX);
    if (!Files.exists(pointer, LinkOption.NOFOLLOW_LINKS)) return;
    if (PrivateFiles.untrustedFile(pointer) != null) return; // another user's
    Path inbox = Path.of(PrivateFiles.readOwned(pointer).trim());
    Files.delete(pointer);
    if (!inbox.isAbsolute()
        || !inbox.equals(inbox.normalize())
        || !inbox.getFileName().toString().startsWith(INBOX_PREFIX)
        || !(SHARED_MEMORY.equals(inbox.getParent()) || names.equals(inbox.getParent()))) {
      LOG.warn(
          "cloudprofiler: left {}, named as the inbox of lost process {}: not an inbox",
          inbox,
          pid);
      return;
    }
    if (!Files.exists(inbox, LinkOption.NOFOLLOW_LINKS)) return;
    String why = PrivateFiles.untrustedFolder(inbox);
    if (why != null) {
      LOG.warn("cloudprofiler: left the inbox of lost process {}: {}", pid, why);
      return;
    }
    int removed = 0;
    File[] files = inbox.toFile().listFiles();
    for (File f : files == null ? new File[0] : files) {
      if (PrivateFiles.untrustedFile(f.toPath()) == null && f.delete()) removed++;
    }
    Files.deleteIfExists(inbox); // fails, and stays, with another user's files in it
    if (removed > 1) // more than the owner's name: workers' hand-off files
    LOG.warn(
          "cloudprofiler: removed the inbox {} of lost process {}: {} files, the hand-off files of"
              + " its Python workers among them, whose records no executor was left to write",
          inbox,
          pid,
          removed);
  }

  /**
   * Whether process {@code pid} runs and started before its name was written (else the pid is
   * another's now).
   */
  private static boolean alive(long pid, long namedAtMs) {
    Optional<Instant> started = ProcessHandle.of(pid).flatMap(p -> p.info().startInstant());
    return ProcessHandle.of(pid).isPresent()
        && started.map(s -> s.toEpochMilli() <= namedAtMs).orElse(true);
  }

  /**
   * The executor's folder named in a pointer: a folder under {@code localDir} that this user owns
   * and no other can write, nor any folder between (else another could swap it).
   */
  private static Path executorFolder(Path localDir, String named) throws Exception {
    Path folder = Path.of(named);
    if (!folder.isAbsolute()
        || !folder.equals(folder.normalize())
        || !folder.startsWith(localDir)
        || folder.equals(localDir)) {
      throw new IllegalStateException(named + " is not a folder under " + localDir);
    }
    for (Path p = folder; !p.equals(localDir); p = p.getParent()) {
      String why = PrivateFiles.untrustedFolder(p);
      if (why != null)
        throw new IllegalStateException("refusing to collect " + folder + ": " + why);
    }
    return folder;
  }

  /**
   * Claims the name (a rename: one collector wins), collects the folder, and gives the name back on
   * failure so that a later start tries again.
   */
  private static void collectLost(Path localDir, File pointer, Collected told) throws Exception {
    long self = ProcessHandle.current().pid();
    File claim = new File(pointer.getParentFile(), "." + pointer.getName() + ".collecting-" + self);
    try {
      Files.move(pointer.toPath(), claim.toPath(), StandardCopyOption.ATOMIC_MOVE);
    } catch (Exception takenByAnother) {
      return;
    }
    boolean done = false;
    try {
      String named = PrivateFiles.readOwned(claim.toPath()).trim();
      Path folder;
      try {
        folder = executorFolder(localDir, named);
      } catch (Exception e) { // not one this library made: dropped, never followed
        LOG.warn(
            "cloudprofiler: left {}, named by lost process {}: {}",
            named,
            pointer.getName(),
            e.getMessage());
        done = true;
        return;
      }
      Path target = folder.resolve(LogCollector.TARGET_FILE);
      if (!Files.exists(
          target, LinkOption.NOFOLLOW_LINKS)) { // nothing logged, or collected already
        done = true;
        return;
      }
      LogCollector collector =
          new LogCollector(folder.toFile(), PrivateFiles.readOwned(target).trim());
      done = collector.collectAll(true);
      if (done) {
        LOG.info(
            "cloudprofiler: collected the logs of lost process {} from {} into {}",
            pointer.getName(),
            folder,
            collector.target());
        int[] counts = collector.collectedAndCut();
        try {
          told.collected(
              Long.parseLong(pointer.getName()),
              folder.getFileName().toString(),
              counts[0],
              counts[1]);
        } catch (Exception e) { // the tab's loss: the files are collected all the same
          LOG.info(
              "cloudprofiler: could not tell the driver of lost process {}", pointer.getName());
        }
      }
    } finally {
      if (done) claim.delete();
      else Files.move(claim.toPath(), pointer.toPath(), StandardCopyOption.ATOMIC_MOVE);
    }
  }
}
