package io.cloudprofiler.harness.source;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.cloudprofiler.spark.sql.SourceRows;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * One connection to one serve-mode emitter of the generator: its request-reply protocol
 * (harness/generator/wire.py), each request one JSON frame with an id, each reply a JSON frame
 * echoing it and the data frames. A reply that does not come within the timeout fails naming the
 * emitter; a refused request fails with the emitter's reason. Connected on the first request, and
 * again after a broken connection.
 */
final class EmitterClient implements AutoCloseable {
  /** What an emitter may state as its clock's boot id and simulation ({@link #clock}). */
  private static final Pattern BOOT_ID = Pattern.compile("[0-9A-Za-z-]{1,64}");

  private static final int MAX_SIMULATION_CHARS = 256;

  static final int DATA = 1;

  /** A bucket: its header (wire.HEADER, little-endian) and its Arrow record batch message. */
  record Bucket(int kind, long firstId, long tuples, long tsc, long wallNs, byte[] payload) {
    static Bucket of(byte[] header, byte[] payload) {
      ByteBuffer b = ByteBuffer.wrap(header).order(ByteOrder.LITTLE_ENDIAN);
      // kind, 3 bytes of padding, emitter, seq, first id, tuples, emission TSC, emission wall clock
      return new Bucket(
          b.get(0), b.getLong(16), b.getLong(24), b.getLong(32), b.getLong(40), payload);
    }
  }

  /** A reply: its JSON frame and its data frames. */
  record Reply(JsonNode state, List<byte[]> data) {}

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final long RECONNECT_MS = 100;

  /** A reply's state and the payloads' schema: JSON and an Arrow schema message, a few KiB. */
  static final long CONTROL_FRAME_BYTES = 1 << 20;

  /** The size of a bucket's header frame (wire.HEADER). */
  static final int HEADER_BYTES = 48;

  /** The frames of the longest reply: its state and the most buckets a fetch asks for. */
  static final int MAX_FRAMES = 1 + 2 * (int) BucketReader.MAX_FETCH_BUCKETS;

  private final String endpoint;
  private final double timeoutS;
  private final ZmtpDealer.Limits limits;
  private final long bucketTuples, bucketBytes;
  private ZmtpDealer dealer;
  private long nextRid;

  /** A client for the driver's requests (state, schema, commit): no buckets. */
  EmitterClient(String endpoint, double timeoutS) {
    this(endpoint, timeoutS, 0, 0);
  }

  /**
   * A client that fetches buckets of at most {@code bucketTuples} tuples, {@code bucketBytes} bytes
   * of payload ({@link PayloadSchema#maxBucketBytes}): a longer frame or a bigger bucket fails the
   * query naming the emitter, before it is read.
   */
  EmitterClient(String endpoint, double timeoutS, long bucketTuples, long bucketBytes) {
    ZmtpDealer.address(endpoint);
    this.endpoint = endpoint;
    this.timeoutS = timeoutS;
    this.bucketTuples = bucketTuples;
    this.bucketBytes = bucketBytes;
    this.limits =
        bucketBytes > CONTROL_FRAME_BYTES
            ? new ZmtpDealer.Limits(
                MAX_FRAMES,
                bucketBytes,
                "the most a bucket of "
                    + bucketTuples
                    + " tuples of this query's payload columns can take")
            : new ZmtpDealer.Limits(
                MAX_FRAMES,
                CONTROL_FRAME_BYTES,
                bucketTuples > 0
                    ? "the most a reply's state or a bucket of "
                        + bucketTuples
                        + " tuples of this query's payload columns can take"
                    : "the most a reply's state or the payloads' schema can take");
  }

  Reply request(String op, Map<String, Long> fields) {
    long rid = nextRid++;
    ObjectNode request = JSON.createObjectNode().put("op", op).put("rid", rid);
    fields.forEach(request::put);
    long deadline = System.nanoTime() + (long) (timeoutS * 1e9);
    while (true) {
      try {
        return exchange(op, rid, JSON.writeValueAsBytes(request));
      } catch (IOException e) {
        close();
        if (ZmtpDealer.timedOut(e) || System.nanoTime() > deadline)
          throw new UncheckedIOException(
              "cloudprofiler source: no reply from the emitter at "
                  + endpoint
                  + " within "
                  + timeoutS
                  + " s (is the generator running with --serve?): "
                  + e,
              e);
      }
      // as a ZeroMQ socket does, a refused or broken connection is tried again (every request is
      // idempotent) until the timeout
      try {
        Thread.sleep(RECONNECT_MS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("cloudprofiler source: interrupted asking " + endpoint, e);
      }
    }
  }

  private Reply exchange(String op, long rid, byte[] request) throws IOException {
    if (dealer == null) dealer = new ZmtpDealer(endpoint, (int) Math.ceil(timeoutS * 1000));
    dealer.send(request);
    while (true) { // replies to requests that timed out earlier are skipped by their id
      List<byte[]> frames = dealer.receive(limits);
      JsonNode state = JSON.readTree(frames.get(0));
      if (state.path("rid").asLong(-1) != rid) continue;
      if (state.has("error"))
        throw new IllegalStateException(
            "cloudprofiler source: the emitter at "
                + endpoint
                + " refused "
                + op
                + ": "
                + state.get("error").asText());
      return new Reply(state, frames.subList(1, frames.size()));
    }
  }

  /** The emitter's state: latest offset, tuples per bucket, whether its period finished. */
  JsonNode latest() {
    return request("latest", Map.of()).state();
  }

  /** The Arrow IPC schema message of the payloads. */
  byte[] payloadSchema() {
    return request("info", Map.of()).data().get(0);
  }

  /**
   * Whose TSC the buckets' headers carry, as the emitter states it; null where it stamps another
   * clock (the monotonic clock, without the native library), says nothing of it (an older one) or
   * says it in a form no process's log files use (a boot id is a UUID, a simulation a short JSON
   * object): what it sends goes into log files' metadata.
   */
  SourceRows.Clock clock() {
    JsonNode clock = request("info", Map.of()).state().path("clock");
    String boot = clock.path("boot_id").asText(""),
        simulation = clock.path("simulation").toString();
    if (!BOOT_ID.matcher(boot).matches() || simulation.length() > MAX_SIMULATION_CHARS) return null;
    if (!simulation.equals("null") && !clock.path("simulation").isObject()) return null;
    return new SourceRows.Clock(boot, simulation);
  }

  void commit(long upto) {
    request("commit", Map.of("upto", upto));
  }

  /** Up to {@code most} buckets of offsets [from, to), pills included. */
  List<Bucket> fetch(long from, long to, long most) {
    Reply reply = request("fetch", Map.of("from", from, "to", to, "max", most));
    int count = reply.state().path("count").asInt();
    if (count < 0 || count > most || reply.data().size() != 2 * count)
      throw refused(
          "a reply of "
              + count
              + " buckets in "
              + reply.data().size()
              + " data frames to a fetch of at most "
              + most
              + " (two frames a bucket)");
    List<Bucket> buckets = new ArrayList<>(count);
    for (int i = 0; i < count; i++) {
      byte[] header = reply.data().get(2 * i), payload = reply.data().get(2 * i + 1);
      if (header.length != HEADER_BYTES)
        throw refused("a bucket header of " + header.length + " bytes, not " + HEADER_BYTES);
      Bucket bucket = Bucket.of(header, payload);
      if (bucket.tuples() < 0 || bucket.tuples() > bucketTuples)
        throw refused(
            "a bucket of " + bucket.tuples() + " tuples, more than its buckets' " + bucketTuples);
      if (payload.length > bucketBytes)
        throw refused(
            "a bucket of "
                + payload.length
                + " bytes, more than "
                + bucketBytes
                + " ("
                + limits.why()
                + ")");
      buckets.add(bucket);
    }
    return buckets;
  }

  private IllegalStateException refused(String what) {
    close();
    return new IllegalStateException(
        "cloudprofiler source: the emitter at " + endpoint + " sent " + what);
  }

  @Override
  public void close() {
    if (dealer == null) return;
    try {
      dealer.close();
    } catch (IOException e) {
      // closing a socket that failed: nothing more to release
    }
    dealer = null;
  }
}
