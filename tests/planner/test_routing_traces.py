"""Trace formats and the SageMaker data-capture importer."""
import base64
import json

import pytest

from hyperwarm.planner.sim import InstanceModel, simulate
from hyperwarm.planner.strategies import PrefixAware, Random
from hyperwarm.planner.traces import TraceError, open_trace, read_data_capture, read_trace, write_trace
from hyperwarm.planner.workloads import multi_turn_chat, shared_prefix


def _write(path, lines):
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(path)


def test_segments_round_trip_keeps_simulation_identical(tmp_path):
    for w in (
        shared_prefix(groups=10, prefix_tokens=1500, question_tokens=200, n_requests=600, seed=4),
        multi_turn_chat(n_requests=600, seed=4),
    ):
        p = tmp_path / "t.jsonl"
        assert write_trace(w, str(p)) == 600
        back = read_trace(str(p))
        a = simulate(w, Random(), 3, InstanceModel())
        b = simulate(back, Random(), 3, InstanceModel())
        assert a.to_dict() == b.to_dict()  # same sharing structure, same timing
        # ids are re-chained on read, so ring positions differ; the effect
        # of routing on prefixes must not
        a = simulate(w, PrefixAware(2048, 8), 3, InstanceModel())
        b = simulate(back, PrefixAware(2048, 8), 3, InstanceModel())
        assert a.kv_hit_rate == pytest.approx(b.kv_hit_rate, abs=0.03)


def test_body_trace_shares_prefix_exactly(tmp_path):
    sys_prompt = "You are a careful assistant. " * 200  # ~5.8 KB
    lines = [
        {"timestamp": i * 0.5, "output_tokens": 20, "body": json.dumps({"inputs": sys_prompt + f"Q{i}?"})}
        for i in range(40)
    ]
    w = read_trace(_write(tmp_path / "b.jsonl", lines))
    r = simulate(w, Random(), 1, InstanceModel())
    assert r.kv_hit_rate > 0.9  # all but the first request reuse ~5.8 KB
    pa = simulate(w, PrefixAware(4096, 100), 4, InstanceModel())
    assert max(pa.instance_share) == 1.0  # same first 4 KB: same instance


def test_mooncake_and_hash_ids_lines(tmp_path):
    lines = [
        {"timestamp": 0, "input_length": 1500, "output_length": 10, "hash_ids": [1, 2, 3]},
        {"timestamp": 1000, "input_length": 1100, "output_length": 10, "hash_ids": [1, 2, 4]},
    ]
    reqs = list(read_trace(_write(tmp_path / "m.jsonl", lines)))
    assert reqs[1][0] == 1.0  # ms -> s
    assert reqs[0][3][:2] == reqs[1][3][:2] and reqs[0][3][2] != reqs[1][3][2]
    r = simulate(read_trace(str(tmp_path / "m.jsonl")), Random(), 1, InstanceModel())
    assert r.kv_hit_rate == pytest.approx(1024 / 2600)


@pytest.mark.parametrize(
    "line,field",
    [
        ({"input_tokens": 5, "segments": [[1, 5]]}, "timestamp"),
        ({"timestamp": 0, "segments": [[1, 0]]}, "segments[0]"),
        ({"timestamp": 0, "input_tokens": 0, "body": "x"}, "input_tokens=0"),
        ({"timestamp": 0, "output_tokens": 3}, "'body'"),
        ({"timestamp": 0, "input_tokens": 9, "segments": [[1, 5]]}, "input_tokens=9"),
    ],
)
def test_bad_lines_name_file_line_and_field(tmp_path, line, field):
    p = _write(tmp_path / "bad.jsonl", [{"timestamp": 0, "segments": [[1, 5]]}, line])
    with pytest.raises(TraceError) as e:
        list(read_trace(p))
    assert "bad.jsonl:2" in str(e.value) and field in str(e.value)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(TraceError, match="does not exist"):
        read_trace(str(tmp_path / "nope.jsonl"))


def _capture(body, t, enc="JSON", out=None):
    data = base64.b64encode(body.encode()).decode() if enc == "BASE64" else body
    rec = {
        "captureData": {
            "endpointInput": {"observedContentType": "application/json", "mode": "INPUT", "data": data, "encoding": enc},
        },
        "eventMetadata": {"eventId": "e", "inferenceTime": t},
        "eventVersion": "0",
    }
    if out is not None:
        rec["captureData"]["endpointOutput"] = {
            "observedContentType": "application/json", "mode": "OUTPUT", "data": out, "encoding": "JSON",
        }
    return rec


def test_data_capture_import(tmp_path):
    doc = "Contract clause. " * 300
    lines = [
        _capture(json.dumps({"inputs": doc + "first?"}), "2024-05-01T10:00:00Z",
                 out=json.dumps({"generated_text": "x" * 400})),
        _capture(json.dumps({"inputs": doc + "second?"}), "2024-05-01T10:00:02.500Z", enc="BASE64",
                 out=json.dumps({"choices": [{"message": {"content": "y"}}],
                                 "usage": {"completion_tokens": 42, "prompt_tokens": 1300}})),
        _capture("a,b,c\n1,2,3", "2024-05-01T10:00:03Z", enc="CSV"),
    ]
    p = _write(tmp_path / "capture.jsonl", lines)
    w = open_trace(p)  # auto-detected
    reqs = list(w)
    assert [r[0] for r in reqs] == [0.0, 2.5, 3.0]
    assert reqs[0][2] == 100 and reqs[1][2] == 42 and reqs[1][1] == 1300
    assert reqs[0][5].startswith(b'{"inputs": "Contract')
    assert reqs[2][5] == b"a,b,c\n1,2,3"
    r = simulate(w, Random(), 1, InstanceModel())
    assert r.kv_hit_rate > 0.3  # the second request reuses the document


def test_data_capture_errors_name_the_field(tmp_path):
    p = _write(tmp_path / "c.jsonl", [_capture("{}", "yesterday")])
    with pytest.raises(TraceError, match="inferenceTime"):
        list(read_data_capture(p))
    p = _write(tmp_path / "d.jsonl", [_capture("{}", "2024-05-01T10:00:00Z", enc="GZIP")])
    with pytest.raises(TraceError, match="encoding='GZIP'"):
        list(read_data_capture(p))


def test_body_chunk_keys_equal_routing_keys_of_the_same_bytes():
    from hyperwarm.planner.strategies import body_key
    from hyperwarm.planner.traces import BODY_CHUNK_BYTES, body_segments

    body = bytes(range(256)) * 5 + b"tail"
    segs = body_segments(body)
    assert len(segs) == 6
    assert segs[0][0] == body_key(body[:BODY_CHUNK_BYTES])
    assert segs[-1][0] == body_key(body)


def test_a_line_that_is_not_json_is_named_by_file_and_line(tmp_path):
    import pytest

    from hyperwarm.planner.traces import TraceError, read_data_capture, read_trace

    path = tmp_path / "t.jsonl"
    path.write_text('\n{oops\n')  # the blank first line is skipped, the second is named
    for reader in (read_trace, read_data_capture):
        with pytest.raises(TraceError, match=r"t.jsonl:2: not valid JSON"):
            list(reader(str(path)))


# --- every bad record is an error naming FILE:LINE, what and why


def _bad(tmp_path, line, raw=None):
    """A two-line trace whose second line is ``line`` (or the raw text ``raw``)."""
    p = tmp_path / "bad.jsonl"
    good = json.dumps({"timestamp": 0, "segments": [[1, 5]]})
    p.write_text(good + "\n" + (raw if raw is not None else json.dumps(line)) + "\n")
    with pytest.raises(TraceError) as e:
        list(read_trace(str(p)))
    msg = str(e.value)
    assert msg.startswith(f"{p}:2: "), msg
    return msg


def test_negative_timestamp_is_an_error_not_clamped(tmp_path):
    msg = _bad(tmp_path, {"timestamp": -3.5, "segments": [[1, 5]]})
    assert "timestamp=-3.5 is not a finite number >= 0" in msg and "shift the trace" in msg


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinite_timestamps_are_errors(tmp_path, value):
    msg = _bad(tmp_path, None, raw=f'{{"timestamp": {value}, "segments": [[1, 5]]}}')
    assert "timestamp=" in msg and "is not a finite number >= 0" in msg


def test_null_output_tokens_is_an_error(tmp_path):
    msg = _bad(tmp_path, {"timestamp": 1, "output_tokens": None, "segments": [[1, 5]]})
    assert "output_tokens=None is not an integer >= 1 -- a request generates at least one token" in msg


def test_non_integer_segment_id_is_an_error(tmp_path):
    msg = _bad(tmp_path, {"timestamp": 1, "segments": [[1.5, 5]]})
    assert "segments[0] id=1.5 is not an int or a string" in msg


def test_non_integer_hash_id_is_an_error(tmp_path):
    msg = _bad(tmp_path, {"timestamp": 1, "hash_ids": [1, [2]]})
    assert "hash_ids[1]=[2] is not an int or a string" in msg


def test_invalid_body_b64_is_an_error(tmp_path):
    msg = _bad(tmp_path, {"timestamp": 1, "body_b64": "not base64!"})
    assert "body_b64 is not valid base64" in msg


def test_request_longer_than_the_context_length_is_an_error(tmp_path):
    p = tmp_path / "long.jsonl"
    p.write_text(json.dumps({"timestamp": 0, "output_tokens": 100, "segments": [[1, 2000]]}) + "\n")
    with pytest.raises(TraceError) as e:
        read_trace(str(p), context_tokens=2048)
    assert str(e.value).startswith(f"{p}:1: input 2,000 + output 100 tokens = 2,100 exceed the model's context length of 2,048")
    assert read_trace(str(p), context_tokens=2100).n_requests == 1


def test_unsorted_timestamps_are_sorted_and_counted(tmp_path):
    lines = [{"timestamp": t, "segments": [[i, 5]]} for i, t in enumerate([0.0, 2.0, 1.0, 3.0, 0.5])]
    p = _write(tmp_path / "u.jsonl", lines)
    w = read_trace(p)
    assert [r[0] for r in w] == [0.0, 0.5, 1.0, 2.0, 3.0]
    assert [r[0] for r in w] == [0.0, 0.5, 1.0, 2.0, 3.0]  # every pass, not only the first
    assert w.n_requests == 5
    assert w.notes == [f"sorted 2 of 5 records that were out of timestamp order (first at {p}:3)"]
    assert read_trace(_write(tmp_path / "s.jsonl", sorted(lines, key=lambda x: x["timestamp"]))).notes == []


def test_data_capture_with_invalid_base64_is_an_error(tmp_path):
    rec = _capture("{}", "2024-05-01T10:00:00Z", enc="BASE64")
    rec["captureData"]["endpointInput"]["data"] = "%%%not-base64%%%"
    p = _write(tmp_path / "c.jsonl", [rec])
    with pytest.raises(TraceError) as e:
        read_data_capture(p)
    assert str(e.value).startswith(f"{p}:1: captureData.endpointInput.data is not valid base64")


def test_data_capture_without_input_data_is_an_error(tmp_path):
    rec = _capture("{}", "2024-05-01T10:00:00Z")
    del rec["captureData"]["endpointInput"]["data"]
    p = _write(tmp_path / "c.jsonl", [rec])
    with pytest.raises(TraceError) as e:
        read_data_capture(p)
    assert str(e.value).startswith(f"{p}:1: field 'captureData.endpointInput.data' is missing or empty")


def test_data_capture_out_of_order_is_sorted_from_the_earliest(tmp_path):
    lines = [_capture('{"inputs": "b"}', "2024-05-01T10:00:02Z"), _capture('{"inputs": "a"}', "2024-05-01T10:00:00Z")]
    w = read_data_capture(_write(tmp_path / "c.jsonl", lines))
    assert [(r[0], r[5]) for r in w] == [(0.0, b'{"inputs": "a"}'), (2.0, b'{"inputs": "b"}')]
    assert "sorted 1 of 2 records" in w.notes[0]
