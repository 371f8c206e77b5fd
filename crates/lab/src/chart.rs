//! Charts as data ([`Chart`]) and as inline SVG ([`Chart::to_svg`]): lines (latency or
//! throughput against connections), grouped bars (percentiles per server) and small histograms.
//! Drawn here, by hand, so the report needs no script and no network to open.

use std::fmt::Write as _;

use serde::Serialize;

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 320.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 34.0;
const BOTTOM: f64 = 46.0;
/// One colour per series, distinguishable in print and for most colour-blind readers.
const PALETTE: [&str; 8] = ["#1b6ac9", "#d1495b", "#2e933c", "#edae49", "#7b4fa0", "#00798c", "#8c564b", "#555555"];

#[derive(Debug, Clone, Serialize)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed: the ideal.
    pub dashed: bool,
}

#[derive(Debug, Clone, Serialize)]
pub enum Chart {
    Lines {
        title: String,
        x_label: String,
        y_label: String,
        log_y: bool,
        series: Vec<Series>,
    },
    /// `values[s][c]`: series `s` in category `c`.
    Bars {
        title: String,
        y_label: String,
        categories: Vec<String>,
        series: Vec<String>,
        values: Vec<Vec<f64>>,
    },
    /// One small histogram per panel: (upper mark in seconds, count).
    Histograms {
        title: String,
        panels: Vec<(String, Vec<(f64, u64)>)>,
    },
}

impl Chart {
    pub fn to_svg(&self) -> String {
        match self {
            Chart::Lines { title, x_label, y_label, log_y, series } => lines(title, x_label, y_label, *log_y, series),
            Chart::Bars { title, y_label, categories, series, values } => {
                bars(title, y_label, categories, series, values)
            }
            Chart::Histograms { title, panels } => histograms(title, panels),
        }
    }
}

/// Escapes text for SVG and HTML.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A vertical scale, linear or logarithmic, from data values to pixels.
struct Scale {
    low: f64,
    high: f64,
    log: bool,
}

impl Scale {
    fn new(values: impl Iterator<Item = f64>, log: bool) -> Scale {
        let finite: Vec<f64> = values.filter(|v| v.is_finite() && (!log || *v > 0.0)).collect();
        let max = finite.iter().copied().fold(f64::MIN, f64::max);
        let min = finite.iter().copied().fold(f64::MAX, f64::min);
        if finite.is_empty() {
            return Scale { low: if log { 0.1 } else { 0.0 }, high: 1.0, log };
        }
        if log {
            let low = 10f64.powf(min.log10().floor());
            let high = 10f64.powf(max.log10().ceil()).max(low * 10.0);
            Scale { low, high, log }
        } else {
            Scale { low: 0.0, high: nice_ceiling(max), log }
        }
    }

    /// 0 at the bottom, 1 at the top.
    fn fraction(&self, value: f64) -> f64 {
        let f = if self.log {
            (value.max(self.low).ln() - self.low.ln()) / (self.high.ln() - self.low.ln())
        } else {
            (value - self.low) / (self.high - self.low)
        };
        f.clamp(0.0, 1.0)
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let mut ticks = Vec::new();
            let mut tick = self.low;
            while tick <= self.high * 1.0001 {
                ticks.push(tick);
                tick *= 10.0;
            }
            ticks
        } else {
            (0..=4).map(|i| self.low + (self.high - self.low) * i as f64 / 4.0).collect()
        }
    }
}

/// The smallest 1, 2 or 5 x 10^k at or above `value`.
fn nice_ceiling(value: f64) -> f64 {
    if value.is_nan() || value <= 0.0 {
        return 1.0;
    }
    let magnitude = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * magnitude).find(|&v| v >= value).unwrap_or(10.0 * magnitude)
}

fn label(value: f64) -> String {
    if value == 0.0 {
        "0".into()
    } else if value.abs() >= 100.0 {
        format!("{value:.0}")
    } else if value.abs() >= 1.0 {
        format!("{}", (value * 10.0).round() / 10.0)
    } else {
        format!("{}", (value * 1000.0).round() / 1000.0)
    }
}

fn open(out: &mut String, title: &str) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="11"><rect width="{WIDTH}" height="{HEIGHT}" fill="white"/><text x="{}" y="18" font-size="13" font-weight="bold">{}</text>"#,
        LEFT,
        escape(title)
    );
}

fn plot_width() -> f64 {
    WIDTH - LEFT - RIGHT
}

fn plot_height() -> f64 {
    HEIGHT - TOP - BOTTOM
}

fn y_axis(out: &mut String, scale: &Scale, y_label: &str) {
    for tick in scale.ticks() {
        let y = TOP + plot_height() * (1.0 - scale.fraction(tick));
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_width(),
            LEFT - 6.0,
            y + 4.0,
            label(tick)
        );
    }
    let _ = write!(
        out,
        r#"<text transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        TOP + plot_height() / 2.0,
        escape(y_label)
    );
}

fn legend(out: &mut String, names: &[(String, bool)]) {
    for (index, (name, dashed)) in names.iter().enumerate() {
        let y = TOP + 8.0 + 16.0 * index as f64;
        let x = WIDTH - RIGHT + 14.0;
        let dash = if *dashed { r#" stroke-dasharray="5 3""# } else { "" };
        let _ = write!(
            out,
            r#"<line x1="{x}" x2="{}" y1="{y}" y2="{y}" stroke="{}" stroke-width="3"{dash}/><text x="{}" y="{}">{}</text>"#,
            x + 18.0,
            PALETTE[index % PALETTE.len()],
            x + 24.0,
            y + 4.0,
            escape(name)
        );
    }
}

fn lines(title: &str, x_label: &str, y_label: &str, log_y: bool, series: &[Series]) -> String {
    let mut out = String::new();
    open(&mut out, title);
    let scale = Scale::new(series.iter().flat_map(|s| s.points.iter().map(|p| p.1)), log_y);
    let xs: Vec<f64> = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).filter(|x| x.is_finite()).collect();
    let x_max = nice_ceiling(xs.iter().copied().fold(0.0, f64::max));
    let x_at = |x: f64| LEFT + plot_width() * (x / x_max).clamp(0.0, 1.0);
    y_axis(&mut out, &scale, y_label);
    for i in 0..=5 {
        let x = x_max * i as f64 / 5.0;
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            x_at(x),
            TOP + plot_height() + 16.0,
            label(x)
        );
    }
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
        LEFT + plot_width() / 2.0,
        HEIGHT - 8.0,
        escape(x_label)
    );
    for (index, s) in series.iter().enumerate() {
        let colour = PALETTE[index % PALETTE.len()];
        let points: Vec<String> = s
            .points
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite() && (!log_y || *y > 0.0))
            .map(|&(x, y)| format!("{:.1},{:.1}", x_at(x), TOP + plot_height() * (1.0 - scale.fraction(y))))
            .collect();
        let dash = if s.dashed { r#" stroke-dasharray="5 3""# } else { "" };
        let _ = write!(
            out,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="{}"/>"#,
            points.join(" ")
        );
        for point in &points {
            let (x, y) = point.split_once(',').expect("formatted as x,y");
            let _ = write!(out, r#"<circle cx="{x}" cy="{y}" r="3" fill="{colour}"/>"#);
        }
    }
    legend(&mut out, &series.iter().map(|s| (s.name.clone(), s.dashed)).collect::<Vec<_>>());
    out.push_str("</svg>");
    out
}

fn bars(title: &str, y_label: &str, categories: &[String], series: &[String], values: &[Vec<f64>]) -> String {
    let mut out = String::new();
    open(&mut out, title);
    let scale = Scale::new(values.iter().flatten().copied(), false);
    y_axis(&mut out, &scale, y_label);
    let slot = plot_width() / categories.len().max(1) as f64;
    let bar = (slot * 0.8) / series.len().max(1) as f64;
    for (c, category) in categories.iter().enumerate() {
        let x0 = LEFT + slot * c as f64 + slot * 0.1;
        for (s, values) in values.iter().enumerate() {
            let value = values.get(c).copied().unwrap_or(f64::NAN);
            if !value.is_finite() {
                continue;
            }
            let h = plot_height() * scale.fraction(value);
            let _ = write!(
                out,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="{}"><title>{}: {}</title></rect>"#,
                x0 + bar * s as f64,
                TOP + plot_height() - h,
                (bar - 1.0).max(1.0),
                PALETTE[s % PALETTE.len()],
                escape(&series[s]),
                label(value)
            );
        }
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            x0 + slot * 0.4,
            TOP + plot_height() + 16.0,
            escape(category)
        );
    }
    legend(&mut out, &series.iter().map(|name| (name.clone(), false)).collect::<Vec<_>>());
    out.push_str("</svg>");
    out
}

fn histograms(title: &str, panels: &[(String, Vec<(f64, u64)>)]) -> String {
    let mut out = String::new();
    open(&mut out, title);
    let columns = panels.len().clamp(1, 4);
    let rows = panels.len().div_ceil(columns).max(1);
    let panel_w = (WIDTH - 20.0) / columns as f64;
    let panel_h = (HEIGHT - TOP - 10.0) / rows as f64;
    for (index, (name, buckets)) in panels.iter().enumerate() {
        let x0 = 10.0 + panel_w * (index % columns) as f64;
        let y0 = TOP + panel_h * (index / columns) as f64;
        let tallest = buckets.iter().map(|b| b.1).max().unwrap_or(0).max(1) as f64;
        let inner_h = panel_h - 44.0;
        let bar_w = (panel_w - 20.0) / buckets.len().max(1) as f64;
        let _ =
            write!(out, r#"<text x="{:.1}" y="{:.1}" font-weight="bold">{}</text>"#, x0 + 4.0, y0 + 12.0, escape(name));
        for (b, &(mark, count)) in buckets.iter().enumerate() {
            let h = inner_h * count as f64 / tallest;
            let _ = write!(
                out,
                r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="{}"><title>up to {} ms: {count}</title></rect>"#,
                x0 + 4.0 + bar_w * b as f64,
                y0 + 18.0 + inner_h - h,
                (bar_w - 1.0).max(1.0),
                PALETTE[index % PALETTE.len()],
                label(mark * 1e3)
            );
        }
        if let (Some(first), Some(last)) = (buckets.first(), buckets.last()) {
            let y = y0 + 18.0 + inner_h + 12.0;
            let _ = write!(out, r#"<text x="{:.1}" y="{y:.1}">{} ms</text>"#, x0 + 4.0, label(first.0 * 1e3));
            let _ = write!(
                out,
                r#"<text x="{:.1}" y="{y:.1}" text-anchor="end">{} ms</text>"#,
                x0 + panel_w - 16.0,
                label(last.0 * 1e3)
            );
        }
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_ceilings() {
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(3.2), 5.0);
        assert_eq!(nice_ceiling(18.0), 20.0);
        assert_eq!(nice_ceiling(100.0), 100.0);
    }

    #[test]
    fn a_line_chart_has_a_polyline_per_series_and_escapes_names() {
        let chart = Chart::Lines {
            title: "p99 <vs> conn".into(),
            x_label: "connections".into(),
            y_label: "p99 / ideal".into(),
            log_y: true,
            series: vec![
                Series { name: "a&b".into(), points: vec![(1.0, 1.0), (2.0, 5.0)], dashed: false },
                Series { name: "ideal".into(), points: vec![(1.0, 1.0), (2.0, 1.0)], dashed: true },
            ],
        };
        let svg = chart.to_svg();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("p99 &lt;vs&gt; conn") && svg.contains("a&amp;b"));
    }

    #[test]
    fn bars_and_histograms_draw_a_rect_per_value() {
        let bars = Chart::Bars {
            title: "t".into(),
            y_label: "ms".into(),
            categories: vec!["x".into(), "y".into()],
            series: vec!["p50".into(), "p99".into()],
            values: vec![vec![1.0, 2.0], vec![3.0, f64::NAN]],
        };
        assert_eq!(bars.to_svg().matches("<rect").count(), 1 + 3);
        let histograms = Chart::Histograms { title: "h".into(), panels: vec![("s".into(), vec![(0.1, 3), (0.2, 0)])] };
        assert_eq!(histograms.to_svg().matches("<rect").count(), 1 + 2);
    }
}
