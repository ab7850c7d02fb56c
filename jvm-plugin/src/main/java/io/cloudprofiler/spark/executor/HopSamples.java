package io.cloudprofiler.spark.executor;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.spark.Messages;
import io.cloudprofiler.spark.sql.OperatorRows;
import java.io.File;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * The records this executor's library kept for the hops' latency since the last take, per trace
 * channel (not the task channels, nor the operators' rows, which lie along chains of their own: as
 * the analysis's pipeline), at most {@code CP_SAMPLES_PER_CHANNEL} a channel (4.4 KB on the wire)
 * and {@value #CHANNELS} channels, those with the most samples (the others' are let go), with those
 * its Python workers of files of their own left in its folder ({@link WorkerSamples}). Called from
 * the collection thread only, and by the driver's own library where no executor shares its JVM
 * (DriverLibrary).
 */
public final class HopSamples {
  static final int CHANNELS = ChannelRates.SENT;

  private HopSamples() {}

  /** {@code workers}: the folder where Python workers leave theirs, null for none. */
  public static List<Messages.ChannelSamples> take(File workers) {
    List<Messages.ChannelSamples> out = own();
    if (workers != null) out.addAll(WorkerSamples.take(workers));
    if (out.size() > CHANNELS) {
      out.sort(Comparator.comparingInt((Messages.ChannelSamples c) -> c.ids().length).reversed());
      out = out.subList(0, CHANNELS);
    }
    return out;
  }

  private static List<Messages.ChannelSamples> own() {
    Object[] taken = CloudProfiler.takeSamples();
    if (taken == null) return new ArrayList<>();
    String[] names = (String[]) taken[0];
    int[] levels = (int[]) taken[1], nameOf = (int[]) taken[2];
    long[] ids = (long[]) taken[3], ticks = (long[]) taken[4];
    int[] start = new int[names.length + 1]; // the samples of name c at order[start[c]..start[c+1])
    for (int n : nameOf) start[n + 1]++;
    for (int c = 0; c < names.length; c++) start[c + 1] += start[c];
    int[] next = start.clone(), order = new int[nameOf.length];
    for (int i = 0; i < nameOf.length; i++) order[next[nameOf[i]]++] = i;
    List<Messages.ChannelSamples> out = new ArrayList<>();
    for (int c = 0; c < names.length; c++) {
      int n = start[c + 1] - start[c];
      if (n == 0
          || TaskRecords.CHANNELS.contains(names[c])
          || names[c].startsWith(OperatorRows.CHANNEL_PREFIX)) continue;
      long[] channelIds = new long[n], channelTicks = new long[n];
      for (int k = 0; k < n; k++) {
        channelIds[k] = ids[order[start[c] + k]];
        channelTicks[k] = ticks[order[start[c] + k]];
      }
      out.add(new Messages.ChannelSamples(names[c], levels[c], channelIds, channelTicks));
    }
    return out;
  }
}
