"""The bench scripts' results (bench/results.py, bench/lib.sh) and the page built from them
(bench/page.py): a script's TSV becomes a table of numbers and text, a malformed one is refused,
the command a result names is the one that reruns it, and the page writes a column's numbers
alike."""

import importlib.util
import json
import subprocess
import sys

import pytest

from conftest import REPO


def bench_module(name):
    """bench/NAME.py as a module; the scripts import each other as the files beside them."""
    if str(REPO / "bench") not in sys.path:
        sys.path.append(str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_result(monkeypatch, tmp_path, *options):
    results = bench_module("results")
    monkeypatch.setattr(results, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(sys, "argv", ["results.py", "probe", *options])
    results.main()
    return json.loads((tmp_path / "results" / "probe.json").read_text())


def test_a_tsv_table_becomes_a_result_with_its_numbers_as_numbers(monkeypatch, tmp_path):
    tsv = tmp_path / "medians.tsv"
    tsv.write_text("server\treq/s\tp99 ms\tp99 ms, each round\tratio\n"
                   "headway -w 1 -t 5\t24.9\t404\t404 407\tnan\n")
    result = write_result(monkeypatch, tmp_path, "--title", "Seed 000", "--order", "10",
                          "--command", "bench/keepalive-tail.sh", "--summary", "headway 1.01x",
                          "--version", "headway", "0.1.0 (commit abc)", "--version", "hey", "0.1.4",
                          "--table", "Medians of 3 rounds", str(tsv), "--note", "one", "--note", "two")
    assert result["tables"] == [{"title": "Medians of 3 rounds",
                                 "columns": ["server", "req/s", "p99 ms", "p99 ms, each round", "ratio"],
                                 "rows": [["headway -w 1 -t 5", 24.9, 404, "404 407", "nan"]]}]
    assert result["versions"] == {"headway": "0.1.0 (commit abc)", "hey": "0.1.4"}
    assert (result["name"], result["order"], result["notes"]) == ("probe", 10, ["one", "two"])
    assert result["machine"]["cpus"] >= 1


def test_a_row_of_another_width_than_the_columns_is_refused(monkeypatch, tmp_path):
    tsv = tmp_path / "rounds.tsv"
    tsv.write_text("round\twrk\they\n1\t90000\n")
    with pytest.raises(SystemExit, match=r"rounds.tsv:2: 2 cells for 3 columns"):
        write_result(monkeypatch, tmp_path, "--title", "t", "--order", "1", "--command", "c", "--summary", "s",
                     "--table", "rounds", str(tsv))
    assert not (tmp_path / "results" / "probe.json").exists()


def test_the_command_names_the_settings_that_are_not_the_defaults():
    script = ('source bench/lib.sh; ROUNDS=1 SERVERS="headway puma" DURATION=10s; '
              'bench_command ROUNDS=3 "SERVERS=headway headway-puma puma" DURATION=10s')
    result = subprocess.run(["bash", "-c", script, "bench/keepalive-tail.sh"], cwd=REPO, capture_output=True,
                            text=True, check=True)
    assert result.stdout == 'ROUNDS=1 SERVERS="headway puma" bench/keepalive-tail.sh\n'


def test_the_page_writes_a_columns_numbers_alike():
    lines = bench_module("page").table({"title": "", "columns": ["tool", "req/s", "vs wrk", "MiB"],
                                        "rows": [["wrk", 9984, 1.0, 158.8], ["headway load", 113260, 1.23, 81.1]]})
    assert lines[2:4] == ["| wrk | 9,984 | 1.00 | 158.8 |", "| headway load | 113,260 | 1.23 | 81.1 |"]


def test_every_result_gives_headline_rows_and_a_result_of_no_known_kind_is_refused():
    headlines = bench_module("headlines")
    for path in sorted((REPO / "bench" / "results").glob("*.json")):
        rows = headlines.rows(json.loads(path.read_text()))
        assert rows and all(set(row) == {"what", "against", "headway", "cpu", "p99"} for row in rows), path.name
    with pytest.raises(ValueError, match="no rule for the result 'something-new'"):
        headlines.rows({"name": "something-new", "tables": []})


def test_a_headline_row_is_read_from_its_results_table():
    columns = ["server", "req/s", "p99 ms", "CPU us/req", "headway vs it"]
    result = {"name": "versus-probe", "title": "Probe: headway and peer", "summary": "2 workers each, wrk -t1 -c64, x",
              "tables": [{"title": "/p: medians", "columns": columns,
                          "rows": [["headway", 100, 1.5, 20, "-"], ["peer", 50, 3.0, 40, "2.00x"]]}]}
    assert bench_module("headlines").rows(result) == [
        {"what": "Probe /p; 2 workers each, wrk -t1 -c64", "against": "peer", "headway": "2.00x req/s",
         "cpu": "20 / 40 µs", "p99": "1.5 / 3.0 ms"}]


def test_versus_rack_part_compares_headways_rack_worker_with_puma_cluster_and_puma_inside_headway(
        monkeypatch, tmp_path):
    versus_tables = bench_module("versus_tables")
    monkeypatch.setattr(versus_tables.results, "RESULTS", tmp_path)
    runs, bodies = tmp_path / "runs.tsv", tmp_path / "bodies.tsv"
    runs.write_text("".join(f"rack\t1\t{server}\t/\t{rps}\t3.0\t9.0\t0\t{cpu}\t-\t2\town\n" for server, rps, cpu in
                            (("headway", 9000, 150), ("puma-cluster", 6000, 300), ("headway-puma", 4500, 320))))
    bodies.write_text("")
    for name, value in {"PARTS": "rack", "ROUNDS": "1", "DURATION": "2s", "CONNECTIONS": "64", "WORKERS": "2",
                        "RACK_THREADS": "5"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("COMMAND", raising=False)
    monkeypatch.delenv("RESULTS", raising=False)
    monkeypatch.setattr(sys, "argv", ["versus_tables.py", str(runs), str(bodies)])
    versus_tables.main()
    result = json.loads((tmp_path / "versus-rack.json").read_text())
    assert result["command"] == "PARTS=rack bench/versus.sh"
    assert "`headway serve -w 2 -t 5 hello.ru`" in result["notes"][0]
    rows = bench_module("headlines").rows(result)
    assert [(row["against"], row["headway"]) for row in rows] == [
        ("Puma cluster mode (-w 2 -t 5:5)", "0.50x CPU/req, 1.50x req/s"),
        ("headway --cmd puma (-t 5:5 in each)", "0.47x CPU/req, 2.00x req/s")]


def test_preload_memory_measures_the_rack_worker_and_puma_each_without_and_with_preloading():
    rows = bench_module("preload-memory").ruby_rows(["headway", "serve", "-w", "4"])
    rails = str(REPO / "bench" / "rails.ru")  # the Rails test app in production
    assert [(row.name, row.without_preload, row.processes) for row in rows] == [
        ("headway (rails)", "", 5), ("headway --preload (rails)", "headway (rails)", 6),
        ("Puma -w 4 (rails)", "", 5), ("Puma -w 4 --preload (rails)", "Puma -w 4 (rails)", 5)]
    assert rows[0].command == ["headway", "serve", "-w", "4", rails]
    assert rows[1].command[-2:] == ["--preload", rails]
    assert rows[3].command[-2:] == ["--preload", rails] and rows[2].command[-1] == rails
