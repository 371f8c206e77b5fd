//! Lanes: the order in which the one queue's waiting requests start, when they are not all alike.
//!
//! One first-in-first-out queue is the best order for requests the queue knows nothing about.
//! But the queue measures every request's service time ([`super::routes`] learns it per route),
//! and when a few routes take far longer than the rest (reports, exports, uploads beside cheap
//! pages), a fast request waiting behind slow ones waits for them for nothing: started first, it
//! would have held its slot a moment and delayed them by that moment. So the waiting requests
//! are kept in two classes, each in arrival order: *fast* (the `fast` lane: every route not known
//! to be slow) and *slow* (the learned `slow` lane, and one lane per `--lane PATTERN`, which names
//! slow routes outright). A free slot takes, by [`choose`]:
//! - the first fast request, so that fast requests do not wait behind slow ones;
//! - unless the first slow request has been passed over for [`Rule::passed_over`] (half the slow
//!   class's service time, at most half the queue timeout): then whichever of the two came
//!   first, so that a slow request waits little longer than its turn;
//! - but never a slow request while a fast one waits and slow requests already hold
//!   [`Rule::slow_slots`] slots: their class's share of the slot time lately (at least one slot),
//!   so that slow requests cannot take every slot from fast ones;
//! - and, whatever else, any request when only one class waits: no slot idles while a request
//!   waits.
//!
//! A request waits in the lane its route's speed gave it on arrival. When a route learned slow
//! turns fast again while some of its requests wait in the slow lane, they are fast requests, and
//! go in their arrival order among the fast ones rather than behind them (an app of one route
//! after a warm-up of cheap requests shows it: its route seems slow, then is the typical request).
//!
//! Why this rule, and what it costs the slow requests, is in docs/design/lanes.md, with the
//! simulation that chose it. Everything else about the queue holds for every lane alike: the length
//! limit, the deadline and the refusals on arrival, controlled delay, the withdrawal of a request
//! whose client left; and a connection has one request in the queue at a time, so lanes never
//! reorder the requests of one connection.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use headway_common::stats::{LaneKind, LaneSnapshot, RouteSnapshot, WaitPercentiles};
use tokio::time::Instant;

use super::job::{Job, Ticket};
use super::route_table::{route_name, Routes, Speed};
use super::routing::{LaneId, RouteKey, Routing};

/// A slow request is passed over for at most its class's service time divided by this.
const PASSED_OVER_FRACTION: u32 = 2;
/// Weight of the newest request in a lane's moving mean service time.
const SERVICE_WEIGHT: f64 = 0.1;
/// Each finished request keeps this much of the slot time the classes used before it: their
/// shares follow about the last 128 requests.
const BUSY_KEEP: f64 = 1.0 - 1.0 / 128.0;
/// Routes each lane lists in stats, the most used first.
pub const ROUTES_SHOWN: usize = 20;

impl LaneId {
    fn declared(index: usize) -> LaneId {
        LaneId(u8::try_from(index + 2).expect("at most MAX_DECLARED lanes"))
    }

    fn of(speed: Speed) -> LaneId {
        match speed {
            Speed::Fast => LaneId::FAST,
            Speed::Slow => LaneId::SLOW,
        }
    }

    fn class(self) -> Class {
        if self == LaneId::FAST {
            Class::Fast
        } else {
            Class::Slow
        }
    }
}

/// `--lane` patterns accepted at most.
pub const MAX_DECLARED: usize = 32;

/// Which of the two orders a lane's requests wait in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Fast,
    Slow,
}

/// `--lane PATTERN`: `[METHOD ]PATH`, the path a glob where `*` matches within a segment and `**`
/// any number of segments (`/reports/**`, `POST /upload`, `/export/*.csv`).
#[derive(Debug, Clone)]
pub struct LanePattern {
    text: String,
    method: Option<http::Method>,
    path: glob::Pattern,
}

impl LanePattern {
    pub fn parse(text: &str) -> Result<LanePattern, String> {
        let trimmed = text.trim();
        let (method, path) = match trimmed.split_once(char::is_whitespace) {
            Some((method, path)) => (Some(method), path.trim()),
            None => (None, trimmed),
        };
        let method = method
            .map(|method| http::Method::from_bytes(method.to_ascii_uppercase().as_bytes()))
            .transpose()
            .map_err(|_| format!("'{text}': the method is not an HTTP method"))?;
        if !path.starts_with('/') {
            return Err(format!("'{text}' is not [METHOD ]PATH with a path such as /reports/*"));
        }
        let path = glob::Pattern::new(path).map_err(|err| format!("'{text}': {err}"))?;
        Ok(LanePattern { text: trimmed.to_owned(), method, path })
    }

    fn matches(&self, method: &http::Method, path: &str) -> bool {
        const OPTIONS: glob::MatchOptions = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: false,
        };
        self.method.as_ref().is_none_or(|wanted| wanted == method) && self.path.matches_with(path, OPTIONS)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// `--no-lanes` and `--lane`.
#[derive(Debug, Clone)]
pub struct LaneSettings {
    pub enabled: bool,
    pub declared: Vec<LanePattern>,
}

impl Default for LaneSettings {
    fn default() -> Self {
        LaneSettings { enabled: true, declared: Vec::new() }
    }
}

impl LaneSettings {
    /// A request's route and the `--lane` pattern it matches, if any: the part of placing it
    /// that needs no lock. `None` when lanes are off.
    pub fn arrival(&self, request: &http::Request<impl Sized>) -> Option<Arrival> {
        if !self.enabled {
            return None;
        }
        let (method, path) = (request.method(), request.uri().path());
        let declared = self.declared.iter().position(|pattern| pattern.matches(method, path)).map(LaneId::declared);
        Some(Arrival { route: RouteKey::of(method, path), declared })
    }
}

/// Where a request is headed, worked out before the queue's lock is taken.
pub struct Arrival {
    route: RouteKey,
    declared: Option<LaneId>,
}

/// The rule's two figures as they stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// How long the first slow request may be passed over by fast ones.
    pub passed_over: Duration,
    /// The most slots slow requests may hold while a fast request waits (at least one).
    pub slow_slots: usize,
}

/// Which class a free slot takes from, given how long the first request of each class has
/// waited (`None`: none waits) and how many slots slow requests hold. `None` when nothing waits.
pub fn choose(fast: Option<Duration>, slow: Option<Duration>, slow_running: usize, rule: Rule) -> Option<Class> {
    match (fast, slow) {
        (None, None) => None,
        (Some(_), None) => Some(Class::Fast),
        (None, Some(_)) => Some(Class::Slow),
        (Some(_), Some(_)) if slow_running >= rule.slow_slots => Some(Class::Fast),
        (Some(fast), Some(slow)) if slow >= rule.passed_over && slow >= fast => Some(Class::Slow),
        (Some(_), Some(_)) => Some(Class::Fast),
    }
}

/// One lane's figures.
struct Lane {
    name: Arc<str>,
    kind: LaneKind,
    waiting: usize,
    running: usize,
    /// Waits of the requests it started, in microseconds.
    waits: Histogram<u64>,
    mean_service_secs: f64,
    finished: u64,
}

impl Lane {
    fn new(name: &str, kind: LaneKind, timeout: Duration) -> Lane {
        let max = timeout.as_micros().max(1_000_000) as u64 * 2;
        Lane {
            name: name.into(),
            kind,
            waiting: 0,
            running: 0,
            waits: Histogram::new_with_max(max, 2).expect("valid histogram bounds"),
            mean_service_secs: 0.0,
            finished: 0,
        }
    }
}

/// The waiting requests in their classes, and what the lanes learn.
pub struct Lanes {
    timeout: Duration,
    routes: Routes,
    fast: VecDeque<Box<Job>>,
    slow: VecDeque<Box<Job>>,
    /// Indexed by [`LaneId`].
    lanes: Vec<Lane>,
    times: ClassTimes,
}

/// What the rule's figures come from: the slot time each class used lately, and the slow
/// class's service time.
#[derive(Debug, Default)]
pub struct ClassTimes {
    /// Seconds of slot time, decayed by [`BUSY_KEEP`] at each finished request.
    busy_fast: f64,
    busy_slow: f64,
    /// The slow class's moving mean service time in seconds, and how many requests fed it.
    slow_service_secs: f64,
    slow_finished: u64,
}

impl ClassTimes {
    /// Learns from a request of `class` that ran for `took`.
    pub fn finished(&mut self, class: Class, took: Duration) {
        let secs = took.as_secs_f64();
        self.busy_fast *= BUSY_KEEP;
        self.busy_slow *= BUSY_KEEP;
        match class {
            Class::Fast => self.busy_fast += secs,
            Class::Slow => {
                self.busy_slow += secs;
                moving_mean(&mut self.slow_service_secs, self.slow_finished, secs);
                self.slow_finished += 1;
            }
        }
    }

    /// The rule's figures for `slots` slots and a queue timeout of `timeout`: a slow request is
    /// passed over for at most half the slow class's service time, and at most half the timeout
    /// (which is also the bound until a slow request has been measured); slow requests may hold
    /// their class's share of the slot time lately, rounded, and at least one slot.
    pub fn rule(&self, slots: usize, timeout: Duration) -> Rule {
        let busy = self.busy_fast + self.busy_slow;
        let share = if busy > 0.0 { self.busy_slow / busy } else { 0.0 };
        let slow_slots = ((slots as f64 * share).round() as usize).max(1);
        let slow_service =
            if self.slow_finished > 0 { Duration::from_secs_f64(self.slow_service_secs) } else { timeout };
        Rule { passed_over: (slow_service / PASSED_OVER_FRACTION).min(timeout / 2), slow_slots }
    }
}

impl Lanes {
    pub fn new(settings: &LaneSettings, timeout: Duration) -> Lanes {
        let mut lanes = Vec::new();
        if settings.enabled {
            lanes.push(Lane::new("fast", LaneKind::Learned, timeout));
            lanes.push(Lane::new("slow", LaneKind::Learned, timeout));
            let declared = settings.declared.iter();
            lanes.extend(declared.map(|pattern| Lane::new(pattern.as_str(), LaneKind::Declared, timeout)));
        }
        Lanes {
            timeout,
            routes: Routes::default(),
            fast: VecDeque::new(),
            slow: VecDeque::new(),
            lanes,
            times: ClassTimes::default(),
        }
    }

    /// The name of each lane, by [`LaneId`]; empty when lanes are off.
    pub fn names(&self) -> Vec<Arc<str>> {
        self.lanes.iter().map(|lane| lane.name.clone()).collect()
    }

    /// The lane a request takes: the pattern it matches, else the one its route's speed gives.
    pub fn place(&mut self, arrival: Option<Arrival>, request: &http::Request<impl Sized>) -> Routing {
        let Some(Arrival { route, declared }) = arrival else { return Routing::default() };
        let name = |numbered| route_name(request.method(), request.uri().path(), numbered);
        let lane = self.routes.arrive(route, |speed| declared.unwrap_or(LaneId::of(speed)), name);
        Routing { lane, route: Some(route) }
    }

    pub fn len(&self) -> usize {
        self.fast.len() + self.slow.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fast.is_empty() && self.slow.is_empty()
    }

    fn class_mut(&mut self, class: Class) -> &mut VecDeque<Box<Job>> {
        match class {
            Class::Fast => &mut self.fast,
            Class::Slow => &mut self.slow,
        }
    }

    fn lane_mut(&mut self, lane: LaneId) -> Option<&mut Lane> {
        self.lanes.get_mut(lane.index())
    }

    /// Queues a request at the back of its class.
    pub fn push_back(&mut self, job: Box<Job>) {
        let lane = job.routing.lane;
        self.lane_mut(lane).into_iter().for_each(|lane| lane.waiting += 1);
        self.class_mut(lane.class()).push_back(job);
    }

    /// Puts back a job a slot took but could not run: first in its class, where it was.
    pub fn give_back(&mut self, job: Box<Job>) {
        let lane = job.routing.lane;
        if let Some(lane) = self.lane_mut(lane) {
            lane.waiting += 1;
            lane.running = lane.running.saturating_sub(1);
        }
        self.class_mut(lane.class()).push_front(job);
    }

    /// The rule's figures as they stand, for `slots` slots in all.
    pub fn rule(&self, slots: usize) -> Rule {
        self.times.rule(slots, self.timeout)
    }

    /// Takes the request a free slot (of `slots` in all) starts next, by [`choose`].
    pub fn pop_next(&mut self, now: Instant, slots: usize) -> Option<Box<Job>> {
        let waited =
            |queue: &VecDeque<Box<Job>>| queue.front().map(|job| now.saturating_duration_since(job.complete_at));
        let slow_running = self.lanes.iter().skip(1).map(|lane| lane.running).sum();
        let class = if self.fast_again_first() {
            Class::Slow
        } else {
            choose(waited(&self.fast), waited(&self.slow), slow_running, self.rule(slots))?
        };
        let job = self.class_mut(class).pop_front()?;
        self.lane_mut(job.routing.lane).into_iter().for_each(|lane| lane.waiting = lane.waiting.saturating_sub(1));
        Some(job)
    }

    /// Whether the first slow request is of a route learned fast since it arrived, and came before
    /// the first fast one: then it goes first, as the fast request it now is.
    fn fast_again_first(&mut self) -> bool {
        let Some(job) = self.slow.front() else { return false };
        let (arrived, routing) = (job.complete_at, job.routing);
        let fast_again = routing.lane == LaneId::SLOW && routing.route.is_some_and(|route| !self.routes.is_slow(route));
        fast_again && self.fast.front().is_none_or(|fast| arrived <= fast.complete_at)
    }

    /// Counts a request handed to a slot after waiting `waited`.
    pub fn started(&mut self, routing: Routing, waited: Duration) {
        if let Some(lane) = self.lane_mut(routing.lane) {
            lane.running += 1;
            lane.waits.saturating_record(waited.as_micros() as u64);
        }
    }

    /// Learns from a request that ran for `took`.
    pub fn finished(&mut self, routing: Routing, took: Duration) {
        let Some(lane) = self.lane_mut(routing.lane) else { return };
        let secs = took.as_secs_f64();
        lane.running = lane.running.saturating_sub(1);
        moving_mean(&mut lane.mean_service_secs, lane.finished, secs);
        lane.finished += 1;
        self.times.finished(routing.lane.class(), took);
        if let Some(route) = routing.route {
            self.routes.record(route, took);
        }
    }

    /// Takes out a waiting request whose client left.
    pub fn remove(&mut self, ticket: Ticket) -> Option<Box<Job>> {
        let (class, index) = [Class::Fast, Class::Slow].into_iter().find_map(|class| {
            let queue = match class {
                Class::Fast => &self.fast,
                Class::Slow => &self.slow,
            };
            queue.iter().position(|job| job.ticket == ticket).map(|index| (class, index))
        })?;
        let job = self.class_mut(class).remove(index)?;
        self.lane_mut(job.routing.lane).into_iter().for_each(|lane| lane.waiting = lane.waiting.saturating_sub(1));
        Some(job)
    }

    /// The class whose first (`newest`: last) request arrived first (last).
    fn end(&self, newest: bool) -> Option<Class> {
        let at =
            |queue: &VecDeque<Box<Job>>| if newest { queue.back() } else { queue.front() }.map(|job| job.complete_at);
        match (at(&self.fast), at(&self.slow)) {
            (None, None) => None,
            (Some(_), None) => Some(Class::Fast),
            (None, Some(_)) => Some(Class::Slow),
            (Some(fast), Some(slow)) => Some(if (fast <= slow) != newest { Class::Fast } else { Class::Slow }),
        }
    }

    /// The request that has waited longest: the next whose deadline comes.
    pub fn oldest(&self) -> Option<&Job> {
        match self.end(false)? {
            Class::Fast => self.fast.front().map(Box::as_ref),
            Class::Slow => self.slow.front().map(Box::as_ref),
        }
    }

    /// The request that arrived last.
    pub fn newest(&self) -> Option<&Job> {
        match self.end(true)? {
            Class::Fast => self.fast.back().map(Box::as_ref),
            Class::Slow => self.slow.back().map(Box::as_ref),
        }
    }

    /// Takes out the request that has waited longest.
    pub fn pop_oldest(&mut self) -> Option<Box<Job>> {
        let job = self.class_mut(self.end(false)?).pop_front()?;
        self.lane_mut(job.routing.lane).into_iter().for_each(|lane| lane.waiting = lane.waiting.saturating_sub(1));
        Some(job)
    }

    /// Takes out the request that arrived last.
    pub fn pop_newest(&mut self) -> Option<Box<Job>> {
        let job = self.class_mut(self.end(true)?).pop_back()?;
        self.lane_mut(job.routing.lane).into_iter().for_each(|lane| lane.waiting = lane.waiting.saturating_sub(1));
        Some(job)
    }

    /// Every lane as stats show it, with its routes; none when lanes are off.
    pub fn snapshot(&self) -> Vec<LaneSnapshot> {
        let routes = self.routes.figures();
        let ms = |micros: u64| micros as f64 / 1000.0;
        self.lanes
            .iter()
            .enumerate()
            .map(|(index, lane)| LaneSnapshot {
                name: lane.name.to_string(),
                kind: lane.kind,
                routes: routes
                    .iter()
                    .filter(|route| route.lane.index() == index)
                    .take(ROUTES_SHOWN)
                    .map(|route| RouteSnapshot {
                        route: route.name.clone(),
                        mean_service_ms: route.mean_service.as_secs_f64() * 1000.0,
                    })
                    .collect(),
                mean_service_ms: lane.mean_service_secs * 1000.0,
                waiting: lane.waiting,
                running: lane.running,
                started: lane.waits.len(),
                wait_ms: WaitPercentiles {
                    p50: ms(lane.waits.value_at_quantile(0.5)),
                    p90: ms(lane.waits.value_at_quantile(0.9)),
                    p99: ms(lane.waits.value_at_quantile(0.99)),
                    p999: ms(lane.waits.value_at_quantile(0.999)),
                    max: ms(lane.waits.max()),
                    mean: lane.waits.mean() / 1000.0,
                },
            })
            .collect()
    }
}

/// Moves `mean`, fed by `count` values so far, towards `value`.
fn moving_mean(mean: &mut f64, count: u64, value: f64) {
    *mean = if count == 0 { value } else { *mean + SERVICE_WEIGHT * (value - *mean) };
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const RULE: Rule = Rule { passed_over: Duration::from_millis(100), slow_slots: 2 };

    #[test]
    fn fast_first_unless_the_slow_one_was_passed_over_long_enough_but_never_more_slow_slots_than_its_share() {
        assert_eq!(choose(None, None, 0, RULE), None);
        assert_eq!(choose(Some(MS), None, 5, RULE), Some(Class::Fast));
        assert_eq!(choose(None, Some(MS), 5, RULE), Some(Class::Slow), "no slot idles while a request waits");
        assert_eq!(choose(Some(MS), Some(99 * MS), 0, RULE), Some(Class::Fast));
        assert_eq!(choose(Some(MS), Some(100 * MS), 0, RULE), Some(Class::Slow), "passed over long enough");
        assert_eq!(choose(Some(150 * MS), Some(100 * MS), 0, RULE), Some(Class::Fast), "the older of the two");
        assert_eq!(choose(Some(MS), Some(500 * MS), 2, RULE), Some(Class::Fast), "slow ones hold their share");
    }

    #[test]
    fn the_rule_follows_the_slow_class_time_and_share() {
        let mut times = ClassTimes::default();
        let timeout = Duration::from_secs(10);
        assert_eq!(times.rule(4, timeout), Rule { passed_over: timeout / 2, slow_slots: 1 });
        for _ in 0..9 {
            times.finished(Class::Fast, 20 * MS);
        }
        times.finished(Class::Slow, 500 * MS);
        // 500 ms of every 680 ms of slot time: 2.9 of 4 slots.
        assert_eq!(times.rule(4, timeout), Rule { passed_over: 250 * MS, slow_slots: 3 });
        assert_eq!(times.rule(4, 300 * MS).passed_over, 150 * MS, "at most half the queue timeout");
    }

    #[test]
    fn a_request_arrives_by_its_path_without_the_query_and_the_first_pattern_it_matches() {
        let request = |target: &str| http::Request::builder().uri(target).body(()).expect("a request");
        let settings = LaneSettings {
            enabled: true,
            declared: vec![LanePattern::parse("/export/*").unwrap(), LanePattern::parse("/export/**").unwrap()],
        };
        let arrival = |target| settings.arrival(&request(target)).expect("lanes are on");
        assert_eq!(arrival("/a?x=1").route, arrival("/a").route);
        assert_eq!((arrival("/a").declared, arrival("/export/x").declared), (None, Some(LaneId(2))));
        assert_eq!(arrival("/export/x/y").declared, Some(LaneId(3)));
        let off = LaneSettings { enabled: false, declared: Vec::new() };
        assert!(off.arrival(&request("/a")).is_none());
    }

    #[test]
    fn a_request_left_in_the_slow_lane_when_its_route_turns_fast_goes_in_its_arrival_order() {
        let settings = LaneSettings::default();
        let mut lanes = Lanes::new(&settings, Duration::from_secs(10));
        let request = |path: &str| {
            let body = crate::queue::job::RequestBody::Memory(bytes::Bytes::new());
            http::Request::builder().uri(path).body(body).expect("a request")
        };
        let arrive = |lanes: &mut Lanes, path: &str| {
            let (mut job, _outcome) = Job::new(request(path), None);
            job.routing = lanes.place(settings.arrival(&job.request), &job.request);
            job
        };
        let learn = |lanes: &mut Lanes, job: Box<Job>, took: Duration| {
            lanes.started(job.routing, Duration::ZERO);
            lanes.finished(job.routing, took);
        };
        for _ in 0..9 {
            let job = arrive(&mut lanes, "/a");
            learn(&mut lanes, job, 10 * MS);
        }
        for _ in 0..2 {
            let job = arrive(&mut lanes, "/b");
            learn(&mut lanes, job, 500 * MS);
        }
        let left = arrive(&mut lanes, "/b?left");
        assert_eq!(left.routing.lane, LaneId::SLOW);
        lanes.push_back(left);
        // /b now takes 10 ms: fast again once the typical request is computed again.
        for _ in 0..21 {
            let job = arrive(&mut lanes, "/b");
            learn(&mut lanes, job, 10 * MS);
        }
        assert_eq!(arrive(&mut lanes, "/b").routing.lane, LaneId::FAST);
        let later = arrive(&mut lanes, "/a?later");
        assert_eq!(later.routing.lane, LaneId::FAST);
        lanes.push_back(later);
        let now = Instant::now();
        let order: Vec<String> =
            std::iter::from_fn(|| lanes.pop_next(now, 1)).map(|job| job.request.uri().to_string()).collect();
        assert_eq!(order, ["/b?left", "/a?later"], "in arrival order, as the fast requests both are");
    }

    #[test]
    fn lane_patterns() {
        let reports = LanePattern::parse("/reports/**").expect("valid");
        assert!(reports.matches(&http::Method::GET, "/reports/2024/q1"));
        assert!(!reports.matches(&http::Method::GET, "/reportsx"));
        let upload = LanePattern::parse("post /upload/*").expect("valid");
        assert_eq!(upload.as_str(), "post /upload/*");
        assert!(upload.matches(&http::Method::POST, "/upload/big.bin"));
        assert!(!upload.matches(&http::Method::PUT, "/upload/big.bin"));
        assert!(!upload.matches(&http::Method::POST, "/upload/a/b"), "* stays within a segment");
        for bad in ["reports", "GET", "G@T /x", "/a/[b"] {
            assert!(LanePattern::parse(bad).is_err(), "{bad}");
        }
    }
}
