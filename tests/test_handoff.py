"""Hand-off channels between real processes: a writer without threads or files of its own, an owner whose library
writes its records; writers killed, an owner stopped and resumed, an owner gone."""
import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import cloudprofiler as cp
from cloudprofiler.handoff import BLOCK_RECORDS, Handoff

OWNER = textwrap.dedent("""
    import sys
    import cloudprofiler as cp
    from cloudprofiler.handoff import inbox_start
    cp.start(sys.argv[1])
    if len(sys.argv) > 3:
        cp.set_rules(sys.argv[3])
    inbox_start(sys.argv[2])
    print("ready", flush=True)
    sys.stdin.readline()
    cp.stop()
    print("stopped", flush=True)
""")

WRITER = textwrap.dedent("""
    import json, os, sys, threading
    import numpy as np
    import cloudprofiler as cp
    from cloudprofiler.handoff import Handoff
    inbox, name, n, then = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    handler = None if name.startswith("ruled") else "buffered"
    tasks_before = len(os.listdir("/proc/self/task"))  # numpy's own threads among them
    h = Handoff(inbox, name, handler, metadata={"spark.task_attempt_id": "41"})
    if then == "pause":  # open: the owner has mapped its memory
        print("open", flush=True)
        sys.stdin.readline()
    h.log_many(np.arange(n - 10))
    for i in range(n - 10, n):
        h.log(i)
    s = h.stats
    print(json.dumps({"logged": s.logged, "dropped": s.dropped, "threads": threading.active_count(),
                      "tasks": len(os.listdir("/proc/self/task")) - tasks_before, "library": cp.log_dir()}), flush=True)
    if then == "kill":
        os.kill(os.getpid(), 9)
    if then in ("wait", "pause"):
        sys.stdin.readline()
    h.flush()
    h.close()
""")


class Owner:
    def __init__(self, tmp_path: Path, rules: "str | None" = None):
        self.logs, self.inbox = tmp_path / "logs", tmp_path / "inbox"
        self.process = subprocess.Popen([sys.executable, "-c", OWNER, str(self.logs), str(self.inbox)]
                                        + ([rules] if rules else []),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout.readline().strip() == "ready"

    def stop(self) -> None:
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "stopped"
        assert self.process.wait(30) == 0

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)

    def records(self, channel: str):
        return cp.read_log_dir(self.logs, channel=channel)


@pytest.fixture
def owner(tmp_path):
    started = Owner(tmp_path)
    yield started
    started.kill()


def write(inbox: Path, name: str, n: int, then: str = "close", **kw):
    process = subprocess.Popen([sys.executable, "-c", WRITER, str(inbox), name, str(n), then],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, **kw)
    report = json.loads(process.stdout.readline())
    return process, report


def test_a_writer_logs_through_the_owner_without_threads_or_files_of_its_own(owner):
    n = 3 * BLOCK_RECORDS + 123  # several blocks handed over, a partial one at the close
    writer, report = write(owner.inbox, "py", n)
    assert writer.wait(30) == 0
    assert report["logged"] == n and report["dropped"] == 0
    assert report["library"] is None and report["threads"] == 1 and report["tasks"] == 0  # not even a native one
    owner.stop()
    table = owner.records("py")
    assert np.array_equal(table.column("tuple_id").to_numpy(), np.arange(n))  # in order, each once
    tscs = table.column("tsc").to_numpy()
    assert np.all(np.diff(tscs.astype(np.int64)) >= 0) and tscs[0] > 0  # the writer's TSCs, as read
    (path,) = set(table.column("file").to_pylist())
    meta = cp.log_metadata(path)
    assert meta["handoff.pid"] == str(writer.pid) and meta["pid"] == owner.process.pid
    assert meta["spark.task_attempt_id"] == "41" and meta["handler"] == "buffered" and meta["closed"] is True
    assert not owner.inbox.exists()  # the owner's stop removed its folder


def test_a_writer_killed_mid_task_loses_nothing_it_logged(owner):
    n = 2 * BLOCK_RECORDS + 777  # the last 777 in a block never handed over
    writer, report = write(owner.inbox, "killed", n, then="kill")
    assert writer.wait(30) == -signal.SIGKILL and report["logged"] == n
    deadline = time.monotonic() + 10
    while list(owner.inbox.glob("*.handoff")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not list(owner.inbox.glob("*.handoff"))  # found dead, taken and removed while the owner runs
    owner.stop()
    assert np.array_equal(owner.records("killed").column("tuple_id").to_numpy(), np.arange(n))


def _stop(pid: int) -> None:
    """SIGSTOP `pid`, then wait until every thread of it has stopped: each stops as it next runs, and one running on
    the other CPU meanwhile could still take a hand-off from the inbox."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                states.append(Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[0])
            except OSError:  # a thread that ended
                continue
        if states and all(state in ("t", "T") for state in states):
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid}'s threads did not all stop within 10 s: {states}")


def test_a_stopped_owner_makes_the_writer_wait_then_count_its_drops(owner):
    n = 10 * BLOCK_RECORDS  # 8 blocks fill, the writer waits 1 s for the next, then drops
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(owner.inbox), "stalled", str(n), "pause"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "open"
    try:
        _stop(owner.process.pid)  # the owner takes nothing for a while
        with pytest.raises(cp.PeerTimeoutError, match="did not take hand-off channel"):
            Handoff(str(owner.inbox), "late")  # an open waits for the owner to map its memory: 1 s at most
        writer.stdin.write("\n")
        writer.stdin.flush()
        report = json.loads(writer.stdout.readline())
    finally:
        os.kill(owner.process.pid, signal.SIGCONT)
    assert [p.name for p in owner.inbox.glob("*.handoff")] == [f"{writer.pid}-0.handoff"]  # the late one's is gone
    dropped = report["dropped"]
    assert report["logged"] + dropped == n and dropped >= 2 * BLOCK_RECORDS - 1
    writer.stdin.write("\n")
    writer.stdin.flush()
    assert writer.wait(30) == 0
    owner.stop()
    table = owner.records("stalled")
    assert table.num_rows == report["logged"]
    meta = cp.log_metadata(table.column("file")[0].as_py())  # counted in the file
    assert meta["records.dropped"] == dropped and meta["records.logged"] == n


def test_the_owners_rules_choose_the_handler_of_a_writer_that_names_none(tmp_path):
    owner = Owner(tmp_path, rules="ruled*=downsample:4")
    try:
        writer, report = write(owner.inbox, "ruled-py", 4000)
        assert writer.wait(30) == 0
        owner.stop()
    finally:
        owner.kill()
    table = owner.records("ruled-py")
    assert table.num_rows == 1000
    assert cp.log_metadata(table.column("file")[0].as_py())["handler"] == "downsample"


def test_without_a_live_owner_the_writer_is_told_and_nothing_is_created(tmp_path):
    with pytest.raises(cp.LogFolderNotFoundError, match="no running inbox owns"):
        Handoff(str(tmp_path), "py")
    (tmp_path / "owner").write_text("999999999 1\n")  # a dead owner's file
    with pytest.raises(cp.LogFolderNotFoundError):
        Handoff(str(tmp_path), "py")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["owner"]


def test_bad_arguments_are_named_before_anything_is_created(owner):
    with pytest.raises(cp.InvalidArgumentError, match="downsample n=0"):
        Handoff(str(owner.inbox), "py", "downsample", [0])
    with pytest.raises(cp.InvalidArgumentError, match="metadata pairs"):
        Handoff(str(owner.inbox), "py", metadata={f"k{i}": "v" for i in range(33)})
    with pytest.raises(cp.InvalidArgumentError, match="exceed 16384 bytes"):
        Handoff(str(owner.inbox), "py", metadata={"k": "v" * 20000})
    with Handoff(str(owner.inbox), "py") as h:
        h.log(1)
    with pytest.raises(cp.ClosedError, match="is closed"):
        h.log(2)
    with pytest.raises(cp.ClosedError):
        h.close()
    forgotten = Handoff(str(owner.inbox), "forgotten")
    forgotten.log(3)
    with pytest.warns(ResourceWarning, match="hand-off channel 'forgotten' was not closed; closing it now"):
        del forgotten


def test_the_owners_stop_takes_what_an_open_writer_published(owner):
    writer, report = write(owner.inbox, "open-at-stop", 5000, then="wait")
    owner.stop()  # the writer has not closed: its published records are taken, its channel closed
    writer.kill()
    writer.wait(30)
    assert np.array_equal(owner.records("open-at-stop").column("tuple_id").to_numpy(), np.arange(5000))


WORKER = textwrap.dedent("""
    import sys
    import cloudprofiler as cp
    import cloudprofiler.spark as cps
    ch = cps.worker_channel("found", local_dir=sys.argv[1])
    ch.log(1)
    print(type(ch).__name__, cp.log_dir(), flush=True)
    ch.close()
""")


def _name_executor(local: Path, folder: Path, inbox: Path) -> None:
    """This test process as the executor of the worker it starts: its folder and inbox named as the plugin names
    them (cloudprofiler.spark.worker walks up to its parent)."""
    from cloudprofiler.spark.jar import option_table

    names = local / option_table()["executor_folders"]
    names.mkdir(parents=True, exist_ok=True)
    (names / str(os.getpid())).write_text(str(folder))
    (names / (str(os.getpid()) + option_table()["inbox_suffix"])).write_text(str(inbox))


def _no_room_for_a_hand_off() -> None:
    """The kernel refuses this process a file of 4 MiB, the hand-off's memory among them (RLIMIT_FSIZE: its reserve
    fails with EFBIG; Python ignores the SIGXFSZ that comes with it), as it would when memory is short."""
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))


def test_a_worker_finds_its_executors_inbox_and_else_logs_to_files_saying_why(tmp_path):
    owner = Owner(tmp_path)
    try:
        _name_executor(tmp_path / "local", tmp_path / "folder", owner.inbox)
        found = subprocess.run([sys.executable, "-c", WORKER, str(tmp_path / "local")], capture_output=True,
                               text=True, timeout=60)
        assert found.returncode == 0, found.stderr
        assert found.stdout.split() == ["Handoff", "None"]  # no library of its own
        fell_back = subprocess.run([sys.executable, "-c", WORKER, str(tmp_path / "local")], capture_output=True,
                                   text=True, timeout=60, preexec_fn=_no_room_for_a_hand_off)
        assert fell_back.returncode == 0, fell_back.stderr
        assert fell_back.stdout.split() == ["Channel", str(tmp_path / "folder")]  # its own library, in the folder
        assert fell_back.stderr.count("logs to files of its own: cannot reserve") == 1
        assert not [p for p in owner.inbox.iterdir() if p.name != "owner"]  # nothing half-made left there
    finally:
        owner.kill()


LIAR = textwrap.dedent("""
    import ctypes, mmap, os, sys
    import numpy as np
    from cloudprofiler.handoff import BLOCK_RECORDS, Handoff

    class Head(ctypes.Structure):  # the owner's view of a block (native/src/handoff.h), as a hostile UDF would write it
        _fields_ = [("state", ctypes.c_uint32), ("count", ctypes.c_uint32)]

    HEADS = 88 + 16384  # offsetof(cp_handoff_header, heads): the fixed fields, then CP_HANDOFF_TEXT_MAX of text
    h = Handoff(sys.argv[1], "lying", "buffered")
    h.log_many(np.arange(BLOCK_RECORDS + 1))  # block 0 full, one record in block 1
    h.flush()
    with open(open(h.path).read().strip(), "r+b") as f:  # the name in the inbox holds /proc/<pid>/fd/<fd>
        shared = mmap.mmap(f.fileno(), 0)
    head = Head.from_buffer(shared, HEADS + ctypes.sizeof(Head))
    head.count = 0xFFFFFFF0  # what crashed the owner: a count past the block's end
    while head.state != 0:  # the owner drops the block and frees it
        pass
    print("dropped", os.getpid(), flush=True)
    del head
    shared.close()
    h.close()
""")


def test_a_writer_that_lies_in_shared_memory_loses_its_block_and_the_owner_lives_on(owner):
    liar = subprocess.run([sys.executable, "-c", LIAR, str(owner.inbox)], capture_output=True, text=True, timeout=60)
    assert liar.returncode == 0 and liar.stdout.split()[0] == "dropped", liar.stderr
    assert owner.process.poll() is None  # alive after the lie
    writer, report = write(owner.inbox, "after", 1000)  # and taking other writers' records
    assert writer.wait(30) == 0
    owner.stop()
    assert np.array_equal(owner.records("lying").column("tuple_id").to_numpy(), np.arange(BLOCK_RECORDS + 1))
    assert owner.records("after").num_rows == 1000
    meta = cp.log_metadata(owner.records("lying").column("file")[0].as_py())
    assert meta["handoff.rejected_blocks"] == 1 and meta["handoff.pid"] == liar.stdout.split()[1]
    assert meta["records.dropped"] == BLOCK_RECORDS - 1  # at most what the block holds, less what was taken of it


SHRINKER = textwrap.dedent("""
    import json, os, sys, time
    import numpy as np
    from cloudprofiler.handoff import BLOCK_RECORDS, Handoff

    def memfds():  # this process's own shared memory, as a UDF finds it among its open files
        for fd in os.listdir("/proc/self/fd"):
            try:
                if os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:"):
                    yield f"/proc/self/fd/{fd}"
            except OSError:  # the listing's own descriptor, closed
                pass

    h = Handoff(sys.argv[1], "shrunk", "buffered")
    h.log_many(np.arange(2 * BLOCK_RECORDS))  # two good blocks, taken
    h.flush()
    memory = list(memfds())
    refused = []
    for path in [h.path, *memory]:  # everything of its hand-off a UDF can reach, shrunk to nothing
        try:
            os.truncate(path, 0)
        except OSError as e:
            refused.append(e.errno)
    time.sleep(0.1)  # the owner reads the memory every 20 ms at most: memory that shrank kills it (SIGBUS) meanwhile
    h.log_many(np.arange(2 * BLOCK_RECORDS, 3 * BLOCK_RECORDS + 5))
    h.flush()
    with open(memory[0], "rb") as f:  # its header's page (native/src/handoff.h), to copy into memory of its own
        header, size = f.read(20480), os.fstat(f.fileno()).st_size
    h.close()
    # memory it made itself, unsealed, under a hand-off's header: the owner must refuse it and count it
    fd = os.memfd_create("unsealed")
    os.ftruncate(fd, size)
    os.pwrite(fd, header[:88] + b"unsealed\\0" + header[97:], 0)  # the channel's name ("shrunk") starts at 88
    name = os.path.join(sys.argv[1], f"{os.getpid()}-unsealed.handoff")
    with open(name + ".tmp", "w") as f:
        f.write(f"/proc/{os.getpid()}/fd/{fd}\\n")
    os.rename(name + ".tmp", name)
    deadline = time.monotonic() + 10
    while os.path.exists(name) and time.monotonic() < deadline:
        time.sleep(0.01)
    print(json.dumps({"refused": refused, "removed": not os.path.exists(name), "pid": os.getpid()}), flush=True)
""")


def test_a_writer_that_shrinks_its_memory_cannot_crash_the_owner_and_unsealed_memory_is_refused(owner):
    shrinker = subprocess.run([sys.executable, "-c", SHRINKER, str(owner.inbox)], capture_output=True, text=True,
                              timeout=60)
    assert owner.process.poll() is None, f"the owner died ({owner.process.returncode}) as its writer shrank its memory"
    assert shrinker.returncode == 0, shrinker.stderr
    report = json.loads(shrinker.stdout)
    assert report["refused"] == [errno.EPERM] and report["removed"]  # the seal refused the shrink; the owner the name
    owner.stop()
    assert np.array_equal(owner.records("shrunk").column("tuple_id").to_numpy(), np.arange(3 * BLOCK_RECORDS + 5))
    (refused,) = owner.logs.rglob("unsealed.*.arrows")
    meta = cp.log_metadata(str(refused))
    assert meta["handoff.rejected_files"] == 1 and meta["handoff.pid"] == str(report["pid"])


INBOX_START = textwrap.dedent("""
    import sys
    import cloudprofiler as cp
    from cloudprofiler.handoff import inbox_start
    cp.start(sys.argv[1])
    try:
        inbox_start(sys.argv[2])
    except cp.CloudProfilerError as e:
        print(type(e).__name__, e, flush=True)
""")


def test_an_inbox_folder_another_user_made_or_could_enter_is_refused(tmp_path):
    from neighbour import as_neighbour, neighbour

    user = neighbour()
    shm = Path("/dev/shm")
    planted = shm / f"cloudprofiler-inbox-test-{os.getpid()}"
    try:
        made = as_neighbour(["sh", "-c", f"umask 0 && mkdir -m 0777 {planted}"])
        assert made.returncode == 0, made.stderr
        refused = subprocess.run([sys.executable, "-c", INBOX_START, str(tmp_path / "logs"), str(planted)],
                                 capture_output=True, text=True, timeout=60)
        assert refused.stdout.startswith("LogFolderPermissionError"), refused
        assert f"belongs to user {user.pw_uid}, not to this one (0)" in refused.stdout
        assert str(planted) in refused.stdout
        assert not list(planted.iterdir())  # nothing of ours written into it
    finally:
        subprocess.run(["rm", "-rf", str(planted)])
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    refused = subprocess.run([sys.executable, "-c", INBOX_START, str(tmp_path / "logs"), str(loose)],
                             capture_output=True, text=True, timeout=60)
    assert "has mode 755, which lets other users read or inject records" in refused.stdout, refused


def test_a_writer_refuses_an_inbox_folder_others_could_enter(owner):
    owner.inbox.chmod(0o777)  # as if another user had made it: the owner's records could be read there
    with pytest.raises(cp.LogFolderPermissionError, match="has mode 777"):
        Handoff(str(owner.inbox), "py")
    owner.inbox.chmod(0o700)
    with Handoff(str(owner.inbox), "py") as h:
        h.log(1)
