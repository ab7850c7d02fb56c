package io.cloudprofiler.spark;

import java.io.File;
import java.nio.file.Files;
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
 */
final class LostExecutors {
  private static final Logger LOG = LoggerFactory.getLogger(LostExecutors.class);

  private LostExecutors() {}

  /**
   * Collects, in a daemon thread, the folders of the dead executors named under {@code localDir}.
   */
  static void collectInBackground(String localDir) {
    DaemonThreads.start(
        "cloudprofiler-collect-lost", () -> collect(new File(localDir, Config.EXECUTOR_FOLDERS)));
  }

  private static void collect(File names) {
    File[] pointers = names.listFiles((dir, name) -> name.matches("[0-9]+"));
    if (pointers == null) return;
    for (File pointer : pointers) {
      try {
        if (!alive(Long.parseLong(pointer.getName()), pointer.lastModified())) {
          collectLost(pointer);
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
   * its Python workers left there had no executor left to write them, which one log line says.
   */
  private static void removeInbox(File names, String pid) throws Exception {
    File pointer = new File(names, pid + Config.INBOX_SUFFIX);
    if (!pointer.exists()) return;
    File inbox = new File(Files.readString(pointer.toPath()).trim());
    File[] files = inbox.listFiles();
    for (File f : files == null ? new File[0] : files) f.delete();
    inbox.delete();
    pointer.delete();
    if (files != null && files.length > 1) // more than the owner's name: workers' hand-off files
    LOG.warn(
          "cloudprofiler: removed the inbox {} of lost process {}: {} files, the hand-off files of"
              + " its Python workers among them, whose records no executor was left to write",
          inbox,
          pid,
          files.length);
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
   * Claims the name (a rename: one collector wins), collects the folder, and gives the name back on
   * failure so that a later start tries again.
   */
  private static void collectLost(File pointer) throws Exception {
    long self = ProcessHandle.current().pid();
    File claim = new File(pointer.getParentFile(), "." + pointer.getName() + ".collecting-" + self);
    try {
      Files.move(pointer.toPath(), claim.toPath(), StandardCopyOption.ATOMIC_MOVE);
    } catch (Exception takenByAnother) {
      return;
    }
    boolean done = false;
    try {
      File folder = new File(Files.readString(claim.toPath()).trim());
      File target = new File(folder, LogCollector.TARGET_FILE);
      if (!target.exists()) { // nothing was logged, or it was collected already
        done = true;
        return;
      }
      LogCollector collector = new LogCollector(folder, Files.readString(target.toPath()).trim());
      done = collector.collectAll(true);
      if (done)
        LOG.info(
            "cloudprofiler: collected the logs of lost process {} from {} into {}",
            pointer.getName(),
            folder,
            collector.target());
    } finally {
      if (done) claim.delete();
      else Files.move(claim.toPath(), pointer.toPath(), StandardCopyOption.ATOMIC_MOVE);
    }
  }
}
