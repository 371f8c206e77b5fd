"""`headway lab` through the installed binary, for what crates/lab/tests/end_to_end.rs does not
cover: rounds and their medians, the scale-out fleet behind HAProxy, and the HTML report rendered
by headless Chromium (the charts must draw without a network)."""

import json
import os
import shutil
import subprocess
import sys

from conftest import REPO, headway_binary, require


def lab_env():
    return {**os.environ, "PYTHONPATH": str(REPO / "python"),
            "HEADWAY_PYTHON": os.environ.get("HEADWAY_PYTHON", sys.executable)}


def test_rounds_show_each_rows_median_round_and_keep_every_round():
    result = subprocess.run([headway_binary(), "lab", "run", "pipelining", "--quick", "--servers", "headway",
                             "--rounds", "3", "--json"], capture_output=True, text=True, timeout=600, env=lab_env())
    assert result.returncode == 0, result.stderr
    scenario = json.loads(result.stdout)["scenarios"][0]
    everything, shown = scenario["all_rounds"], scenario["rows"]
    cases = [row["case"]["label"] for row in everything[:3]]
    assert [(row["round"], row["case"]["label"]) for row in everything] == [(r, c) for r in (1, 2, 3) for c in cases]
    assert [row["case"]["label"] for row in shown] == cases, "one row per case, in the order they ran"
    for row in shown:
        same_case = [other for other in everything if other["case"]["label"] == row["case"]["label"]]
        p99s = sorted(other["latency_secs"][6] for other in same_case)
        assert row in everything and row["latency_secs"][6] == p99s[1], "the median round's whole row"
    assert all("median of 3 rounds" in table["notes"][-1] for table in scenario["tables"])

    wrong = subprocess.run([headway_binary(), "lab", "run", "pipelining", "--rounds", "0"], capture_output=True,
                           text=True, timeout=60, env=lab_env())
    assert wrong.returncode == 2 and "--rounds" in wrong.stderr


def test_scale_out_restarts_a_fleet_behind_haproxy_without_a_failed_request():
    require(shutil.which("haproxy") or "/usr/sbin/haproxy", "apt-get install haproxy")
    result = subprocess.run([headway_binary(), "lab", "run", "scale-out", "--quick", "--servers", "headway", "--json"],
                            capture_output=True, text=True, timeout=600, env=lab_env())
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["scenarios"][0]["rows"]
    assert [(row["group"], row["case"]["label"]) for row in rows] == [
        ("HAProxy maxconn (agent check)", "12 clients, keep-alive on"),
        ("HAProxy maxconn (agent check)", "rolling restart"),
        ("HAProxy round-robin", "12 clients, keep-alive on")]
    # One queue for the fleet (maxconn), also while it restarts: every request served.
    for row in rows[:2]:
        assert row["errors"] == 0 and row["status_codes"] == {"200": row["requests"]}, row
    # Round-robin piles slow requests onto one instance while others idle: its controlled delay
    # may refuse some with 503 rather than let them wait, but every one is answered.
    assert rows[2]["errors"] == 0 and set(rows[2]["status_codes"]) <= {"200", "503"}, rows[2]
    assert len(rows[0]["worker_share"]["deviation_pct"]) == 3, "every instance served"


def test_html_report_renders_in_headless_chromium(tmp_path):
    require("chromium", "apt-get install chromium")
    result = subprocess.run(["bash", str(REPO / "bench" / "lab-report-screenshot.sh"), str(tmp_path)],
                            capture_output=True, text=True, timeout=600,
                            env={**lab_env(), "HEADWAY_BIN": headway_binary()})
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "report.png").stat().st_size > 20_000
    assert "ok: " in result.stdout
