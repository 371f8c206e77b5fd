//! `headway lab` end to end: quick scenarios against a real headway (the built binary, with the
//! Python worker from this source tree), checking the tables, the JSON and the HTML report, and
//! that a peer that is not installed is skipped with one line.
//!
//! The lab runs inside the `headway` binary and starts `headway serve` with it, so these tests
//! need that binary: $HEADWAY_BIN, else target/<profile>/headway next to this test (built here
//! with `cargo build -p headway` when it is missing). Assertions are about behaviour (counts,
//! statuses, order, structure), never about speed, except that a 200 ms endpoint cannot answer
//! in less than 200 ms.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the repository root exists")
}

/// The headway binary to test.
fn headway() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        if let Some(path) = std::env::var_os("HEADWAY_BIN") {
            return PathBuf::from(path);
        }
        // This test is target/<profile>/deps/end_to_end-HASH; the binary is target/<profile>/headway.
        let exe = std::env::current_exe().expect("test path");
        let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>/deps");
        let binary = profile_dir.join("headway");
        if !binary.exists() {
            let profile = profile_dir.file_name().and_then(|n| n.to_str()).unwrap_or("debug");
            let profile = if profile == "debug" { "dev" } else { profile };
            let target_dir = profile_dir.parent().expect("target dir");
            let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
                .args(["build", "-p", "headway", "--profile", profile, "--target-dir"])
                .arg(target_dir)
                .current_dir(repo_root())
                .status()
                .expect("cargo runs");
            assert!(status.success(), "cannot build headway; build it first or set HEADWAY_BIN");
        }
        binary
    })
}

/// `headway lab ARGS` with the Python package of this tree importable.
fn lab(args: &[&str]) -> Command {
    let mut python_path = std::ffi::OsString::from(repo_root().join("python"));
    if let Some(old) = std::env::var_os("PYTHONPATH") {
        python_path.push(":");
        python_path.push(old);
    }
    let mut command = Command::new(headway());
    command.arg("lab").args(args).env("PYTHONPATH", python_path);
    command
}

fn run(command: &mut Command) -> Output {
    let output = command.output().expect("headway runs");
    eprintln!("stderr:\n{}", String::from_utf8_lossy(&output.stderr));
    output
}

#[test]
fn quick_scenarios_produce_json_and_an_html_report() {
    let dir = tempfile::tempdir().expect("temp dir");
    let report_dir = dir.path().join("report");
    let output =
        run(lab(&["run", "keepalive-tail", "pipelining", "--quick", "--servers", "headway", "--json", "--report"])
            .arg(&report_dir));
    assert!(output.status.success(), "exit status {}", output.status);

    let json: Value = serde_json::from_slice(&output.stdout).expect("stdout is JSON");
    assert_eq!(json["servers"][0]["name"], "headway");
    let scenarios = json["scenarios"].as_array().expect("scenarios");
    assert_eq!(scenarios.len(), 2);

    let keepalive = &scenarios[0];
    assert_eq!(keepalive["name"], "keepalive-tail");
    assert_eq!(keepalive["failures"].as_array().map(Vec::len), Some(0));
    let rows = keepalive["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 4, "keep-alive on and off, headway's lanes on and off");
    let lanes: Vec<&Value> = rows.iter().map(|row| &row["lanes"]).collect();
    assert_eq!(lanes, [true, true, false, false], "lanes on as headway ships, then off");
    for row in rows {
        assert_eq!(row["server"], "headway");
        assert_eq!(row["requests"], 30);
        assert_eq!(row["errors"], 0);
        assert_eq!(row["status_codes"]["200"], 30);
        // 5 slots, 200 ms, 10 clients: 25 requests/s, 0.4 s each.
        assert!((row["ideal"]["rps"].as_f64().unwrap() - 25.0).abs() < 1e-9);
        assert!((row["ideal"]["latency_secs"].as_f64().unwrap() - 0.4).abs() < 1e-9);
        let latency: Vec<f64> = row["latency_secs"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(latency.len(), 8, "10 % .. 100 %");
        assert!(latency.windows(2).all(|w| w[0] <= w[1]), "percentiles rise: {latency:?}");
        assert!(latency[0] >= 0.2, "a 200 ms endpoint answers in 200 ms or more: {latency:?}");
        assert!(row["peak_rss_bytes"].as_u64().unwrap() > 1 << 20, "the server's memory was sampled");
    }
    let table = &keepalive["tables"][0];
    assert_eq!(table["rows"].as_array().map(Vec::len), Some(4));
    assert_eq!(table["header"].as_array().map(Vec::len), table["rows"][0].as_array().map(Vec::len));

    let pipelining = &scenarios[1];
    for row in pipelining["rows"].as_array().expect("rows") {
        assert_eq!(row["in_order"], true, "{}: answers in order", row["case"]["label"]);
        assert_eq!(row["errors"], 0);
    }

    let html = std::fs::read_to_string(report_dir.join("index.html")).expect("index.html");
    assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
    assert!(html.matches("<svg").count() >= 4, "charts: bars, histograms, pipelining bars");
    assert_eq!(html.matches("<svg").count(), html.matches("</svg>").count());
    assert!(!html.contains("<script") && !html.contains("src=\"http"), "no script, nothing fetched");
    assert!(html.contains("keepalive-tail (seed 000)") && html.contains("<table>"));
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(report_dir.join("results.json")).expect("results.json"))
            .expect("results.json is JSON");
    assert_eq!(saved["scenarios"][0]["rows"], keepalive["rows"]);
}

#[test]
fn tables_are_printed_in_the_terminal() {
    let output = run(&mut lab(&["run", "long-tail-sweep", "--quick", "--servers", "headway"]));
    assert!(output.status.success(), "exit status {}", output.status);
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    let lines: Vec<&str> = stdout.lines().collect();
    let title = lines.iter().position(|l| l.starts_with("long-tail-sweep: 1 worker x 4 slots")).expect("title");
    let header: Vec<&str> = lines[title + 1].split_whitespace().collect();
    assert_eq!(&header[..4], ["server", "mult", "conn", "requests"]);
    assert!(header.contains(&"100%") && header.contains(&"tail"));
    assert!(lines[title + 2].chars().all(|c| c == '-'));
    let rows: Vec<Vec<&str>> = lines[title + 3..]
        .iter()
        .take_while(|l| l.starts_with("headway"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "1 x and 2 x the slots");
    // 1 worker x 4 slots: 4 then 8 connections, 10 requests per connection, no errors.
    assert_eq!((rows[0][2], rows[0][3]), ("4", "40"));
    assert_eq!((rows[1][2], rows[1][3]), ("8", "80"));
    // server mult conn requests rps rps% ideal, 8 percentiles, tail, errors, MB, worker σ, dev.
    assert!(rows.iter().all(|row| row.len() == 20), "{rows:?}");
    assert!(rows.iter().all(|row| row[16] == "0" && row[17] != "-"), "no errors, memory sampled: {rows:?}");
}

/// The cells of the table column headed `name`.
fn column<'a>(table: &'a Value, name: &str) -> Vec<&'a str> {
    let header = table["header"].as_array().expect("header");
    let index = header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}: {header:?}"));
    table["rows"].as_array().expect("rows").iter().map(|row| row[index].as_str().expect("a cell")).collect()
}

/// A row's percentiles (10 % .. 100 %) as numbers.
fn percentiles(value: &Value) -> Vec<f64> {
    value.as_array().expect("percentiles").iter().map(|v| v.as_f64().expect("a number")).collect()
}

#[test]
fn served_latency_and_latency_per_path_reach_the_tables() {
    let output = run(&mut lab(&["run", "overload", "mixed-tail", "--quick", "--servers", "headway", "--json"]));
    assert!(output.status.success(), "exit status {}", output.status);
    let json: Value = serde_json::from_slice(&output.stdout).expect("stdout is JSON");
    let (overload, mixed) = (&json["scenarios"][0], &json["scenarios"][1]);

    // overload: the served requests' latency apart from the 503s'.
    let rows = overload["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "the burst and the open loop");
    let table = &overload["tables"][0];
    let header: Vec<&str> = table["header"].as_array().unwrap().iter().map(|h| h.as_str().unwrap()).collect();
    let latency_columns: Vec<&str> = header.iter().copied().filter(|h| h.ends_with(" ms")).collect();
    assert_eq!(latency_columns, ["2xx p50 ms", "2xx p99 ms", "2xx max ms", "5xx p50 ms", "5xx p99 ms"]);
    assert!(!table["notes"].to_string().contains("503s included"));
    let (burst, open) = (&rows[0], &rows[1]);
    // A burst of 40 on 8 slots waits at most half a second: nothing reaches the 2 s deadline.
    assert_eq!(burst["status_codes"]["200"], 40);
    assert_eq!(burst["latency_by_class_secs"].as_object().unwrap().keys().collect::<Vec<_>>(), ["2xx"]);
    assert!(percentiles(&burst["latency_by_class_secs"]["2xx"])[0] >= 0.1, "a 100 ms endpoint");
    assert_eq!((column(table, "5xx p50 ms")[0], column(table, "5xx p99 ms")[0]), ("-", "-"));
    // The open loop offers twice what the slots can serve: once the queue holds 2 s of work
    // (by the service time it learned in the burst), the newcomers get 503 on arrival rather
    // than at the 2 s deadline.
    let refused = open["status_codes"]["503"].as_u64().expect("503s in the open loop");
    assert!(refused > 0);
    let served = percentiles(&open["latency_by_class_secs"]["2xx"]);
    let refused_latency = percentiles(&open["latency_by_class_secs"]["5xx"]);
    assert!(refused_latency[2] < 1.0, "most 503s come on arrival, not at the deadline: {refused_latency:?}");
    assert!(served[0] >= 0.1, "the 2xx percentiles are the served requests' alone: {served:?}");
    let ms = |secs: f64| if secs < 0.1 { format!("{:.1}", secs * 1e3) } else { format!("{:.0}", secs * 1e3) };
    let cells =
        ["2xx p50 ms", "2xx p99 ms", "2xx max ms", "5xx p50 ms", "5xx p99 ms"].map(|name| column(table, name)[1]);
    let expected = [served[2], served[6], served[7], refused_latency[2], refused_latency[6]].map(ms);
    assert_eq!(cells.map(str::to_owned), expected);
    assert_eq!(column(table, "503")[1], refused.to_string());

    // mixed-tail: the fast and the slow requests, each against its own ideal.
    let row = &mixed["rows"][0];
    let paths = row["paths"].as_array().expect("paths");
    let names: Vec<&str> = paths.iter().map(|p| p["path"].as_str().unwrap()).collect();
    assert_eq!(names, ["/sleep/20", "/sleep/500"]);
    assert_eq!((paths[0]["requests"].as_u64(), paths[1]["requests"].as_u64()), (Some(36), Some(4)), "weights 9:1");
    let (fast, slow) = (percentiles(&paths[0]["latency_secs"]), percentiles(&paths[1]["latency_secs"]));
    assert!(fast[0] >= 0.02 && slow[0] >= 0.5, "each path's own delay at least: {fast:?} {slow:?}");
    let table = &mixed["tables"][0];
    let header: Vec<&str> = table["header"].as_array().unwrap().iter().map(|h| h.as_str().unwrap()).collect();
    let after_all = header.iter().position(|h| *h == "100%").expect("the all-request columns") + 1;
    assert_eq!(header[after_all..after_all + 4], ["fast 50%", "fast 99%", "slow 50%", "slow 99%"]);
    // 8 clients on 4 slots: a 136 ms FIFO ideal, of which 68 ms shared waiting: 88 and 568 ms.
    let wait = row["ideal"]["latency_secs"].as_f64().unwrap() - row["service"]["mean_secs"].as_f64().unwrap();
    assert!((wait - 0.068).abs() < 1e-9, "shared wait {wait}");
    let cells = ["fast 50%", "fast 99%", "slow 50%", "slow 99%"].map(|name| column(table, name)[0].to_owned());
    let expected = [fast[2] / 0.088, fast[6] / 0.088, slow[2] / 0.568, slow[6] / 0.568].map(|r| format!("{r:.2}"));
    assert_eq!(cells, expected);
    let notes = table["notes"].to_string();
    assert!(notes.contains("ideal with 8 clients: fast 20 + 68 = 88 ms, slow 500 + 68 = 568 ms"), "{notes}");
    // headway with its lanes on, then again with them off; each time the closed loop, then the
    // open loop of Poisson arrivals at 80 % of capacity.
    let rows = mixed["rows"].as_array().expect("rows");
    let lanes: Vec<&Value> = rows.iter().map(|row| &row["lanes"]).collect();
    assert_eq!(lanes, [&Value::Bool(true), &Value::Bool(true), &Value::Bool(false), &Value::Bool(false)]);
    assert_eq!(column(table, "lanes"), ["on", "on", "off", "off"]);
    assert_eq!(column(table, "loop"), ["closed", "open 47/s", "closed", "open 47/s"]);
    for open in [&rows[1], &rows[3]] {
        assert_eq!(open["case"]["connections"], 64);
        let answered: u64 = open["status_codes"].as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum();
        assert_eq!(open["status_codes"]["200"].as_u64(), Some(answered), "every answer a 200: {open}");
    }
}

#[test]
fn throughput_rows_carry_the_cpu_per_request() {
    let output = run(&mut lab(&["run", "throughput", "--quick", "--servers", "headway", "--json"]));
    assert!(output.status.success(), "exit status {}", output.status);
    let json: Value = serde_json::from_slice(&output.stdout).expect("stdout is JSON");
    let throughput = &json["scenarios"][0];
    assert_eq!(throughput["failures"].as_array().map(Vec::len), Some(0));
    let rows = throughput["rows"].as_array().expect("rows");
    let cases: Vec<(u64, &str)> =
        rows.iter().map(|row| (row["workers"].as_u64().unwrap(), row["case"]["workload"].as_str().unwrap())).collect();
    let paths = ["/hello", "/json", "/fortunes"];
    let expected: Vec<(u64, &str)> = [1, 2].into_iter().flat_map(|workers| paths.map(|path| (workers, path))).collect();
    assert_eq!(cases, expected, "1 and 2 workers, three paths each");
    for row in rows {
        let requests = row["requests"].as_u64().expect("requests");
        assert!(requests > 0 && row["errors"] == 0, "{row}");
        assert_eq!(row["status_codes"]["200"].as_u64(), Some(requests), "every answer a 200");
        let app = row["app"].as_str().expect("the app is named");
        assert!(app.starts_with("Flask ") || app == "demo (no Flask)", "{app}");
        assert!(row["ideal"]["rps"].is_null(), "no ideal is known before a throughput run");
        let cpu = &row["cpu"];
        let figure = |name: &str| cpu[name].as_f64().unwrap_or_else(|| panic!("no cpu.{name} in {cpu}"));
        assert!(figure("server_secs") > 0.0, "the server's processes used CPU: {cpu}");
        assert!(figure("main_secs") >= 0.0 && figure("workers_secs") >= 0.0, "{cpu}");
        for part in ["server", "main", "workers"] {
            let per_request = figure(&format!("{part}_secs")) * 1e6 / requests as f64;
            assert!((figure(&format!("{part}_us_per_request")) - per_request).abs() < 1e-6, "{part}: {cpu}");
        }
        // The machine's idle and stolen shares: some of its time went to the server and the
        // load generator, so neither is the whole.
        let host = &row["host"];
        let (idle, steal) = (host["idle_share"].as_f64(), host["steal_share"].as_f64());
        assert!(idle.is_some_and(|idle| (0.0..1.0).contains(&idle)), "{host}");
        assert!(steal.is_some_and(|steal| (0.0..1.0).contains(&steal)), "{host}");
        // The load generator's own CPU: sending and reading every request costs it something.
        let load_us = row["load_us_per_request"].as_f64();
        assert!(load_us.is_some_and(|us| us > 0.0), "{row}");
    }
    let tables = throughput["tables"].as_array().expect("tables");
    assert_eq!(tables.len(), 2, "a table per worker count");
    for table in tables {
        assert_eq!(column(table, "path"), paths);
        for figure in ["CPU µs/req", "load µs"] {
            assert!(column(table, figure).iter().all(|cell| cell.parse::<f64>().is_ok()), "{figure}: {table}");
        }
    }
}

#[test]
fn a_missing_peer_is_skipped_with_one_line() {
    // PATH without puma (an empty directory); the worker's Python given explicitly: the one the
    // tests were given (it has headway's native core installed), else python3's.
    let python = std::env::var("HEADWAY_PYTHON").ok().filter(|python| !python.is_empty()).unwrap_or_else(|| {
        let python =
            Command::new("python3").args(["-c", "import sys; print(sys.executable)"]).output().expect("python3");
        String::from_utf8(python.stdout).expect("utf-8").trim().to_owned()
    });
    let empty = tempfile::tempdir().expect("temp dir");
    let output = run(lab(&["run", "keepalive-tail", "--quick", "--servers", "puma,headway"])
        .env("PATH", empty.path())
        .env("HEADWAY_PYTHON", &python));
    assert!(output.status.success(), "exit status {}", output.status);
    let stderr = String::from_utf8(output.stderr).expect("utf-8");
    let skips: Vec<&str> = stderr.lines().filter(|l| l.starts_with("skipping")).collect();
    assert_eq!(skips, ["skipping puma: not installed (apt-get install puma ruby-rack)"]);
    let stdout = String::from_utf8(output.stdout).expect("utf-8");
    assert_eq!(stdout.lines().filter(|l| l.starts_with("headway ")).count(), 4, "headway still ran:\n{stdout}");
    assert!(!stdout.lines().any(|l| l.starts_with("puma")));
}

#[test]
fn multiplexed_runs_over_one_http2_connection_and_skips_servers_without_h2c() {
    let output = run(&mut lab(&["run", "multiplexed", "--quick", "--servers", "headway,gunicorn", "--json"]));
    assert!(output.status.success(), "exit status {}", output.status);
    let json: Value = serde_json::from_slice(&output.stdout).expect("stdout is JSON");
    let scenario = &json["scenarios"][0];
    let rows = scenario["rows"].as_array().expect("rows");
    let headway: Vec<&Value> = rows.iter().filter(|row| row["server"] == "headway").collect();
    assert_eq!(headway.len(), 1, "8 streams on one connection");
    let row = headway[0];
    assert_eq!((row["requests"].as_u64(), row["errors"].as_u64()), (Some(40), Some(0)));
    assert_eq!(row["status_codes"]["200"], 40);
    let paths: Vec<&str> = row["paths"].as_array().unwrap().iter().filter_map(|p| p["path"].as_str()).collect();
    assert_eq!(paths.len(), 2, "the fast and the slow requests, each with its percentiles: {paths:?}");
    assert!(!rows.iter().any(|row| row["server"] == "gunicorn"));
    assert_eq!(scenario["failures"].as_array().map(Vec::len), Some(0));
    let installed = json["servers"].as_array().unwrap().iter().any(|server| server["name"] == "gunicorn");
    let stderr = String::from_utf8(output.stderr).expect("utf-8");
    let skipped = "multiplexed: skipping gunicorn: it serves no HTTP/2 with prior knowledge";
    assert_eq!(stderr.lines().any(|line| line == skipped), installed, "{stderr}");
}

#[test]
fn wrong_names_get_one_line_and_status_2() {
    for args in [["run", "no-such-scenario"].as_slice(), ["run", "keepalive-tail", "--servers", "apache"].as_slice()] {
        let output = run(&mut lab(args));
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8(output.stderr).expect("utf-8");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with("headway lab: unknown"), "{stderr}");
    }
}

#[test]
fn recommend_measures_an_app_that_is_not_the_demo() {
    // tests/apps/fortunes.py answers /fortunes and nothing else: there is no /hello to wait for,
    // so the lab must learn that headway is up from headway itself.
    let apps = repo_root().join("tests/apps");
    let output = run(
        lab(&["recommend", "fortunes:app", "--path", "/fortunes", "--seconds", "0.5", "--json"]).current_dir(&apps)
    );
    assert!(output.status.success(), "exit status {}", output.status);
    let json: Value = serde_json::from_slice(&output.stdout).expect("stdout is JSON");
    assert!(json["mix"]["requests"].as_u64().expect("requests") > 0, "the app was measured");
    let suggestion = &json["suggestion"];
    assert!(suggestion["workers"].as_u64().expect("workers") >= 1);
    assert!(suggestion["threads"].as_u64().expect("threads") >= 1);
    let sweep = json["sweep"].as_array().expect("the confirmation sweep");
    assert!(!sweep.is_empty());
    for point in sweep {
        assert_eq!(point["errors"], 0, "every request reached /fortunes: {point}");
    }
}
