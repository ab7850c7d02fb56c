package io.cloudprofiler.spark.executor;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.PrivateFiles;
import io.cloudprofiler.spark.Config;
import java.io.File;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What an executor tells the Python workers it starts (their parent or grandparent is this
 * process), in files that cloudprofiler.spark.worker reads: {@code <localDir>/executors/<pid>}
 * names this executor's folder, {@code <pid>.inbox} the folder of the library's inbox, where they
 * hand their records over through shared memory, and {@code <pid>.rules} the rules this executor
 * follows. Where the names folder is not this user's alone, none of them is written, and the
 * workers log to files of their own (said in one log line).
 */
final class PythonWorkerFiles {
  private static final Logger LOG = LoggerFactory.getLogger(CloudProfilerExecutorPlugin.class);

  private final String executorId;
  private final String localDir;

  /** The names folder is this user's alone: the files below may be written. */
  private final boolean named;

  /** The rules file, null when nothing is named. */
  private final File rulesFile;

  /** Names the inbox's folder (null: no inbox). */
  private File inboxPointer;

  /** Names this executor's folder (null: not named). */
  private File pointer;

  PythonWorkerFiles(String executorId, String localDir) {
    this.executorId = executorId;
    this.localDir = localDir;
    this.named = namesFolder();
    this.rulesFile = named ? besideName(Config.RULES_FILE_SUFFIX) : null;
  }

  /**
   * Creates {@code <localDir>/executors} (0700), or checks that an existing one is this user's and
   * no other user can write to it (else another could name a folder or an inbox to this executor's
   * Python workers, or to the collector of a killed executor); false, said in one log line, when it
   * is not: this executor then names nothing for its Python workers, which log to files of their
   * own.
   */
  private boolean namesFolder() {
    try {
      PrivateFiles.folder(new File(localDir, Config.EXECUTOR_FOLDERS).toPath());
      return true;
    } catch (Exception e) {
      workersOnTheirOwn("names no folder nor inbox for its Python workers", e.getMessage());
      return false;
    }
  }

  /** Says why this executor's Python workers log to files of their own: one log line. */
  private void workersOnTheirOwn(String what, String why) {
    LOG.warn(
        "cloudprofiler: executor {} {} (they log to files of their own): {}",
        executorId,
        what,
        why);
  }

  /** {@code <localDir>/executors/<pid><suffix>}: what this executor tells its Python workers. */
  private File besideName(String suffix) {
    return new File(
        new File(localDir, Config.EXECUTOR_FOLDERS), ProcessHandle.current().pid() + suffix);
  }

  /**
   * Starts the library's inbox, in shared memory where the host has it, and names its folder in
   * {@code <localDir>/executors/<pid>.inbox} for the Python workers; none (they then log to files
   * of their own) when nothing is named or it cannot start.
   */
  void startInbox(String appId) {
    if (!named) return;
    File shm = new File("/dev/shm");
    // the application in its name: a folder left by a killed executor whose pid comes again is not
    // taken over
    String leaf = "cloudprofiler-inbox-" + appId + "-" + ProcessHandle.current().pid();
    File dir =
        shm.isDirectory() && shm.canWrite()
            ? new File(shm, leaf)
            : new File(new File(localDir, Config.EXECUTOR_FOLDERS), leaf);
    File pointer = besideName(Config.INBOX_SUFFIX);
    try {
      CloudProfiler.inboxStart(dir.getPath());
      writeInPlace(pointer, dir.toPath().toAbsolutePath().normalize().toString());
      inboxPointer = pointer;
    } catch (Exception e) {
      workersOnTheirOwn("takes no records of Python workers in " + dir, e.toString());
    }
  }

  /**
   * Writes {@code <localDir>/executors/<pid>}, naming this executor's folder, for the Python
   * workers it starts, when anything is named.
   */
  void pointTo(File local) {
    if (!named) return;
    File target = besideName("");
    try {
      writeInPlace(target, local.toPath().toAbsolutePath().normalize().toString());
      pointer = target;
    } catch (Exception e) { // Python workers then log where CLOUDPROFILER_LOG_DIR says, uncollected
      LOG.warn(
          "cloudprofiler: executor {} could not name its folder for Python workers in {}: {}",
          executorId,
          target,
          e.toString());
    }
  }

  /**
   * Writes {@code text} to {@code target}, renamed into place, so that a reader never reads half of
   * it.
   */
  private static void writeInPlace(File target, String text) throws Exception {
    PrivateFiles.writeInPlace(target.toPath(), text);
  }

  /**
   * The rules this executor follows, in {@code <localDir>/executors/<pid>.rules}: its Python
   * workers follow that file (CLOUDPROFILER_RULES, set by cloudprofiler.spark.worker).
   */
  void writeRules(String text) {
    if (rulesFile == null) return; // no names folder of this user's: said once
    try {
      writeInPlace(rulesFile, text);
    } catch (Exception e) {
      LOG.warn(
          "cloudprofiler: executor {} could not write its rules for Python workers to {}: {}",
          executorId,
          rulesFile,
          e.toString());
    }
  }

  /** Unnames the inbox, before the library's stop takes what the workers handed over. */
  void removeInboxName() {
    if (inboxPointer != null) inboxPointer.delete();
  }

  /**
   * Unnames this executor's folder and removes the rules file: after the folder's last copy, so
   * that a process killed during it leaves its folder named.
   */
  void removeNames() {
    if (pointer != null) pointer.delete();
    if (rulesFile != null) rulesFile.delete();
  }
}
