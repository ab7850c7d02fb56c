package io.cloudprofiler;

/**
 * The C API of libcloudprofiler, one method per function (see native/include/cloudprofiler.h).
 * Channels are {@code long} handles; logging to a closed handle is a counted no-op. Call {@link
 * NativeLoader#load} first.
 */
public final class CloudProfiler {
  /**
   * The CP_VERSION_NUMBER this class was written for; the loader refuses another major/minor
   * version.
   */
  public static final int VERSION_NUMBER = 100;

  public static final int COMPRESSION_NONE = 0;
  public static final int COMPRESSION_ZSTD = 1;
  public static final int FULL_BLOCK = 0;
  public static final int FULL_DROP = 1;
  public static final int TSC_ORDERED = 0;
  public static final int TSC_UNORDERED = 1;

  private CloudProfiler() {}

  public static native int version();

  /**
   * Starts the library; 0 for blockRecords/channelBlocks and -1 for rollBytes mean the library's
   * default.
   */
  public static native void start(
      String logDir,
      int compression,
      int channelBlocks,
      int blockRecords,
      int fullPolicy,
      int tscRead,
      long rollBytes);

  public static native String logDir();

  /**
   * The library's number of a handler name (cp_handler_from_name); throws, naming the handlers, for
   * an unknown one.
   */
  public static native int handlerFromName(String name);

  /**
   * Throws, naming the bad value, unless openChannel would accept these parameters for the handler
   * (cp_handler_check): their number and their ranges.
   */
  public static native void checkHandler(int handler, long[] params);

  public static native long openChannel(
      String name, String handler, long[] params, String[] metaKeys, String[] metaValues);

  /**
   * Takes the hand-off channels that processes of this host (Python workers) open in {@code dir}
   * into channels of this library (cp_inbox_start).
   */
  public static native void inboxStart(String dir);

  /**
   * Replaces the rules in force (cp_rules_set): one rule a line, {@code
   * pattern=handler[:param...]}, the first match wins. Throws, naming the bad rule, and the rules
   * in force stay. Open channels opened by rules whose handler changes switch to a new file.
   */
  public static native void setRules(String rules);

  /** The rules in force, one a line (cp_rules_get). */
  public static native String rules();

  /** A channel whose handler the rules in force choose by its name (cp_channel_open_by_rules). */
  public static native long openByRules(String name, String[] metaKeys, String[] metaValues);

  /** The handler the channel logs with now, as its number (cp_channel_handler). */
  public static native int channelHandler(long channel);

  public static native void log(long channel, long tupleId);

  public static native void logMany(long channel, long[] tupleIds);

  /**
   * A record whose TSC was read earlier with {@link #tsc} (cp_log_at): for events before their
   * channel opened.
   */
  public static native void logAt(long channel, long tupleId, long tsc);

  public static native void parameterize(long channel, int index, long value);

  public static native void flush(long channel);

  public static native void close(long channel);

  public static native void flushAll();

  public static native void stop();

  /** logged, kept, written, dropped, afterClose, bytesWritten. */
  public static native long[] stats(long channel);

  /**
   * Summed over every channel this process opened (hand-off channels included): channelsOpened,
   * channelsOpen, nullHandleLogs, dropped, bytesWritten, logged; and the hops samples' scan of the
   * records (off the logging path): sampleScanned (records), sampleScanTicks (its time in TSC
   * ticks).
   */
  public static native long[] libraryStats();

  /**
   * Every channel this process opened, open or closed, newest first (cp_channel_counts): {String[]
   * names, long[] logged, long[] dropped}, one element each; a name may repeat (channels of one
   * name, such as each Python worker's hand-off channel).
   */
  public static native Object[] channelCounts();

  /**
   * The channels' samples since the last take (cp_channel_samples_take): {String[] names (distinct
   * channel names), int[] levels (per name: the highest level of its channels), int[] nameOfSample,
   * long[] ids, long[] tscs}.
   */
  public static native Object[] takeSamples();

  public static native String channelPath(long channel);

  public static native long tsc();

  public static native double tscHz();

  /**
   * This process's TSC simulation as its files' metadata states it (tsc.simulation): "null", or
   * JSON {offset, skew_ppm, invariant}.
   */
  public static native String tscSimulation();

  /**
   * Throws, with the reason, unless the CPU has an invariant TSC or {@code force} is set
   * (cp_require_invariant_tsc).
   */
  public static native void requireInvariantTsc(boolean force);

  /**
   * A paired reading (cp_clock_read): tsc, CLOCK_MONOTONIC_RAW ns, CLOCK_REALTIME ns, uncertainty
   * in ticks, CPU id.
   */
  public static native long[] clockRead();

  /** Starts a MinRTT probe responder on address:port (0: any free port); returns its handle. */
  public static native long responderStart(String address, int port, byte[] secret);

  public static native int responderPort(long responder);

  public static native void responderStop(long responder);

  /**
   * Probes a responder: (send, remote, recv) TSCs per probe, recv 0 where unanswered; spinning for
   * each answer, or asleep until it comes.
   */
  public static native long[] probePeer(
      String address, int port, int count, int timeoutMs, byte[] secret, boolean spin);
}
