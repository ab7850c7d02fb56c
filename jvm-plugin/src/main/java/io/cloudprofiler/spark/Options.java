package io.cloudprofiler.spark;

import io.cloudprofiler.CloudProfiler;
import java.util.List;
import java.util.stream.Stream;

/**
 * The spark.cloudprofiler.* options of one process, read and checked once by {@link Config#read}:
 * each field typed, each default filled in. {@code channelHandlers} holds the trace channels'
 * handlers that the configuration names; {@code rules} the rules for the others, one a line.
 */
public record Options(
    String logDir,
    String localDir,
    boolean taskEnabled,
    boolean uiEnabled,
    boolean pythonHandoff,
    Config.HandlerOption taskHandler,
    List<Config.HandlerOption> channelHandlers,
    String rules,
    Config.Compression compression,
    Config.TscRead tscRead,
    int channelBlocks,
    long rollBytes,
    int collectIntervalSeconds,
    boolean calibrationEnabled,
    boolean calibrationForce,
    int calibrationIntervalSeconds,
    int calibrationProbes,
    int calibrationTimeoutMs,
    int calibrationPeers,
    String nativePath) {

  /**
   * Starts this process's library logging into {@code folder} with these options (compression,
   * blocks, TSC read, roll size); a RuntimeException says why it could not.
   */
  public void startLibrary(String folder) {
    CloudProfiler.start(
        folder,
        compression == Config.Compression.ZSTD
            ? CloudProfiler.COMPRESSION_ZSTD
            : CloudProfiler.COMPRESSION_NONE,
        channelBlocks,
        0,
        CloudProfiler.FULL_BLOCK,
        tscRead == Config.TscRead.UNORDERED
            ? CloudProfiler.TSC_UNORDERED
            : CloudProfiler.TSC_ORDERED,
        rollBytes);
  }

  /** The task handler and every trace channel's handler. */
  public List<Config.HandlerOption> handlers() {
    return Stream.concat(Stream.of(taskHandler), channelHandlers.stream()).toList();
  }
}
