/* Return-trip handlers over loopback UDP: every id acknowledged exactly once and stamped at its arrival after
 * its start, acknowledgements of another key or of another format rejected and counted, bad parameters named, and
 * an open that fails leaves no file and no descriptor behind. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "cloudprofiler.h"
#include "failing_fd.h"
#include "ipc_read.h"
#include "start.h"

enum { IDS = 5000, KEY = 0x2545F491 };

static cp_ret_info info_of(cp_channel *ch) {
  cp_ret_info info;
  cp_error err;
  CHECK(cp_ret_info_get(ch, &info, &err) == 0);
  return info;
}

static void pause_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static void wait_rejected(cp_channel *start, uint64_t n) {
  for (int i = 0; i < 500 && info_of(start).rejected < n; i++) pause_ms(10);
  CHECK(info_of(start).rejected == n);
}

/* ret_start on a port that another socket holds: the error names the channel, and neither the channel's file
 * nor a descriptor stays behind. */
static void open_on_busy_port(const char *dir) {
  int holder = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr = {htonl(INADDR_ANY)}};
  socklen_t len = sizeof addr;
  CHECK(holder >= 0 && bind(holder, (struct sockaddr *)&addr, sizeof addr) == 0);
  CHECK(getsockname(holder, (struct sockaddr *)&addr, &len) == 0);
  int fds = open_fds();
  int64_t params[2] = {ntohs(addr.sin_port), 0};
  cp_error err;
  CHECK(!cp_channel_open("busy", CP_HANDLER_RET_START, params, 2, NULL, NULL, 0, &err) && err.code == EADDRINUSE);
  CHECK(strstr(err.message, "'busy'"));
  CHECK(open_fds() == fds);
  DIR *d = opendir(dir);
  CHECK(d);
  for (struct dirent *e; (e = readdir(d));) CHECK(strncmp(e->d_name, "busy.", 5) != 0);
  closedir(d);
  close(holder);
}

int main(void) {
  char dir[] = "/tmp/cp_test_ret.XXXXXX";
  start_in_new_folder(dir);
  cp_error err;

  int64_t start_params[2] = {0, KEY};
  cp_channel *start = cp_channel_open("ret", CP_HANDLER_RET_START, start_params, 2, NULL, NULL, 0, &err);
  CHECK(start);
  cp_ret_info si = info_of(start);
  CHECK(si.port > 0 && si.ack_channel);
  int64_t end_params[3] = {INADDR_LOOPBACK, si.port, KEY}, other_params[3] = {INADDR_LOOPBACK, si.port, KEY + 1};
  cp_channel *end = cp_channel_open("ret-end", CP_HANDLER_RET_END, end_params, 3, NULL, NULL, 0, &err);
  cp_channel *other = cp_channel_open("ret-other", CP_HANDLER_RET_END, other_params, 3, NULL, NULL, 0, &err);
  CHECK(end && other);
  for (int64_t i = 0; i < IDS; i++) {
    cp_log(start, i);
    cp_log(end, i);
    if (i % 200 == 199) pause_ms(1); /* UDP: a burst beyond the receive buffer would be dropped (and counted) */
  }
  cp_log(other, -1); /* another key: rejected */

  /* a datagram of the right size and magic without the key's tag, and one of another size */
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(si.port), .sin_addr = {htonl(INADDR_LOOPBACK)}};
  struct {
    uint32_t magic, pad;
    int64_t id;
    uint64_t tag;
  } forged = {0x4b415043u, 0, 7, 0};
  CHECK(sendto(fd, &forged, sizeof forged, 0, (struct sockaddr *)&to, sizeof to) == sizeof forged);
  CHECK(sendto(fd, "short", 5, 0, (struct sockaddr *)&to, sizeof to) == 5);
  close(fd);
  wait_rejected(start, 3);
  CHECK(info_of(end).send_failures == 0 && info_of(start).overflows == 0);
  CHECK(cp_channel_close(end, &err) == 0 && cp_channel_close(other, &err) == 0);
  cp_log(end, 1); /* after close: counted, nothing sent */
  CHECK(cp_channel_close(start, &err) == 0);

  ipc_file starts, acks;
  CHECK(ipc_read(cp_channel_path(start), &starts) == 0 && starts.rows == IDS);
  CHECK(strncmp(ipc_meta(&starts, "handler.params"), "[0] ", 4) == 0); /* the port asked for; the key is not written */
  CHECK(ipc_read(cp_channel_path(si.ack_channel), &acks) == 0 && acks.rows == IDS);
  static uint64_t start_tsc[IDS], seen[IDS];
  for (size_t i = 0; i < starts.rows; i++) start_tsc[starts.col0[i]] = starts.col1[i];
  for (size_t i = 0; i < acks.rows; i++) {
    int64_t id = acks.col0[i];
    CHECK(id >= 0 && id < IDS && !seen[id]++); /* every id once, no forged or foreign one */
    CHECK(acks.col1[i] > start_tsc[id]);       /* stamped at arrival, after its start */
  }
  ipc_free(&starts);
  ipc_free(&acks);

  /* bad parameters name the value */
  int64_t bad_port[2] = {70000, 0}, bad_address[3] = {0, 5000, 0};
  CHECK(!cp_channel_open("x", CP_HANDLER_RET_START, bad_port, 2, NULL, NULL, 0, &err) && err.code == EINVAL);
  CHECK(strstr(err.message, "ret_start port=70000"));
  CHECK(!cp_channel_open("x", CP_HANDLER_RET_END, bad_address, 3, NULL, NULL, 0, &err) &&
        strstr(err.message, "address=0"));
  CHECK(!cp_channel_open("x", CP_HANDLER_RET_END, bad_address, 2, NULL, NULL, 0, &err) &&
        strstr(err.message, "takes 3"));
  cp_ret_info none;
  cp_channel *plain = cp_channel_open("plain", CP_HANDLER_BUFFERED, NULL, 0, NULL, NULL, 0, &err);
  CHECK(cp_ret_info_get(plain, &none, &err) == EINVAL);
  open_on_busy_port(dir);
  CHECK(cp_stop() == 0);

  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  puts("test_ret: ok");
  return 0;
}
