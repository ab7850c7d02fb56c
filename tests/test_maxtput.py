"""The search against a consumer whose capacity is set on purpose finds that capacity within its tolerance."""
import argparse
import json

import pytest

from cloudprofiler.harness import maxtput_cli
from cloudprofiler.harness.generator.emitter import GeneratorConfig
from cloudprofiler.harness.maxtput import Step, consumer_trial, search


def test_search_finds_a_known_capacity():
    capacity, tolerance = 200_000, 0.05
    result = search(consumer_trial(GeneratorConfig(), duration_s=2.0, warmup_s=0.5, capacity_tps=capacity),
                    start=150_000, tolerance=tolerance)
    assert capacity * (1 - tolerance) * 0.99 <= result.max_sustainable_tps <= capacity * 1.01
    assert any(not s.sustainable for s in result.steps)
    assert all(s.emitted == s.received for s in result.steps)


def fake_step(rate, limit):
    ok = rate <= limit
    return Step(rate, 100, 100 if ok else 90, 0 if ok else 10, rate, 0.0, 1.0, 2.0, 0.0)


@pytest.mark.parametrize("start", [1_000, 5_000_000])
def test_bracket_and_bisect_converge_from_either_side(start):
    result = search(lambda r: fake_step(r, 123_456), start=start, tolerance=0.02)
    assert 123_456 * 0.98 <= result.max_sustainable_tps <= 123_456
    json.loads(result.to_json())
    assert result.to_arrow().num_rows == len(result.steps)


def test_one_stalled_step_does_not_set_the_limit():
    stalled = {20_000}  # the first run at this rate stalls, as a step does when the machine is busy

    def trial(rate):
        if rate in stalled:
            stalled.discard(rate)
            return fake_step(rate, 0)
        return fake_step(rate, 100_000)

    result = search(trial, start=10_000, tolerance=0.05)
    assert 95_000 <= result.max_sustainable_tps <= 100_000
    assert [s.sustainable for s in result.steps if s.rate == 20_000] == [False, True]
    assert search(lambda r: fake_step(r, 0 if r == 20_000 else 100_000), start=10_000, tolerance=0.05,
                  retries=0).max_sustainable_tps < 20_000  # without the retry, the stall would have set the limit


@pytest.mark.parametrize("kwargs,message", [({"start": 0}, "start rate must be > 0 tuples/s, got 0"),
                                            ({"start": 1, "tolerance": 2}, "tolerance must be in"),
                                            ({"start": 1, "retries": -1}, "retries must be >= 0, got -1")])
def test_bad_search_arguments_name_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        search(lambda r: fake_step(r, 10), **kwargs)


def test_command_writes_a_record(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    maxtput_cli.add_arguments(parser)
    args = parser.parse_args(["--capacity", "50000", "--start", "40000", "--tolerance", "0.3",
                              "--step-duration", "1", "--out", str(tmp_path)])
    assert maxtput_cli.run(args) == 0
    assert "maximum sustainable rate" in capsys.readouterr().out
    record = json.loads((tmp_path / "maxtput.json").read_text())
    assert record["steps"] and record["max_sustainable_tps"] > 0
