//! The HTML report: one self-contained file (inline CSS and SVG, no script, no network) with the
//! machine, the servers, and for each scenario its charts and tables.

use std::fmt::Write as _;

use crate::chart::escape;
use crate::report::LabReport;
use crate::scenarios;
use crate::table::Table;

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;max-width:1400px}\
h1{font-size:22px}h2{font-size:18px;margin-top:36px;border-bottom:1px solid #ccc}\
table{border-collapse:collapse;font-size:12px;margin:10px 0}\
td,th{border:1px solid #ddd;padding:2px 6px;text-align:right;white-space:nowrap}\
td.text,th.text{text-align:left}caption{text-align:left;font-weight:bold;padding:4px 0}\
.notes{font-size:12px;color:#555}.charts svg{margin:6px 12px 6px 0;border:1px solid #eee}\
.failure{color:#a00}";

pub fn page(report: &LabReport) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>headway lab report</title><style>{STYLE}</style></head><body>\n"
    );
    let _ = writeln!(out, "<h1>headway lab report</h1>");
    let _ = writeln!(out, "<p>{}</p>", escape(&report.machine.describe()));
    let _ = writeln!(
        out,
        "<p>headway {}; run took {:.0} s{}.</p>",
        escape(&report.headway_version),
        report.elapsed_secs,
        if report.size.quick { " (quick sizes)" } else { "" }
    );
    out.push_str("<table><caption>servers</caption><tr><th class=\"text\">server</th><th class=\"text\">version</th><th class=\"text\">found</th><th class=\"text\">configuration for W x T</th></tr>\n");
    for server in &report.servers {
        let _ = writeln!(
            out,
            "<tr><td class=\"text\">{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td></tr>",
            escape(&server.name),
            escape(&server.version),
            escape(&server.found),
            escape(&server.configuration)
        );
    }
    out.push_str("</table>\n");
    for skipped in &report.skipped {
        let _ = writeln!(out, "<p class=\"notes\">{}</p>", escape(&skipped.to_string()));
    }
    for result in &report.scenarios {
        let seed = if result.seed.is_empty() { String::new() } else { format!(" (seed {})", result.seed) };
        let _ =
            writeln!(out, "<h2 id=\"{0}\">{0}{1}</h2>\n<p>{2}</p>", escape(&result.name), seed, escape(&result.about));
        for failure in &result.failures {
            let _ = writeln!(out, "<p class=\"failure\">{}</p>", escape(failure));
        }
        let charts = scenarios::find(&result.name).map(|s| (s.charts)(&result.rows)).unwrap_or_default();
        out.push_str("<div class=\"charts\">\n");
        for chart in &charts {
            out.push_str(&chart.to_svg());
            out.push('\n');
        }
        out.push_str("</div>\n");
        for table in &result.tables {
            out.push_str(&table_html(table));
        }
    }
    out.push_str("</body></html>\n");
    out
}

fn table_html(table: &Table) -> String {
    let class = |index: usize| if index < table.text_columns { " class=\"text\"" } else { "" };
    let mut out = format!("<table><caption>{}</caption><tr>", escape(&table.title));
    for (index, cell) in table.header.iter().enumerate() {
        let _ = write!(out, "<th{}>{}</th>", class(index), escape(cell));
    }
    out.push_str("</tr>\n");
    for row in &table.rows {
        out.push_str("<tr>");
        for (index, cell) in row.iter().enumerate() {
            let _ = write!(out, "<td{}>{}</td>", class(index), escape(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    for note in &table.notes {
        let _ = writeln!(out, "<div class=\"notes\">{}</div>", escape(note));
    }
    out
}
