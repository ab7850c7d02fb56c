"""Rules from Python: set and read back, bad rules refused while the old ones stay, a channel opened by rules
switching handler under four logging threads without losing a record, a process following its rules file, and rules
files in JSON and TOML (a malformed one refused naming the file and the entry)."""
import os
import re
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import cloudprofiler as cp


def segments(folder, name):
    """The files of a channel opened by rules, in switch order, each as (metadata, table)."""
    files = [p for p in cp.log_files(folder) if p.name.startswith(name + ".")]
    tables = [cp.read_log(p) for p in files]
    return sorted(((cp.log_metadata(t), t) for t in tables), key=lambda mt: mt[0]["rules.segment"])


def test_rules_files_in_json_and_toml(log_dir, tmp_path):
    toml = tmp_path / "rules.toml"
    toml.write_text('[[rules]]\npattern = "f.*"\nhandler = "xoy"\nparams = [1, 4]\n\n'
                    '[[rules]]\npattern = "*"\nhandler = "null"\n')
    as_json = tmp_path / "rules.json"
    as_json.write_text('{"rules": [{"pattern": "f.*", "handler": "xoy", "params": [1, 4]}, '
                       '{"pattern": "*", "handler": "null"}]}')
    assert cp.read_rules_file(toml) == cp.read_rules_file(str(as_json)) == ["f.*=xoy:1:4", "*=null"]
    cp.set_rules(toml)
    assert cp.rules() == ["f.*=xoy:1:4", "*=null"]
    for name, text, message in [
        ("broken.json", '{"rules": [', "broken.json: cannot be read as JSON"),
        ("broken.toml", "[[rules]\n", "broken.toml: cannot be read as TOML"),
        ("flat.json", '{"rule": []}', "expected a list 'rules' of tables"),
        ("param.json", '{"rules": [{"pattern": "a", "handler": "null"}, {"pattern": "b", "handler": "downsample",'
                       ' "params": ["64"]}]}', "rule 2 {\"pattern\": \"b\", "),
        ("key.toml", '[[rules]]\npattern = "a"\nhandler = "null"\nparam = [1]\n', "rule 1 {\"pattern\": \"a\""),
        ("eq.json", '{"rules": [{"pattern": "a=b", "handler": "null"}]}', "'pattern' must be a non-empty string"),
    ]:
        (tmp_path / name).write_text(text)
        with pytest.raises(cp.InvalidArgumentError, match=re.escape(f"rules file {tmp_path / name}")) as error:
            cp.set_rules(tmp_path / name)
        assert message in str(error.value)
        assert cp.rules() == ["f.*=xoy:1:4", "*=null"]
    (tmp_path / "bad_handler.toml").write_text('[[rules]]\npattern = "a"\nhandler = "null"\n'
                                               '[[rules]]\npattern = "b"\nhandler = "nosuch"\n')
    with pytest.raises(cp.InvalidArgumentError, match=re.escape("line 2 'b=nosuch': unknown handler 'nosuch'")):
        cp.set_rules(tmp_path / "bad_handler.toml")  # rule i of the file is line i of the library's message
    assert cp.rules() == ["f.*=xoy:1:4", "*=null"]
    cp.set_rules("")


def test_rules_read_back_and_bad_rules_refused_naming_them(log_dir):
    cp.set_rules(["py.a*=downsample:8", "  # comment", "py.*=spc:1000000"])
    assert cp.rules() == ["py.a*=downsample:8", "py.*=spc:1000000"]
    for bad, message in [
        ("py.*=nosuch", "line 1 'py.*=nosuch': unknown handler 'nosuch'"),
        ("py.*=xoy:1", "handler xoy takes 2 parameter(s), got 1"),
        ("py.*=downsample:-3", "downsample n=-3 is out of range"),
        ("py.[x=null", "'[' without its ']'"),
        ("*=null\npy.*", "line 2 'py.*': expected <pattern>=<handler>"),
    ]:
        with pytest.raises(cp.InvalidArgumentError, match=re.escape(message)):
            cp.set_rules(bad)
        assert cp.rules() == ["py.a*=downsample:8", "py.*=spc:1000000"]
    with cp.Channel.by_rules("py.ab") as a, cp.Channel.by_rules("py.b") as b, cp.Channel.by_rules("other") as c:
        assert (a.handler, b.handler, c.handler) == (cp.Handler.DOWNSAMPLE, cp.Handler.SPC, cp.Handler.BUFFERED)
    cp.set_rules("")
    assert cp.rules() == []


def test_switches_racing_four_threads_lose_no_record(log_dir):
    """Every handler of the cycle keeps every record: the files together hold each id exactly once."""
    per_thread, chunk = 400_000, 1000
    cycle = ["race=identity", "race=downsample:1", "race=xoy:2:2", "race=buffered"]
    cp.set_rules("race=buffered")
    channel = cp.Channel.by_rules("race", metadata={"test": "race"})
    done = threading.Event()

    def work(k):
        ids = np.arange(k * per_thread, (k + 1) * per_thread, dtype=np.int64)
        for start in range(0, per_thread, chunk):
            channel.log_many(ids[start:start + chunk])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    switches = 0
    while any(t.is_alive() for t in threads) and switches < 40:
        time.sleep(0.003)
        cp.set_rules(cycle[switches % 4])
        switches += 1
    for t in threads:
        t.join()
    done.set()
    channel.close()
    stats = channel.stats
    assert stats.logged == 4 * per_thread and stats.written == stats.logged and stats.dropped == 0
    files = segments(log_dir, "race")
    assert switches >= 3 and len(files) == switches + 1
    ids = []
    for number, (meta, table) in enumerate(files):
        assert meta["rules.segment"] == number and meta["closed"] and meta["test"] == "race"
        assert meta["records.written"] + meta["records.dropped"] == meta["records.logged"] == table.num_rows
        assert meta["rules.rule"] == (cycle[(number - 1) % 4] if number else "race=buffered")
        if number:
            assert table.num_rows == 0 or min(table["tsc"].to_pylist()) >= meta["switch.in"]["tsc"]
            assert meta["switch.previous"] == files[number - 1][0]["rules.rule"].split("=")[1]
        ids.append(table["tuple_id"].to_numpy())
    ids = np.sort(np.concatenate(ids))
    assert np.array_equal(ids, np.arange(4 * per_thread))
    cp.set_rules("")


def test_a_counter_switched_to_records_keeps_its_count(log_dir):
    """The counter's file ends with every call it counted, in periods that start before its switch; the records
    go to the next file, with the other schema."""
    cp.set_rules("cnt=mpc:1000000")
    with cp.Channel.by_rules("cnt") as channel:
        channel.log_many(np.arange(1000))
        cp.set_rules("cnt=buffered")
        channel.log_many(np.arange(1000, 1500))
    cp.set_rules("")
    (counted, periods), (recorded, records) = segments(log_dir, "cnt")
    assert periods.column_names == ["period_start_tsc", "count"] and records.column_names == ["tuple_id", "tsc"]
    assert sum(periods["count"].to_pylist()) == counted["records.logged"] == 1000
    assert max(periods["period_start_tsc"].to_pylist()) < counted["switch.out"]["tsc"]
    assert recorded["switch.previous"] == "mpc:1000000" and records["tuple_id"].to_pylist() == list(range(1000, 1500))


FOLLOWER = """
import os, sys, time
import cloudprofiler as cp
channel = cp.Channel.by_rules("trace")
print("ready", flush=True)
i = 0
while i % 1000 or not os.path.exists(sys.argv[1]):  # until told to stop
    channel.log(i)
    i += 1
    time.sleep(0.0002)
"""


def test_a_process_follows_its_rules_file(tmp_path):
    """buffered -> null -> buffered -> downsample, then a bad file: records stop and resume within a second of each
    change, nothing before a switch is missing, and the bad file is refused once, naming it. Each change is written
    a second after the one before took effect (the child says so on stderr): on a loaded machine a change that came
    before the last was read would replace it unread, as a file that changes twice between two polls does."""
    rules_file, logs = tmp_path / "rules.txt", tmp_path / "logs"
    rules_file.write_text("trace=buffered\n")
    env = {**os.environ, "CLOUDPROFILER_RULES": str(rules_file), "CLOUDPROFILER_LOG_DIR": str(logs)}
    stop = tmp_path / "stop"
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(FOLLOWER), str(stop)], env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout.readline().strip() == "ready"
    said: list = []
    reader = threading.Thread(target=lambda: said.extend(child.stderr), daemon=True)
    reader.start()
    changes = []
    for text in ["trace=null\n", "trace=buffered\n", "trace=downsample:4\n", "trace=nosuch\n"]:
        time.sleep(1.0)
        before = sum(f"rules from {rules_file} in force" in line or "refused" in line for line in said)
        changes.append(time.time_ns())  # before the write: the switch cannot come earlier
        rules_file.write_text(text)
        deadline = time.monotonic() + 30
        while sum(f"rules from {rules_file} in force" in line or "refused" in line for line in said) == before:
            assert time.monotonic() < deadline, (text, said)
            time.sleep(0.05)
    time.sleep(1.0)
    stop.touch()
    child.wait(timeout=60)
    reader.join(timeout=10)
    stderr = "".join(said)
    assert child.returncode == 0, stderr
    assert stderr.count(f"rules file {rules_file} refused") == 1 and "unknown handler 'nosuch'" in stderr

    files = segments(logs, "trace")
    assert [meta["handler"] for meta, _ in files] == ["buffered", "null", "buffered", "downsample"]
    hz = files[0][0]["tsc.hz"]
    for number, (meta, table) in enumerate(files):
        tscs = table["tsc"].to_pylist()
        if number:  # its records were all taken after the switch, which came within a second of the file's change
            switch_in = meta["switch.in"]
            assert all(t >= switch_in["tsc"] for t in tscs)
            since_change = (switch_in["realtime_ns"] - changes[number - 1]) / 1e9
            assert 0 <= since_change < 1
            if tscs:  # logging resumed within a second of the change
                assert since_change + (min(tscs) - switch_in["tsc"]) / hz < 1
        if number + 1 < len(files) and tscs:  # none after its switch (but a call under way at it)
            assert max(tscs) <= meta["switch.out"]["tsc"] + 0.001 * hz
    # nothing lost at a switch: the ids (one per call, counting up) go on from one file to the next
    (_, first), (null, _), (_, again), (_, sampled) = files
    first, again, sampled = (t["tuple_id"].to_pylist() for t in (first, again, sampled))
    assert first == list(range(len(first))) and again == list(range(again[0], again[0] + len(again)))
    assert null["records.logged"] > 1000 and again[0] == len(first) + null["records.logged"]
    assert sampled == list(range(again[-1] + 1, again[-1] + 1 + 4 * len(sampled), 4))
