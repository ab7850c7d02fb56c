package io.cloudprofiler.harness.source;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * A ZeroMQ DEALER socket's side of one TCP connection to a ROUTER (ZMTP 3.0, NULL security): the
 * generator's emitters are ROUTER sockets, and this is all of ZeroMQ that reading them from the JVM
 * takes, so the plugin jar carries no ZeroMQ library. Every wait is bounded by {@code timeoutMs}.
 */
final class ZmtpDealer implements AutoCloseable {
  private static final int FLAG_MORE = 1;
  private static final int FLAG_LONG = 2;
  private static final int FLAG_COMMAND = 4;
  private static final int GREETING_BYTES = 64;

  private final String endpoint;
  private final Socket socket;
  private final DataInputStream in;
  private final DataOutputStream out;

  /** Connects to {@code tcp://host:port} and completes the ZMTP handshake. */
  ZmtpDealer(String endpoint, int timeoutMs) throws IOException {
    this.endpoint = endpoint;
    InetSocketAddress address = address(endpoint);
    socket = new Socket();
    try {
      socket.setTcpNoDelay(true);
      socket.setSoTimeout(timeoutMs);
      socket.connect(address, timeoutMs);
      in = new DataInputStream(new BufferedInputStream(socket.getInputStream(), 1 << 16));
      out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream(), 1 << 16));
      handshake();
    } catch (IOException | RuntimeException e) {
      socket.close();
      throw e;
    }
  }

  /** The address of a {@code tcp://host:port} endpoint; anything else is refused naming it. */
  static InetSocketAddress address(String endpoint) {
    String prefix = "tcp://";
    int colon = endpoint.lastIndexOf(':');
    int port = -1;
    if (endpoint.startsWith(prefix) && colon > prefix.length()) {
      try {
        port = Integer.parseInt(endpoint.substring(colon + 1));
      } catch (NumberFormatException e) {
        port = -1;
      }
    }
    if (port <= 0 || port > 65535)
      throw new IllegalArgumentException(
          "bad emitter endpoint '" + endpoint + "': expected tcp://host:port");
    InetSocketAddress address =
        new InetSocketAddress(endpoint.substring(prefix.length(), colon), port);
    if (address.isUnresolved())
      throw new IllegalArgumentException(
          "bad emitter endpoint '" + endpoint + "': unknown host " + address.getHostString());
    return address;
  }

  private void handshake() throws IOException {
    byte[] greeting = new byte[GREETING_BYTES];
    greeting[0] = (byte) 0xFF;
    greeting[9] = 0x7F;
    greeting[10] = 3; // version 3.0
    byte[] mechanism = "NULL".getBytes(StandardCharsets.US_ASCII);
    System.arraycopy(mechanism, 0, greeting, 12, mechanism.length);
    out.write(greeting);
    byte[] ready = readyCommand();
    out.writeByte(FLAG_COMMAND);
    out.writeByte(ready.length);
    out.write(ready);
    out.flush();
    byte[] theirs = new byte[GREETING_BYTES];
    in.readFully(theirs);
    if ((theirs[0] & 0xFF) != 0xFF || theirs[9] != 0x7F || theirs[10] < 3)
      throw new IOException(endpoint + " is not a ZeroMQ 3 endpoint (unexpected greeting)");
  }

  private static byte[] readyCommand() {
    ByteArrayOutputStream body = new ByteArrayOutputStream();
    shortString(body, "READY");
    property(body, "Socket-Type", "DEALER");
    return body.toByteArray();
  }

  private static void shortString(ByteArrayOutputStream body, String text) {
    byte[] bytes = text.getBytes(StandardCharsets.US_ASCII);
    body.write(bytes.length);
    body.write(bytes, 0, bytes.length);
  }

  private static void property(ByteArrayOutputStream body, String name, String value) {
    shortString(body, name);
    byte[] bytes = value.getBytes(StandardCharsets.US_ASCII);
    body.write(bytes.length >>> 24);
    body.write(bytes.length >>> 16);
    body.write(bytes.length >>> 8);
    body.write(bytes.length);
    body.write(bytes, 0, bytes.length);
  }

  /** Sends a one-frame message. */
  void send(byte[] frame) throws IOException {
    if (frame.length < 256) {
      out.writeByte(0);
      out.writeByte(frame.length);
    } else {
      out.writeByte(FLAG_LONG);
      out.writeLong(frame.length);
    }
    out.write(frame);
    out.flush();
  }

  /**
   * The frames of the next message; commands between messages (the peer's READY, heartbeats) are
   * skipped, an ERROR command fails naming its reason. A frame longer than {@code limits} allow, or
   * a message of more frames, is refused before it is read, with an {@link IllegalStateException}
   * naming the emitter (not retried: the emitter would send it again).
   */
  List<byte[]> receive(Limits limits) throws IOException {
    List<byte[]> frames = new ArrayList<>();
    while (true) {
      int flags = in.readUnsignedByte();
      long size = (flags & FLAG_LONG) != 0 ? in.readLong() : in.readUnsignedByte();
      if (size < 0 || size > limits.frameBytes())
        throw new IllegalStateException(
            "cloudprofiler source: the emitter at "
                + endpoint
                + " sent a frame of "
                + Long.toUnsignedString(size)
                + " bytes, more than "
                + limits.frameBytes()
                + " ("
                + limits.why()
                + ")");
      if ((flags & FLAG_COMMAND) == 0 && frames.size() >= limits.frames())
        throw new IllegalStateException(
            "cloudprofiler source: the emitter at "
                + endpoint
                + " sent a message of more than "
                + limits.frames()
                + " frames (a reply holds its state and at most "
                + (limits.frames() - 1) / 2
                + " buckets of two frames)");
      byte[] frame = new byte[(int) size];
      in.readFully(frame);
      if ((flags & FLAG_COMMAND) != 0) {
        checkCommand(frame);
        continue;
      }
      frames.add(frame);
      if ((flags & FLAG_MORE) == 0) return frames;
    }
  }

  private void checkCommand(byte[] command) throws IOException {
    int nameLength = command.length == 0 ? 0 : command[0] & 0xFF;
    String name =
        new String(command, 1, Math.min(nameLength, command.length - 1), StandardCharsets.US_ASCII);
    if (name.equals("ERROR")) {
      int at = 1 + nameLength;
      int reasonLength = at < command.length ? command[at] & 0xFF : 0;
      String reason =
          new String(
              command,
              at + 1,
              Math.min(reasonLength, command.length - at - 1),
              StandardCharsets.UTF_8);
      throw new IOException(endpoint + " refused the connection: " + reason);
    }
  }

  /**
   * What a message may hold: {@code frames} frames, none longer than {@code frameBytes}; {@code
   * why} says where that bound comes from.
   */
  record Limits(int frames, long frameBytes, String why) {}

  /** Whether a failed wait was a timeout rather than a broken connection. */
  static boolean timedOut(IOException e) {
    return e instanceof SocketTimeoutException;
  }

  @Override
  public void close() throws IOException {
    socket.close();
  }
}
