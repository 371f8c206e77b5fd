//! Rounds (`headway lab run --rounds N`): every server configuration run N times, and each row of
//! the tables the median of its rounds.
//!
//! Why: on a shared machine one run of a few seconds is a sample, not a figure. Two servers
//! measured a minute apart can differ by a quarter from one run to the next for reasons that are
//! neither's (another tenant, the hypervisor), and the ratio of one run says little. Rounds run the
//! servers in turn, their order reversed every other round so that neither always goes first, and
//! the tables show each row's median round: a whole measured row, not a mix of figures from
//! different rounds, so its columns still agree with each other. Every round's rows stay in the
//! JSON report.

use crate::measure::{distinct, Row};

/// The figure a scenario's rows are ranked by to find the median round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Headline {
    /// Requests per second, higher is better (`throughput`).
    Throughput,
    /// The 99th percentile of latency, lower is better (the tail scenarios).
    TailLatency,
}

impl Headline {
    /// How good `row` is by this figure: larger is better. A row without the figure (nothing
    /// answered) is the worst.
    fn goodness(self, row: &Row) -> f64 {
        let value = match self {
            Headline::Throughput => row.rps,
            Headline::TailLatency => row.latency(99.0).map_or(f64::NAN, |p99| -p99),
        };
        if value.is_nan() {
            f64::NEG_INFINITY
        } else {
            value
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Headline::Throughput => "requests/s",
            Headline::TailLatency => "p99",
        }
    }
}

/// The servers in the order they run in `round` (from 1): as given in odd rounds, reversed in
/// even ones.
pub fn in_turn<T>(servers: &[T], round: usize) -> Vec<&T> {
    let mut order: Vec<&T> = servers.iter().collect();
    if round.is_multiple_of(2) {
        order.reverse();
    }
    order
}

/// One row for each configuration, case and server: the median of its rounds by `headline`, in
/// the order the first round ran them. With an even number of rounds, the worse of the two in the
/// middle.
pub fn medians(rows: &[Row], headline: Headline) -> Vec<Row> {
    let key = |row: &Row| (row.group.clone(), row.case.label.clone(), row.server.clone());
    distinct(rows, key)
        .into_iter()
        .map(|wanted| {
            let mut rounds: Vec<&Row> = rows.iter().filter(|row| key(row) == wanted).collect();
            rounds.sort_by(|a, b| headline.goodness(a).total_cmp(&headline.goodness(b)));
            rounds[(rounds.len() - 1) / 2].clone()
        })
        .collect()
}

/// The note under each table of a run with several rounds.
pub fn note(rounds: usize, headline: Headline) -> String {
    format!(
        "each row: the median of {rounds} rounds by {}, the servers in turn (order reversed every \
         other round); every round is in the JSON report (all_rounds)",
        headline.describe()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ideal::{Ideal, Service};
    use crate::measure::{CaseParams, RowContext};

    fn row(server: &str, case: &str, round: usize, rps: f64, p99: f64) -> Row {
        let case = CaseParams { label: case.into(), ..CaseParams::default() };
        let service = Service { mean_secs: 0.0, cpu_secs: 0.0 };
        let ideal = Ideal { rps: f64::NAN, latency_secs: f64::NAN };
        let context = RowContext {
            scenario: "test",
            server,
            group: "2 workers x 5 slots",
            workers: 2,
            threads: 5,
            app: "demo",
            case: &case,
            service,
            ideal,
            peak_rss_bytes: 0,
        };
        let mut row = Row::empty(context);
        row.round = round;
        row.rps = rps;
        row.latency_secs = vec![0.0, 0.0, 0.0, 0.0, 0.0, 0.0, p99, p99];
        row
    }

    #[test]
    fn servers_take_turns_going_first() {
        let servers = ["headway", "granian", "puma"];
        assert_eq!(in_turn(&servers, 1), [&"headway", &"granian", &"puma"]);
        assert_eq!(in_turn(&servers, 2), [&"puma", &"granian", &"headway"]);
        assert_eq!(in_turn(&servers, 3), in_turn(&servers, 1));
    }

    #[test]
    fn each_row_is_its_median_round_whole() {
        let rows = vec![
            row("headway", "hello", 1, 900.0, 0.030),
            row("granian", "hello", 1, 1000.0, 0.020),
            row("granian", "hello", 2, 800.0, 0.040),
            row("headway", "hello", 2, 1100.0, 0.010),
            row("headway", "hello", 3, 1000.0, 0.050),
            row("granian", "hello", 3, 1200.0, 0.030),
        ];
        let by_rps = medians(&rows, Headline::Throughput);
        let picked: Vec<(&str, usize)> = by_rps.iter().map(|r| (r.server.as_str(), r.round)).collect();
        assert_eq!(picked, [("headway", 3), ("granian", 1)], "first-seen order, median rps");
        // The whole row of that round, its latency with it.
        assert_eq!(by_rps[0].latency(99.0), Some(0.050));

        let by_p99 = medians(&rows, Headline::TailLatency);
        let picked: Vec<usize> = by_p99.iter().map(|r| r.round).collect();
        assert_eq!(picked, [1, 3], "median p99: 0.030 of 0.010/0.030/0.050, 0.030 of 0.020/0.030/0.040");
    }

    #[test]
    fn an_even_number_of_rounds_takes_the_worse_middle_one() {
        let rows = vec![
            row("headway", "hello", 1, 900.0, 0.010),
            row("headway", "hello", 2, 1100.0, 0.040),
            row("headway", "hello", 3, 1000.0, 0.020),
            row("headway", "hello", 4, 1200.0, 0.030),
        ];
        assert_eq!(medians(&rows, Headline::Throughput)[0].rps, 1000.0);
        assert_eq!(medians(&rows, Headline::TailLatency)[0].latency(99.0), Some(0.030));
    }

    #[test]
    fn a_round_that_answered_nothing_ranks_last() {
        let mut failed = row("headway", "hello", 2, f64::NAN, 0.0);
        failed.latency_secs.clear();
        let rows = vec![row("headway", "hello", 1, 900.0, 0.020), failed, row("headway", "hello", 3, 1000.0, 0.010)];
        assert_eq!(medians(&rows, Headline::Throughput)[0].round, 1);
        assert_eq!(medians(&rows, Headline::TailLatency)[0].round, 1);
    }
}
