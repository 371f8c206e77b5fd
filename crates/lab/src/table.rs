//! Tables: built from rows once, printed in the terminal, written into the JSON and the HTML.
//!
//! [`normalized`] is the layout of Puma PR #3678: rps as % of the ideal, every latency
//! percentile divided by the ideal FIFO latency, the long tail p100/p10, and each worker's
//! deviation from a fair share of the requests.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::measure::{Row, TABLE_PERCENTILES};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table {
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Leading columns that hold names (left-aligned); the rest hold figures.
    pub text_columns: usize,
    pub notes: Vec<String>,
}

impl Table {
    pub fn new(title: impl Into<String>, header: &[&str], text_columns: usize) -> Table {
        Table {
            title: title.into(),
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            text_columns,
            notes: Vec::new(),
        }
    }

    pub fn push(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn note(mut self, note: impl Into<String>) -> Table {
        self.notes.push(note.into());
        self
    }

    /// The table as aligned text, with a title line and notes under it.
    pub fn render(&self) -> String {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut text = String::new();
            for (index, cell) in cells.iter().enumerate().take(columns) {
                let width = widths[index];
                if index > 0 {
                    text.push_str("  ");
                }
                if index < self.text_columns {
                    let _ = write!(text, "{cell:<width$}");
                } else {
                    let _ = write!(text, "{cell:>width$}");
                }
            }
            text.trim_end().to_owned() + "\n"
        };
        let total: usize = widths.iter().sum::<usize>() + 2 * columns.saturating_sub(1);
        let mut out = format!("{}\n", self.title);
        out.push_str(&line(&self.header));
        out.push_str(&"-".repeat(total));
        out.push('\n');
        for row in &self.rows {
            out.push_str(&line(row));
        }
        for note in &self.notes {
            let _ = writeln!(out, "  {note}");
        }
        out
    }
}

/// A number with `digits` decimals, or "-" when there is none.
pub fn fixed(value: f64, digits: usize) -> String {
    if value.is_finite() {
        format!("{value:.digits$}")
    } else {
        "-".into()
    }
}

pub fn megabytes(bytes: u64) -> String {
    if bytes == 0 {
        "-".into()
    } else {
        format!("{:.0}", bytes as f64 / (1 << 20) as f64)
    }
}

pub fn millis(secs: f64) -> String {
    fixed(secs * 1e3, if secs < 0.1 { 1 } else { 0 })
}

/// Errors of a row as one cell: requests without an answer, then answers that were not 2xx.
pub fn errors(row: &Row) -> String {
    match (row.errors, row.non_2xx()) {
        (0, 0) => "0".into(),
        (failed, 0) => failed.to_string(),
        (failed, bad) => format!("{failed}+{bad}x"),
    }
}

/// What the columns of the normalized layout mean.
pub const NORMALIZED_NOTES: [&str; 4] = [
    "rps % = requests/s as % of the ideal min(C, B)/S; latency columns = percentile / ideal FIFO latency S x max(1, C/B)",
    "tail = p100 / p10; errors = requests with no answer (+ answers that were not 2xx, marked x); MB = peak RSS of all the server's processes (shared pages counted in each)",
    "worker σ / dev = each worker's share of the requests as % deviation from a fair share, and its standard deviation (from X-Worker-Pid)",
    "uvicorn, hypercorn and node run the demo's waits in an event loop with no slot limit: their ideal is computed from the same W x T slots as the others",
];

/// A column computed from a row: its header and its cell.
pub type Column = (&'static str, fn(&Row) -> String);

/// Rows of one table in the normalized layout: one line per row, keyed by server and the
/// case columns given by `key`.
pub fn normalized(title: String, rows: &[&Row], key: &[Column]) -> Table {
    normalized_with(title, rows, key, &[])
}

/// [`normalized`] with the `extra` columns right after the latency percentiles.
pub fn normalized_with(title: String, rows: &[&Row], key: &[Column], extra: &[Column]) -> Table {
    let mut header: Vec<&str> = vec!["server"];
    header.extend(key.iter().map(|(name, _)| *name));
    header.extend(["conn", "requests", "rps", "rps %", "ideal ms"]);
    header.extend(["10%", "25%", "50%", "75%", "90%", "95%", "99%", "100%"]);
    header.extend(extra.iter().map(|(name, _)| *name));
    header.extend(["tail", "errors", "MB", "worker σ", "dev from fair %"]);
    let mut table = Table::new(title, &header, 1 + key.len());
    for row in rows {
        let mut cells = vec![row.server.clone()];
        cells.extend(key.iter().map(|(_, cell)| cell(row)));
        cells.push(row.case.connections.to_string());
        cells.push(row.requests.to_string());
        cells.push(fixed(row.rps, 1));
        cells.push(fixed(row.rps_pct, 1));
        cells.push(millis(row.ideal.latency_secs));
        for percent in TABLE_PERCENTILES {
            let ratio = row.latency(percent).map_or(f64::NAN, |secs| secs / row.ideal.latency_secs);
            cells.push(fixed(ratio, 2));
        }
        cells.extend(extra.iter().map(|(_, cell)| cell(row)));
        cells.push(fixed(row.long_tail, 2));
        cells.push(errors(row));
        cells.push(megabytes(row.peak_rss_bytes));
        match &row.worker_share {
            Some(share) => {
                cells.push(fixed(share.stdev_pct, 2));
                let deviations: Vec<String> = share.deviation_pct.iter().map(|d| format!("{d:+.1}")).collect();
                cells.push(deviations.join(" "));
            }
            None => cells.extend(["-".to_string(), "-".to_string()]),
        }
        table.push(cells);
    }
    NORMALIZED_NOTES.iter().fold(table, |table, note| table.note(*note))
}

pub fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// "on" / "off".
pub fn on_off(keep_alive: bool) -> &'static str {
    if keep_alive {
        "on"
    } else {
        "off"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_aligned_columns() {
        let mut table = Table::new("t", &["server", "rps"], 1);
        table.push(vec!["headway".into(), "25.0".into()]);
        table.push(vec!["puma".into(), "123.4".into()]);
        let text = table.render();
        assert_eq!(text, "t\nserver     rps\n--------------\nheadway   25.0\npuma     123.4\n");
    }

    #[test]
    fn missing_numbers_print_as_dashes() {
        assert_eq!(fixed(f64::NAN, 2), "-");
        assert_eq!(fixed(1.234, 2), "1.23");
        assert_eq!(megabytes(0), "-");
        assert_eq!(megabytes(3 << 20), "3");
        assert_eq!(millis(0.4), "400");
        assert_eq!(millis(0.0035), "3.5");
    }
}
