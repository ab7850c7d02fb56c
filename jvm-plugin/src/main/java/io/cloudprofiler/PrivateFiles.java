package io.cloudprofiler;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.SeekableByteChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileAttribute;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;

/**
 * Files and folders on a host that other users share: made by this process for this user only
 * (folders 0700, files 0600, created exclusively under random names) and trusted only when this
 * user owns them, never through a symbolic link. Every check reads the entry itself ({@code
 * lstat}), not what a link names.
 */
public final class PrivateFiles {
  public static final FileAttribute<Set<PosixFilePermission>> FOLDER_MODE =
      PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------"));
  public static final FileAttribute<Set<PosixFilePermission>> FILE_MODE =
      PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------"));
  private static final LinkOption NOFOLLOW = LinkOption.NOFOLLOW_LINKS;
  private static volatile Integer uid;

  private PrivateFiles() {}

  /** This process's effective user id (from /proc/self/status). */
  public static int uid() throws IOException {
    Integer known = uid;
    if (known != null) return known;
    for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
      if (line.startsWith("Uid:")) {
        known = Integer.parseInt(line.substring(4).trim().split("\\s+")[1]);
        uid = known;
        return known;
      }
    }
    throw new IOException("no Uid line in /proc/self/status");
  }

  /** The entry's own owner (a link's, not its target's). */
  public static int owner(Path path) throws IOException {
    return (Integer) Files.getAttribute(path, "unix:uid", NOFOLLOW);
  }

  /**
   * Null when {@code path} is a folder (not a link to one) of this user that not every user can
   * write to (its group's writes are its owner's choice), or one with the sticky bit that root
   * owns, like /tmp (others cannot remove or rename this user's entries in it); else why it cannot
   * be trusted.
   */
  public static String untrustedFolder(Path path) throws IOException {
    PosixFileAttributes a = Files.readAttributes(path, PosixFileAttributes.class, NOFOLLOW);
    if (!a.isDirectory())
      return path + " is not a folder" + (a.isSymbolicLink() ? " (a link)" : "");
    int owner = owner(path);
    boolean sticky = ((Integer) Files.getAttribute(path, "unix:mode", NOFOLLOW) & 01000) != 0;
    if (owner == uid()) {
      if (sticky || !a.permissions().contains(PosixFilePermission.OTHERS_WRITE)) return null;
    } else if (owner == 0 && sticky) {
      return null;
    } else {
      return path + " belongs to another user (uid " + owner + ")";
    }
    return path
        + " can be written by every user ("
        + PosixFilePermissions.toString(a.permissions())
        + ")";
  }

  /**
   * Null when {@code path} is a regular file (not a link) of this user; else why it cannot be
   * trusted.
   */
  public static String untrustedFile(Path path) throws IOException {
    PosixFileAttributes a = Files.readAttributes(path, PosixFileAttributes.class, NOFOLLOW);
    if (!a.isRegularFile())
      return path + " is not a regular file" + (a.isSymbolicLink() ? " (a link)" : "");
    int owner = owner(path);
    return owner == uid() ? null : path + " belongs to another user (uid " + owner + ")";
  }

  /**
   * Creates {@code folder} and its missing parents 0700, or takes it as it is if {@link
   * #untrustedFolder} finds nothing wrong; throws with the reason otherwise.
   */
  public static void folder(Path folder) throws IOException {
    Path absolute = folder.toAbsolutePath();
    Path parent = absolute.getParent();
    if (parent != null && !Files.isDirectory(parent)) Files.createDirectories(parent, FOLDER_MODE);
    try {
      Files.createDirectory(absolute, FOLDER_MODE);
    } catch (FileAlreadyExistsException e) {
      // checked below
    }
    String why = untrustedFolder(absolute);
    if (why != null) throw new IOException("refusing the folder " + why);
  }

  /** What {@link #replace} writes into the new file. */
  public interface Output<E extends Exception> {
    void write(OutputStream out) throws E;
  }

  /**
   * Replaces {@code target} with what {@code output} writes (0600), renamed into place from a file
   * created exclusively under a random name and written without following a link, so that a reader
   * never reads half of it and no link planted at a name is followed; a failed write leaves the
   * target as it was.
   */
  public static <E extends Exception> void replace(Path target, Output<E> output)
      throws IOException, E {
    Path aside =
        Files.createTempFile(
            target.getParent(), "." + target.getFileName() + ".", ".tmp", FILE_MODE);
    try {
      try (OutputStream out =
          Files.newOutputStream(
              aside, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING, NOFOLLOW)) {
        output.write(out);
      }
      Files.move(
          aside, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    } finally {
      Files.deleteIfExists(aside);
    }
  }

  /** {@link #replace} with {@code text}, as UTF-8. */
  public static void writeInPlace(Path target, String text) throws IOException {
    replace(target, out -> out.write(text.getBytes(StandardCharsets.UTF_8)));
  }

  /**
   * The text of {@code path}, a regular file of this user opened without following a link; throws
   * when it is not one.
   */
  public static String readOwned(Path path) throws IOException {
    String why = untrustedFile(path);
    if (why != null) throw new IOException("refusing to read " + why);
    try (SeekableByteChannel in = Files.newByteChannel(path, StandardOpenOption.READ, NOFOLLOW)) {
      if (in.size() > 1 << 16) throw new IOException(path + " is larger than 64 KiB");
      ByteBuffer buffer = ByteBuffer.allocate((int) in.size());
      while (buffer.hasRemaining() && in.read(buffer) > 0) {}
      return new String(buffer.array(), 0, buffer.position(), StandardCharsets.UTF_8);
    }
  }
}
