"""``python -m hyperwarm.planner.bench`` (make bench's planner part); figures, not speed, are asserted."""
import json

from hyperwarm.planner.bench import main


def test_bench_reports_one_row_per_run_and_the_target(capsys):
    assert main(["--requests", "3000", "--scenarios", "aws-long-context", "--strategies", "RANDOM,PREFIX_AWARE",
                 "--json", "--no-progress"]) == 0
    captured = capsys.readouterr()
    d = json.loads(captured.out)
    assert [r["strategy"] for r in d["rows"]] == ["RANDOM", "PREFIX_AWARE(4096,12)"]
    assert all(r["requests"] == 3000 for r in d["rows"])
    assert d["target_met"] is False  # 3,000 < 1,000,000 requests
    assert "aws-long-context   RANDOM" in captured.err  # one line per run on stderr
