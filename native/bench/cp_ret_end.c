/* Node B of a ReT pair in C, beside the Python one (python -m cloudprofiler.ret end), so that the ReT bound can be
 * read without the Python interpreter's share of the return trip:
 *
 *   cp_ret_end <listen address> <node A address> <node A ack port>
 *
 * Opens its ret_end channel, then prints the UDP port it receives tuple ids on (8-byte little-endian datagrams)
 * and logs each as an end, which acknowledges it to node A; id -1 ends the run, as does no tuple for 30 s. Prints
 * the end channel's file path at the end. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cloudprofiler.h"

enum { IDLE_TIMEOUT_S = 30 };

static int fail(const char *what) {
  fprintf(stderr, "cp_ret_end: %s: %s\n", what, strerror(errno));
  return 1;
}

int main(int argc, char **argv) {
  struct in_addr listen_address, start_address;
  char *end = NULL;
  long start_port = argc == 4 ? strtol(argv[3], &end, 10) : 0;
  if (argc != 4 || !inet_aton(argv[1], &listen_address) || !inet_aton(argv[2], &start_address) || *end ||
      start_port < 1 || start_port > 65535) {
    fprintf(stderr, "usage: %s <listen IPv4 address> <node A IPv4 address> <node A ack port 1-65535>\n", argv[0]);
    return 2;
  }
  cp_options options;
  cp_options_init(&options);
  cp_error error;
  if (cp_start(&options, &error)) return fprintf(stderr, "cp_ret_end: %s\n", error.message), 1;
  int64_t params[] = {(int64_t)ntohl(start_address.s_addr), start_port, 0};
  cp_channel *channel = cp_channel_open("ret.end", CP_HANDLER_RET_END, params, 3, NULL, NULL, 0, &error);
  if (!channel) return fprintf(stderr, "cp_ret_end: %s\n", error.message), 1;

  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr = listen_address};
  socklen_t length = sizeof address;
  struct timeval idle = {IDLE_TIMEOUT_S, 0};
  if (fd < 0 || bind(fd, (struct sockaddr *)&address, sizeof address) != 0 ||
      getsockname(fd, (struct sockaddr *)&address, &length) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof idle) != 0)
    return fail("cannot listen for tuples");
  printf("%u\n", ntohs(address.sin_port));
  fflush(stdout);
  for (;;) {
    int64_t tuple_id;
    ssize_t n = recv(fd, &tuple_id, sizeof tuple_id, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      fprintf(stderr, "cp_ret_end: no tuple from node A for %d s: stopping\n", IDLE_TIMEOUT_S);
      break;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("cannot receive a tuple");
    if (n != sizeof tuple_id) continue; /* not a tuple id */
    if (tuple_id < 0) break;
    cp_log(channel, tuple_id);
  }
  close(fd);
  char path[4096];
  snprintf(path, sizeof path, "%s", cp_channel_path(channel));
  if (cp_channel_close(channel, &error)) return fprintf(stderr, "cp_ret_end: %s\n", error.message), 1;
  printf("%s\n", path);
  cp_stop();
  return 0;
}
