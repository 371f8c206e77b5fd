//! `/metrics`: the stats snapshot in Prometheus text exposition format, as a table of metrics
//! (name, type, help, and how its samples are read from a snapshot), so that a metric is one row
//! and the page is the table written out in order.

use std::fmt::Write as _;

use headway_common::stats::{LaneSnapshot, Snapshot, WaitPercentiles, WorkerSnapshot};

/// One metric: its name after `headway_`, its type, its help text, and its samples.
struct Metric {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    samples: fn(&Snapshot) -> Vec<Sample>,
}

/// A sample: its labels (`{a="b"}`, or empty) and its value.
type Sample = (String, f64);

const fn metric(
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    samples: fn(&Snapshot) -> Vec<Sample>,
) -> Metric {
    Metric { name, kind, help, samples }
}

/// The queue's metrics.
const QUEUE: &[Metric] = &[
    metric("queue_depth", "gauge", "Requests waiting in the queue.", |s| one(s.queue.depth as f64)),
    metric("queue_depth_max", "gauge", "Highest queue depth since the previous scrape.", |s| {
        one(s.queue.high_water as f64)
    }),
    metric("queue_wait_seconds", "summary", "Time from a request being complete to a slot starting it.", |s| {
        quantiles("", &s.queue.wait_ms)
    }),
    metric("service_seconds_mean", "gauge", "Moving mean of recent requests' service time.", |s| {
        one(s.queue.mean_service_ms / 1000.0)
    }),
    metric("queue_dispatched_total", "counter", "Requests handed to a slot.", |s| one(s.queue.dispatched as f64)),
    metric("shed_total", "counter", "Requests refused with 503.", |s| {
        let q = &s.queue;
        vec![
            ("{reason=\"queue_full\"}".to_owned(), q.shed_queue_full as f64),
            ("{reason=\"queue_timeout\"}".to_owned(), q.shed_queue_timeout as f64),
            ("{reason=\"would_time_out\"}".to_owned(), q.shed_at_arrival as f64),
            ("{reason=\"standing_queue\"}".to_owned(), q.shed_standing_queue as f64),
        ]
    }),
    metric("queue_target_seconds", "gauge", "Controlled delay's target wait (0 when switched off).", |s| {
        one(s.queue.target_ms / 1000.0)
    }),
    metric("queue_overloaded", "gauge", "1 while a sustained overload is held to the target wait.", |s| {
        one(f64::from(u8::from(s.queue.overloaded)))
    }),
    metric("queue_overloads_total", "counter", "Sustained overloads found.", |s| one(s.queue.overloads as f64)),
];

/// The lanes' metrics, written only while the lanes are on.
const LANES: &[Metric] = &[
    metric("lane_waiting", "gauge", "Requests waiting in each lane.", |s| per_lane(s, |lane| lane.waiting as f64)),
    metric("lane_running", "gauge", "Slots running each lane's requests.", |s| per_lane(s, |lane| lane.running as f64)),
    metric("lane_started_total", "counter", "Requests of each lane handed to a slot.", |s| {
        per_lane(s, |lane| lane.started as f64)
    }),
    metric("lane_service_seconds_mean", "gauge", "Moving mean service time of each lane's requests.", |s| {
        per_lane(s, |lane| lane.mean_service_ms / 1000.0)
    }),
    metric("lane_wait_seconds", "summary", "Time each lane's requests waited for a slot.", |s| {
        s.queue
            .lanes
            .iter()
            .flat_map(|lane| quantiles(&format!("lane=\"{}\",", label_value(&lane.name)), &lane.wait_ms))
            .collect()
    }),
    metric(
        "route_service_seconds_mean",
        "gauge",
        "Moving mean service time of each route, in the lane its latest request took (the most used 20 a lane).",
        |s| {
            s.queue
                .lanes
                .iter()
                .flat_map(|lane| {
                    lane.routes.iter().map(|route| {
                        let labels =
                            format!("{{lane=\"{}\",route=\"{}\"}}", label_value(&lane.name), label_value(&route.route));
                        (labels, route.mean_service_ms / 1000.0)
                    })
                })
                .collect()
        },
    ),
    metric("lane_passed_over_seconds", "gauge", "Longest a slow request is passed over by fast ones.", |s| {
        one(s.queue.lane_passed_over_ms / 1000.0)
    }),
    metric("lane_slow_slots", "gauge", "Most slots slow requests may hold while a fast request waits.", |s| {
        one(s.queue.lane_slow_slots as f64)
    }),
];

/// W and what an autoscaler scales by: the share of slots busy, the queue's waits since the
/// previous scrape (requests refused are `shed_total`).
const SCALING: &[Metric] = &[
    metric("workers", "gauge", "Workers serving or starting (not those draining away).", |s| {
        one(s.scaling.workers as f64)
    }),
    metric("workers_min", "gauge", "Fewest workers (-w MIN:MAX; 1 for a fixed count, moved only by hand).", |s| {
        one(s.scaling.min as f64)
    }),
    metric("workers_max", "gauge", "Most workers (-w MIN:MAX).", |s| one(s.scaling.max as f64)),
    metric(
        "scaling_events_total",
        "counter",
        "Workers added or removed, by cause (queue_wait, idle, signal, control), and adds refused by --max-memory \
         (memory_cap).",
        |s| {
            let e = &s.scaling.events;
            [
                ("queue_wait", e.queue_wait),
                ("idle", e.idle),
                ("memory_cap", e.memory_cap),
                ("signal", e.signal),
                ("control", e.control),
            ]
            .map(|(cause, n)| (format!("{{cause=\"{cause}\"}}"), n as f64))
            .to_vec()
        },
    ),
    metric("worker_seconds_total", "counter", "Workers alive x time: what the pool cost.", |s| {
        one(s.scaling.worker_seconds)
    }),
    metric("slots_busy_ratio", "gauge", "Share of the slots running a request (0 to 1).", |s| {
        one(if s.slots.total == 0 { 0.0 } else { s.slots.busy as f64 / s.slots.total as f64 })
    }),
    metric(
        "queue_wait_recent_seconds",
        "gauge",
        "Wait for a slot of the requests started since the previous scrape, by quantile (0 when none started).",
        |s| {
            [("0.5", s.recent.wait_p50_ms), ("0.99", s.recent.wait_p99_ms)]
                .iter()
                .map(|(quantile, ms)| (format!("{{quantile=\"{quantile}\"}}"), ms / 1000.0))
                .collect()
        },
    ),
];

/// The connections', the workers' and the front's metrics.
const SERVER: &[Metric] = &[
    metric("abandoned_total", "counter", "Requests whose client went away.", |s| {
        vec![
            ("{while=\"queued\"}".to_owned(), s.abandoned.queued as f64),
            ("{while=\"running\"}".to_owned(), s.abandoned.running as f64),
        ]
    }),
    metric("slots_busy", "gauge", "Slots running a request.", |s| one(s.slots.busy as f64)),
    metric("slots", "gauge", "Slots in all workers.", |s| one(s.slots.total as f64)),
    metric("connections_open", "gauge", "Open client connections speaking HTTP (WebSockets are counted apart).", |s| {
        one(s.connections.open as f64)
    }),
    metric("connections_idle", "gauge", "Client connections waiting for their next request.", |s| {
        one(s.connections.idle as f64)
    }),
    metric("connections_accepted_total", "counter", "Client connections accepted.", |s| {
        one(s.connections.accepted as f64)
    }),
    metric(
        "handshakes_failed_total",
        "counter",
        "Connections closed before a request: a PROXY header or TLS handshake failed or was late.",
        |s| one(s.connections.handshakes_failed as f64),
    ),
    metric("http2_connections_total", "counter", "Client connections that spoke HTTP/2.", |s| {
        one(s.connections.http2 as f64)
    }),
    metric("http2_streams_total", "counter", "Requests that came as HTTP/2 streams.", |s| {
        one(s.connections.http2_streams as f64)
    }),
    metric(
        "http2_calmed_total",
        "counter",
        "HTTP/2 connections closed with GOAWAY ENHANCE_YOUR_CALM for flooding.",
        |s| one(s.connections.http2_calmed as f64),
    ),
    metric("websockets_open", "gauge", "Open WebSockets.", |s| one(s.websockets.open as f64)),
    metric("websockets_opened_total", "counter", "WebSockets opened.", |s| one(s.websockets.opened as f64)),
    metric(
        "websockets_refused_total",
        "counter",
        "WebSocket handshakes refused with 503 over --max-websockets.",
        |s| one(s.websockets.refused as f64),
    ),
    metric(
        "websockets_held_bytes",
        "gauge",
        "Bytes of unfinished fragmented WebSocket messages held by the front (--max-websocket-held).",
        |s| one(s.websockets.held_bytes as f64),
    ),
    metric(
        "websockets_held_refused_total",
        "counter",
        "WebSockets closed with 1013 because their message would hold more than --max-websocket-held left.",
        |s| one(s.websockets.held_refused as f64),
    ),
    metric("responses_total", "counter", "Responses sent to clients, by status.", |s| by_code(&s.responses)),
    metric("static_responses_total", "counter", "Responses sent from --static mounts by the front, by status.", |s| {
        by_code(&s.static_files.responses)
    }),
    metric("static_bytes_total", "counter", "Body bytes sent from --static mounts.", |s| {
        one(s.static_files.bytes as f64)
    }),
    metric(
        "handed_off_total",
        "counter",
        "Files workers handed the front by X-Accel-Redirect or X-Sendfile: sent, or refused with 502.",
        |s| {
            vec![
                ("{result=\"sent\"}".to_owned(), s.static_files.handed_off as f64),
                ("{result=\"refused\"}".to_owned(), s.static_files.handoffs_refused as f64),
            ]
        },
    ),
    metric("worker_requests_total", "counter", "Requests served by each worker.", |s| {
        per_worker(s, |w| w.requests as f64)
    }),
    metric("worker_busy_slots", "gauge", "Busy slots of each worker.", |s| per_worker(s, |w| w.busy as f64)),
    metric("worker_busy_seconds_total", "counter", "Time each worker's slots spent running requests.", |s| {
        per_worker(s, |w| w.busy_secs)
    }),
    metric("worker_restarts_total", "counter", "Restarts of each worker.", |s| per_worker(s, |w| w.restarts as f64)),
    metric(
        "worker_unrequested_total",
        "counter",
        "Connections to each worker closed because it sent bytes no request asked for.",
        |s| per_worker(s, |w| w.unrequested as f64),
    ),
    metric(
        "worker_recycles_total",
        "counter",
        "Replacements of each worker's process, by cause (max_requests, memory, timeout, crash, reload).",
        |s| {
            s.workers
                .iter()
                .flat_map(|w| {
                    let r = &w.recycles;
                    [
                        ("max_requests", r.max_requests),
                        ("memory", r.memory),
                        ("timeout", r.timeout),
                        ("crash", r.crash),
                        ("reload", r.reload),
                    ]
                    .map(|(cause, n)| (format!("{{worker=\"{}\",cause=\"{cause}\"}}", w.index), n as f64))
                })
                .collect()
        },
    ),
    metric("worker_websockets", "gauge", "WebSockets open to each worker.", |s| per_worker(s, |w| w.websockets as f64)),
    metric("worker_rss_bytes", "gauge", "Resident memory of each worker's processes.", |s| {
        per_worker(s, |w| w.usage.rss_bytes as f64)
    }),
    metric("worker_cpu_seconds_total", "counter", "CPU time of each worker's processes.", |s| {
        per_worker(s, |w| w.usage.cpu_secs)
    }),
    metric("access_log_dropped_total", "counter", "Access log lines dropped because the writer fell behind.", |s| {
        one(s.access_log_dropped as f64)
    }),
    metric("temp_file_bytes", "gauge", "Bytes in the temporary files of request and response bodies.", |s| {
        one(s.temp_files.bytes as f64)
    }),
    metric(
        "temp_file_held_back_total",
        "counter",
        "Times a body waited for room in its temporary file (a response held back from its worker).",
        |s| one(s.temp_files.held_back as f64),
    ),
    metric("front_rss_bytes", "gauge", "Resident memory of the front.", |s| one(s.front.rss_bytes as f64)),
];

/// A sample for each status code counted.
fn by_code(counts: &std::collections::BTreeMap<String, u64>) -> Vec<(String, f64)> {
    counts.iter().map(|(code, n)| (format!("{{code=\"{code}\"}}"), *n as f64)).collect()
}

/// The snapshot in Prometheus text exposition format.
pub fn render(s: &Snapshot) -> String {
    let lanes: &[Metric] = if s.queue.lanes.is_empty() { &[] } else { LANES };
    let mut out = String::new();
    for metric in QUEUE.iter().chain(lanes).chain(SCALING).chain(SERVER) {
        let (name, kind, help) = (metric.name, metric.kind, metric.help);
        let _ = writeln!(out, "# HELP headway_{name} {help}\n# TYPE headway_{name} {kind}");
        for (labels, value) in (metric.samples)(s) {
            let _ = writeln!(out, "headway_{name}{labels} {value}");
        }
    }
    out
}

/// A metric of one sample, without labels.
fn one(value: f64) -> Vec<Sample> {
    vec![(String::new(), value)]
}

/// A sample for each lane, labelled with its name.
fn per_lane(s: &Snapshot, value: fn(&LaneSnapshot) -> f64) -> Vec<Sample> {
    s.queue.lanes.iter().map(|lane| (format!("{{lane=\"{}\"}}", label_value(&lane.name)), value(lane))).collect()
}

/// A sample for each worker, labelled with its index.
fn per_worker(s: &Snapshot, value: fn(&WorkerSnapshot) -> f64) -> Vec<Sample> {
    s.workers.iter().map(|w| (format!("{{worker=\"{}\"}}", w.index), value(w))).collect()
}

/// A summary's quantiles in seconds, each labelled with `labels` (ending in a comma, or empty)
/// and its quantile.
fn quantiles(labels: &str, wait_ms: &WaitPercentiles) -> Vec<Sample> {
    [("0.5", wait_ms.p50), ("0.9", wait_ms.p90), ("0.99", wait_ms.p99), ("0.999", wait_ms.p999)]
        .iter()
        .map(|(quantile, ms)| (format!("{{{labels}quantile=\"{quantile}\"}}"), ms / 1000.0))
        .collect()
}

/// A Prometheus label value: backslash, double quote and line feed escaped.
fn label_value(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_has_a_name_of_its_own_a_type_and_help() {
        let all: Vec<&Metric> = QUEUE.iter().chain(LANES).chain(SCALING).chain(SERVER).collect();
        let mut names: Vec<&str> = all.iter().map(|metric| metric.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len(), "a name used twice");
        for metric in all {
            assert!(metric.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'));
            assert!(["gauge", "counter", "summary"].contains(&metric.kind), "{}", metric.name);
            assert!(metric.help.ends_with('.') && !metric.help.contains('\n'), "{}", metric.name);
        }
    }
}
