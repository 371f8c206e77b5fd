//! Output: the JSON report parses back into the same report, and the hey-style text carries
//! the same numbers in hey's layout (the lines scripts that parse hey look for); the latency by
//! status class is added only when there is more than one class, and then as a block of its own.

mod common;

use std::time::Duration;

use common::{config, hello, refuse_every, serve};
use headway_load::{run_load, LoadConfig, Report};

async fn sample_report() -> Report {
    let server = hello(Duration::from_millis(2)).await;
    let mut config = LoadConfig::new(server.url("/"));
    config.requests = Some(300);
    config.connections = 3;
    config.tally_header = Some("X-Missing".into());
    run_load(config).await.unwrap()
}

/// The value after the tab on the line starting with `label` (hey's "  Label:\tvalue").
fn field<'a>(text: &'a str, label: &str) -> &'a str {
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("  {label}:\t")))
        .unwrap_or_else(|| panic!("no {label} line in\n{text}"))
}

fn secs(value: &str) -> f64 {
    value.strip_suffix(" secs").unwrap().parse().unwrap()
}

#[tokio::test]
async fn json_parses_back_and_agrees_with_the_text() {
    let report = sample_report().await;
    let json = serde_json::to_string_pretty(&report).unwrap();
    let parsed: Report = serde_json::from_str(&json).unwrap();
    assert_eq!(parsed, report);

    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["requests"], 300);
    assert_eq!(value["status_codes"]["200"], 300);
    assert!(value["latency"]["spectrum"].as_array().unwrap().len() > 10, "the full spectrum is there");
    assert_eq!(value["latency_by_class"].as_object().unwrap().keys().collect::<Vec<_>>(), ["2xx"]);
    assert_eq!(parsed.latency_by_class["2xx"].percentiles, parsed.latency.percentiles, "every answer was a 2xx");
    assert_eq!(value["targets"][0]["latency"]["percentiles"], value["latency"]["percentiles"], "one URL");
    assert!(!value["series"].as_array().unwrap().is_empty());
    assert_eq!(value["tally"][""], 300, "responses without the tally header count under \"\"");

    let text = report.to_hey_text();
    let close = |a: f64, b: f64| (a - b).abs() < 0.00006; // text rounds to 4 decimals
    assert!(close(secs(field(&text, "Total")), parsed.total_secs));
    assert!(close(secs(field(&text, "Slowest")), parsed.latency.max_secs));
    assert!(close(secs(field(&text, "Fastest")), parsed.latency.min_secs));
    assert!(close(secs(field(&text, "Average")), parsed.latency.mean_secs));
    assert!(close(field(&text, "Requests/sec").parse().unwrap(), parsed.rps));
    assert_eq!(field(&text, "Total data"), "1500 bytes");
    assert_eq!(field(&text, "Size/request"), "5 bytes");
    assert!(text.contains("\nStatus code distribution:\n  [200]\t300 responses\n"));

    let latency_lines: Vec<(String, f64)> = text
        .split("Latency distribution:\n")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|line| !line.is_empty())
        .map(|line| {
            let (percent, value) = line.trim().split_once("% in ").unwrap();
            (percent.to_string(), secs(value))
        })
        .collect();
    let names: Vec<&str> = latency_lines.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(names, ["10", "25", "50", "75", "90", "95", "99", "99.9", "99.99"]);
    for (name, secs) in &latency_lines {
        let percent: f64 = name.parse().unwrap();
        assert!(close(*secs, parsed.percentile(percent).unwrap()), "{name}%");
    }

    let bars: Vec<u64> = text
        .split("Response time histogram:\n")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|line| !line.is_empty())
        .map(|line| line.split('[').nth(1).unwrap().split(']').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(bars.len(), 11, "hey's 11 marks");
    assert_eq!(bars.iter().sum::<u64>(), 300, "every answer is in one bar");
}

#[tokio::test]
async fn text_keeps_heys_layout() {
    let text = sample_report().await.to_hey_text();
    let headings: Vec<&str> = text.lines().filter(|l| !l.starts_with(' ') && !l.is_empty()).collect();
    assert_eq!(
        headings,
        [
            "Summary:",
            "Response time histogram:",
            "Latency distribution:",
            "Details (average, fastest, slowest):",
            "Status code distribution:",
            "Responses by X-Missing:",
        ]
    );
    assert!(!text.contains("Latency by status class"), "one class: nothing beyond hey's layout");
    assert!(text.starts_with("\nSummary:\n  Total:\t"));
    assert!(text.contains("  Requests/sec:\t"));
    assert!(text.contains("\n  \n  Total data:\t1500 bytes\n  Size/request:\t5 bytes\n\nResponse time histogram:\n"));
    for phase in ["DNS+dialup", "DNS-lookup", "req write", "resp wait", "resp read"] {
        let line = field(&text, phase);
        assert_eq!(line.matches(" secs").count(), 3, "{phase}: average, fastest, slowest");
    }
}

/// A run where every fourth answer is an immediate 503 and the rest 200 after 20 ms.
async fn two_class_report() -> Report {
    let server = serve(refuse_every(4, Duration::from_millis(20))).await;
    let mut c = config(server.url("/"));
    c.requests = Some(40);
    c.connections = 2;
    run_load(c).await.unwrap()
}

#[tokio::test]
async fn two_classes_add_a_latency_block_after_the_status_codes() {
    let report = two_class_report().await;
    let json = serde_json::to_string(&report).unwrap();
    assert_eq!(serde_json::from_str::<Report>(&json).unwrap(), report);

    let text = report.to_hey_text();
    let n = |x: f64| format!("{x:4.4} secs");
    let line = |class: &str| {
        let stats = &report.latency_by_class[class];
        let at = |p| n(stats.percentile(p).unwrap());
        format!("  [{class}]\t{}, {}, {}, {}", at(50.0), at(90.0), at(99.0), n(stats.max_secs))
    };
    let block = format!("Latency by status class (p50, p90, p99, slowest):\n{}\n{}\n\n", line("2xx"), line("5xx"));
    let status = "\nStatus code distribution:\n  [200]\t30 responses\n  [503]\t10 responses\n\n";
    assert!(text.contains(&format!("{status}{block}")), "the block follows the status codes:\n{text}");

    // The block is all that changes: the same report with one class prints hey's text, the
    // same byte for byte as the two-class text without the block.
    let mut one_class = report.clone();
    one_class.latency_by_class.retain(|class, _| class == "2xx");
    assert_eq!(one_class.to_hey_text(), text.replacen(&block, "", 1));
}
