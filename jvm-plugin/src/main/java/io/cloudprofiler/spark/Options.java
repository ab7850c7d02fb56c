package io.cloudprofiler.spark;

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

  /** The task handler and every trace channel's handler. */
  public List<Config.HandlerOption> handlers() {
    return Stream.concat(Stream.of(taskHandler), channelHandlers.stream()).toList();
  }
}
