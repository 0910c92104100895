"""``python -m hyperwarm.planner.bench`` (make bench's planner part); figures, not speed, are asserted."""
import json

import pytest

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


def _run(args, **env):
    import os
    import subprocess
    import sys

    environ = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "TERM")}
    return subprocess.run([sys.executable, "-m", *args], env={**environ, **env}, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.gate
def test_long_work_shows_a_progress_bar_on_a_terminal_and_none_when_told():
    # FORCE_COLOR makes rich treat stderr as a terminal, as an interactive run would be
    simulate = ["hyperwarm.planner", "routing", "simulate", "--scenario", "aws-long-context", "--requests", "2000",
                "--strategies", "RANDOM", "--no-chart"]
    bench = ["hyperwarm.planner.bench", "--requests", "2000", "--scenarios", "aws-long-context",
             "--strategies", "RANDOM"]
    for args, total in ((simulate, "/10000"), (bench, "/2000")):  # simulate: 2,000 requests on each of 5 seeds
        shown = _run(args, FORCE_COLOR="1")
        assert shown.returncode == 0, shown.stderr
        assert total in shown.stderr and "━" in shown.stderr
        quiet = _run(args + ["--no-progress"], FORCE_COLOR="1")
        assert quiet.returncode == 0 and "━" not in quiet.stderr

