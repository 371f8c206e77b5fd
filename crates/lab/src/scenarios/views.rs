//! Charts that several scenarios draw from their rows.

use crate::chart::{Chart, Series};
use crate::measure::{distinct, Row};

/// `percent` latency / ideal against connections, one line per server.
pub fn latency_vs_connections(title: String, rows: &[&Row], percent: f64) -> Chart {
    let servers = distinct_servers(rows);
    let series = servers
        .iter()
        .map(|server| Series {
            name: server.clone(),
            points: rows
                .iter()
                .filter(|row| &row.server_label() == server)
                .map(|row| {
                    let ratio = row.latency(percent).map_or(f64::NAN, |secs| secs / row.ideal.latency_secs);
                    (row.case.connections as f64, ratio)
                })
                .collect(),
            dashed: false,
        })
        .collect();
    Chart::Lines {
        title,
        x_label: "connections (closed-loop clients)".into(),
        y_label: format!("p{percent} latency / ideal"),
        log_y: true,
        series,
    }
}

/// Latency percentiles in ms, one group of bars per row (labelled by `label`).
pub fn percentile_bars(title: String, rows: &[&Row], label: impl Fn(&Row) -> String) -> Chart {
    let percents = [50.0, 90.0, 99.0, 100.0];
    Chart::Bars {
        title,
        y_label: "latency (ms)".into(),
        categories: rows.iter().map(|row| label(row)).collect(),
        series: percents.iter().map(|p| format!("p{p}")).collect(),
        values: percents
            .iter()
            .map(|&p| rows.iter().map(|row| row.latency(p).map_or(f64::NAN, |s| s * 1e3)).collect())
            .collect(),
    }
}

/// One latency histogram per row.
pub fn histograms(title: String, rows: &[&Row], label: impl Fn(&Row) -> String) -> Chart {
    Chart::Histograms { title, panels: rows.iter().map(|row| (label(row), row.histogram.clone())).collect() }
}

fn distinct_servers(rows: &[&Row]) -> Vec<String> {
    distinct(rows.iter().copied(), Row::server_label)
}

/// For each case (by label): its latency percentiles and histograms, one bar group and one panel
/// per server (and headway with its lanes off apart).
pub fn per_case(scenario: &str, rows: &[Row]) -> Vec<Chart> {
    let mut charts = Vec::new();
    for case in distinct(rows, |row| row.case.label.clone()) {
        let picked: Vec<&Row> = rows.iter().filter(|row| row.case.label == case).collect();
        let ideal_ms = picked.first().map_or(f64::NAN, |row| row.ideal.latency_secs * 1e3);
        let title = format!("{scenario}, {case}: latency percentiles (ms), ideal {ideal_ms:.0} ms");
        charts.push(percentile_bars(title, &picked, Row::server_label));
        charts.push(histograms(format!("{scenario}, {case}: latency histograms"), &picked, Row::server_label));
    }
    charts
}
