//! Routes: the kinds of request the queue serves, and how long each kind takes, learned from the
//! requests it has run. The lanes ([`super::lanes`]) order waiting requests by what is learned here.
//!
//! A route is a request's method and path with its identifier-like segments folded, so that
//! `GET /orders/8121` and `GET /orders/8122` are one route and the table of routes stays small:
//! - a UUID, a string of 16 or more hex digits, or any segment of 24 characters or more (a token,
//!   a slug) is always an identifier, shown as `{id}`;
//! - a number is one only once its route has shown more than [`MAX_VARIANTS`] different numbers:
//!   until then each is a route of its own. A number in a path is as often a parameter that
//!   changes the work (the demo's `/sleep/20` and `/sleep/500`, `/api/2/...`) as an id that does
//!   not, and a handful of values tells the two apart.
//!
//! Each route keeps a moving mean of its service time and how many of its requests finished
//! lately. A route is *slow* when its mean is at least [`SLOW_RATIO`] times that of the typical
//! request (the median of the routes' means, weighted by how many of their requests finished),
//! and fast again once under [`FAST_AGAIN_RATIO`] times it, so that a route near the line does not
//! go to and fro. One finished request is enough to place a route: a slow one met first in the
//! fast lane costs every fast request behind it, and a fast route thought slow for a few requests
//! only waits a little longer. A route not measured yet is fast.
//!
//! Memory is bounded: at most [`CAPACITY`] routes, a new one taking the place of the least used;
//! every [`DECAY_EVERY`] finished requests each route's count is halved, so that what was used
//! long ago makes room. Names are cut at [`NAME_LEN`] characters.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::time::Duration;

use foldhash::fast::{FixedState, RandomState};

use super::routing::{LaneId, RouteKey};

/// Routes kept at most.
pub const CAPACITY: usize = 256;
/// Different numbers a route's number segments may show before they count as identifiers.
pub const MAX_VARIANTS: usize = 8;
/// A route is slow at this many times the typical request's service time...
const SLOW_RATIO: f64 = 4.0;
/// ...and fast again under this many times it.
const FAST_AGAIN_RATIO: f64 = 2.0;
/// Nothing under this is slow, whatever the ratio: among requests this short, order matters less
/// than the time it takes to decide it.
const SLOW_AT_LEAST: Duration = Duration::from_millis(1);
/// Weight of the newest service time in a route's moving mean: about its last four requests.
const WEIGHT: f64 = 0.25;
/// Finished requests between two halvings of every route's count.
const DECAY_EVERY: u64 = 4096;
/// Finished requests between two computations of the typical service time (every one until then).
const REFERENCE_EVERY: u64 = 16;
/// Longest route name kept, in characters.
const NAME_LEN: usize = 120;
/// Segments this long or longer (in bytes: a path is ASCII, percent-encoded) are identifiers.
const TOKEN_LEN: usize = 24;
/// Hex strings this long or longer are identifiers.
const HEX_LEN: usize = 16;

impl RouteKey {
    /// The key of a request, from its method and path (the query is not part of a route).
    /// Computed without allocating: this runs for every request.
    pub fn of(method: &http::Method, path: &str) -> RouteKey {
        let state = FixedState::default();
        let mut folded = state.build_hasher();
        let mut numbered = state.build_hasher();
        method.as_str().hash(&mut folded);
        method.as_str().hash(&mut numbered);
        let mut has_numbers = false;
        for segment in segments(path) {
            match Segment::of(segment) {
                Segment::Literal => {
                    segment.hash(&mut folded);
                    segment.hash(&mut numbered);
                }
                Segment::Number => {
                    has_numbers = true;
                    Segment::Number.hash(&mut folded);
                    segment.hash(&mut numbered);
                }
                Segment::Id => {
                    Segment::Id.hash(&mut folded);
                    Segment::Id.hash(&mut numbered);
                }
            }
        }
        RouteKey { folded: folded.finish(), numbered: has_numbers.then(|| numbered.finish()) }
    }
}

/// A path's segments: what lies between its slashes.
fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.strip_prefix('/').unwrap_or(path).split('/')
}

/// What a path segment is to a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Segment {
    Literal,
    Number,
    Id,
}

impl Segment {
    fn of(segment: &str) -> Segment {
        let bytes = segment.as_bytes();
        if !bytes.is_empty() && bytes.iter().all(u8::is_ascii_digit) {
            Segment::Number
        } else if is_uuid(bytes)
            || (bytes.len() >= HEX_LEN && bytes.iter().all(u8::is_ascii_hexdigit))
            || bytes.len() >= TOKEN_LEN
        {
            Segment::Id
        } else {
            Segment::Literal
        }
    }
}

/// `8-4-4-4-12` hex digits.
fn is_uuid(bytes: &[u8]) -> bool {
    bytes.len() == 36
        && bytes.iter().enumerate().all(|(index, byte)| match index {
            8 | 13 | 18 | 23 => *byte == b'-',
            _ => byte.is_ascii_hexdigit(),
        })
}

/// A route's name as stats show it: `GET /orders/{id}`, its numbers kept or not.
pub fn route_name(method: &http::Method, path: &str, keep_numbers: bool) -> Box<str> {
    let mut name = format!("{method} ");
    for segment in segments(path) {
        name.push('/');
        match Segment::of(segment) {
            Segment::Number if keep_numbers => name.push_str(segment),
            Segment::Literal => name.push_str(segment),
            Segment::Number | Segment::Id => name.push_str("{id}"),
        }
    }
    if name.chars().count() > NAME_LEN {
        name = name.chars().take(NAME_LEN - 1).collect();
        name.push('…');
    }
    name.into_boxed_str()
}

/// Whether a request is fast or slow, as far as its route tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speed {
    Fast,
    Slow,
}

/// What is learned of one route (or of one of its numbered variants).
#[derive(Debug)]
struct Learned {
    name: Box<str>,
    mean_secs: f64,
    samples: u64,
    /// Requests finished lately: their count, halved every [`DECAY_EVERY`] of all routes'.
    finished: f64,
    slow: bool,
    /// The lane its latest request took.
    lane: LaneId,
}

impl Learned {
    fn new(name: Box<str>) -> Learned {
        Learned { name, mean_secs: 0.0, samples: 0, finished: 0.0, slow: false, lane: LaneId::FAST }
    }

    fn record(&mut self, took: Duration) {
        let took = took.as_secs_f64();
        self.mean_secs = if self.samples == 0 { took } else { self.mean_secs + WEIGHT * (took - self.mean_secs) };
        self.samples += 1;
        self.finished += 1.0;
    }

    /// Places it against the typical service time `reference`, with hysteresis.
    fn classify(&mut self, reference: f64) {
        if self.samples == 0 {
            return;
        }
        let floor = SLOW_AT_LEAST.as_secs_f64();
        self.slow = if self.slow {
            self.mean_secs >= (FAST_AGAIN_RATIO * reference).max(floor / 2.0)
        } else {
            self.mean_secs >= (SLOW_RATIO * reference).max(floor)
        };
    }

    fn speed(&self) -> Speed {
        if self.slow {
            Speed::Slow
        } else {
            Speed::Fast
        }
    }
}

/// A route with identifiers folded, and its numbered variants while they are few.
#[derive(Debug)]
struct Route {
    /// Every request of the route, whatever its numbers.
    all: Learned,
    variants: Variants,
}

#[derive(Debug)]
enum Variants {
    /// The route has no number segments.
    None,
    /// Each number (or combination of numbers) seen so far, by its key.
    Few(Vec<(u64, Learned)>),
    /// More than [`MAX_VARIANTS`]: the numbers are identifiers.
    Many,
}

impl Route {
    /// What a request with `key` is learned as: its variant's figures while the route's numbers
    /// are few, else the route's own.
    fn learned_mut(&mut self, key: RouteKey) -> Option<&mut Learned> {
        match (&mut self.variants, key.numbered) {
            (Variants::Few(variants), Some(numbered)) => {
                variants.iter_mut().find(|(variant, _)| *variant == numbered).map(|(_, learned)| learned)
            }
            _ => Some(&mut self.all),
        }
    }

    /// Every route or variant that stands on its own: the variants while they are few, else the
    /// route itself.
    fn leaves(&self) -> impl Iterator<Item = &Learned> {
        let (few, own): (&[(u64, Learned)], Option<&Learned>) = match &self.variants {
            Variants::Few(variants) => (variants, None),
            Variants::None | Variants::Many => (&[], Some(&self.all)),
        };
        few.iter().map(|(_, learned)| learned).chain(own)
    }

    /// The route's own figures and every variant's.
    fn all_mut(&mut self) -> impl Iterator<Item = &mut Learned> {
        let few: &mut [(u64, Learned)] = match &mut self.variants {
            Variants::Few(variants) => variants,
            Variants::None | Variants::Many => &mut [],
        };
        few.iter_mut().map(|(_, learned)| learned).chain(std::iter::once(&mut self.all))
    }
}

/// One route as stats show it.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteFigures {
    pub name: String,
    pub lane: LaneId,
    pub mean_service: Duration,
    /// Requests finished lately (halved now and then).
    pub finished: f64,
}

/// The table of routes.
#[derive(Debug, Default)]
pub struct Routes {
    /// By folded key (already a hash: the map's own hashing is what foldhash makes cheap).
    routes: HashMap<u64, Route, RandomState>,
    /// Finished requests recorded, of all routes.
    recorded: u64,
    /// The typical request's service time in seconds: the median of the routes' means, weighted
    /// by their finished requests.
    reference: f64,
}

impl Routes {
    /// How fast a request of `key` is, as learned so far, noting that it takes `lane` (`None`:
    /// the lane its speed gives). A route not in the table is added, named by `name` (called only
    /// then: with `true` for the name of a numbered variant).
    pub fn arrive(
        &mut self,
        key: RouteKey,
        lane: impl FnOnce(Speed) -> LaneId,
        name: impl Fn(bool) -> Box<str>,
    ) -> LaneId {
        if !self.routes.contains_key(&key.folded) {
            self.make_room();
            let variants = if key.numbered.is_some() { Variants::Few(Vec::new()) } else { Variants::None };
            self.routes.insert(key.folded, Route { all: Learned::new(name(false)), variants });
        }
        let route = self.routes.get_mut(&key.folded).expect("inserted above");
        if let (Variants::Few(variants), Some(numbered)) = (&mut route.variants, key.numbered) {
            if !variants.iter().any(|(variant, _)| *variant == numbered) {
                if variants.len() < MAX_VARIANTS {
                    variants.push((numbered, Learned::new(name(true))));
                } else {
                    route.variants = Variants::Many;
                    route.all.classify(self.reference);
                }
            }
        }
        let learned = route.learned_mut(key).expect("known after the insertions above");
        learned.lane = lane(learned.speed());
        learned.lane
    }

    /// Whether requests of `key` are slow, as learned now (a route not in the table is fast).
    pub fn is_slow(&mut self, key: RouteKey) -> bool {
        let route = self.routes.get_mut(&key.folded);
        route.and_then(|route| route.learned_mut(key)).is_some_and(|learned| learned.slow)
    }

    /// Learns from a finished request of `key`. A route evicted since its request arrived
    /// learns nothing.
    pub fn record(&mut self, key: RouteKey, took: Duration) {
        let Some(route) = self.routes.get_mut(&key.folded) else { return };
        // The route's own figures cover all its requests, whatever their numbers.
        route.all.record(took);
        if let (Variants::Few(variants), Some(numbered)) = (&mut route.variants, key.numbered) {
            if let Some((_, variant)) = variants.iter_mut().find(|(variant, _)| *variant == numbered) {
                variant.record(took);
            }
        }
        self.recorded += 1;
        if self.recorded.is_multiple_of(DECAY_EVERY) {
            for learned in self.routes.values_mut().flat_map(Route::all_mut) {
                learned.finished /= 2.0;
            }
        }
        if self.recorded <= REFERENCE_EVERY || self.recorded.is_multiple_of(REFERENCE_EVERY) {
            self.reclassify();
        } else if let Some(route) = self.routes.get_mut(&key.folded) {
            let reference = self.reference;
            let mut turned_slow = false;
            for learned in route.all_mut() {
                let was_slow = learned.slow;
                learned.classify(reference);
                turned_slow |= learned.slow && !was_slow;
            }
            // Slow against a typical time computed before it changed: judged again against a
            // fresh one. The typical request may be this route's own (an app of one main route
            // whose requests take longer under load), and a route is never slow against itself.
            if turned_slow {
                self.reclassify();
            }
        }
    }

    /// Computes the typical service time again and places every route against it.
    fn reclassify(&mut self) {
        let mut means: Vec<(f64, f64)> = self
            .routes
            .values()
            .flat_map(Route::leaves)
            .filter(|leaf| leaf.samples > 0)
            .map(|leaf| (leaf.mean_secs, leaf.finished.max(f64::MIN_POSITIVE)))
            .collect();
        means.sort_by(|a, b| a.0.total_cmp(&b.0));
        let half = means.iter().map(|(_, weight)| weight).sum::<f64>() / 2.0;
        let mut below = 0.0;
        for (mean, weight) in means {
            below += weight;
            if below >= half {
                self.reference = mean;
                break;
            }
        }
        let reference = self.reference;
        for learned in self.routes.values_mut().flat_map(Route::all_mut) {
            learned.classify(reference);
        }
    }

    /// Evicts the least used route when the table is full.
    fn make_room(&mut self) {
        if self.routes.len() < CAPACITY {
            return;
        }
        let least =
            self.routes.iter().min_by(|a, b| a.1.all.finished.total_cmp(&b.1.all.finished)).map(|(key, _)| *key);
        if let Some(key) = least {
            self.routes.remove(&key);
        }
    }

    /// Every route or variant measured at least once, most used first.
    pub fn figures(&self) -> Vec<RouteFigures> {
        let mut figures: Vec<RouteFigures> = self
            .routes
            .values()
            .flat_map(Route::leaves)
            .filter(|leaf| leaf.samples > 0)
            .map(|leaf| RouteFigures {
                name: leaf.name.to_string(),
                lane: leaf.lane,
                mean_service: Duration::from_secs_f64(leaf.mean_secs),
                finished: leaf.finished,
            })
            .collect();
        figures.sort_by(|a, b| b.finished.total_cmp(&a.finished).then_with(|| a.name.cmp(&b.name)));
        figures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn key(path: &str) -> RouteKey {
        RouteKey::of(&http::Method::GET, path)
    }

    fn name(path: &str, keep_numbers: bool) -> String {
        route_name(&http::Method::GET, path, keep_numbers).to_string()
    }

    /// Places a request of `path`, its lane by its speed, as the queue does.
    fn arrive(routes: &mut Routes, path: &str) -> LaneId {
        let speed_lane = |speed| if speed == Speed::Slow { LaneId::SLOW } else { LaneId::FAST };
        routes.arrive(key(path), speed_lane, |numbered| route_name(&http::Method::GET, path, numbered))
    }

    fn run(routes: &mut Routes, path: &str, took: Duration, times: usize) {
        for _ in 0..times {
            arrive(routes, path);
            routes.record(key(path), took);
        }
    }

    #[test]
    fn identifiers_fold_into_one_route() {
        assert_eq!(
            key("/orders/3f2b8c1e-9d4a-4e2b-8f6a-0c1d2e3f4a5b"),
            key("/orders/00000000-0000-0000-0000-000000000000")
        );
        assert_eq!(key("/commits/0123456789abcdef0123"), key("/commits/fedcba9876543210fedc"));
        assert_eq!(key("/share/AbCdEfGhIjKlMnOpQrStUvWx_-12"), key("/share/ZZZZZZZZZZZZZZZZZZZZZZZZZZ"));
        assert_ne!(key("/orders/new"), key("/orders/old"), "words are routes of their own");
        assert_ne!(key("/orders"), RouteKey::of(&http::Method::POST, "/orders"), "the method is part of it");
        // Numbers: one route, each number a variant of it.
        assert_eq!(key("/sleep/20").folded, key("/sleep/500").folded);
        assert_ne!(key("/sleep/20").numbered, key("/sleep/500").numbered);
        assert_eq!(key("/hello").numbered, None);
        assert_eq!(name("/orders/3f2b8c1e-9d4a-4e2b-8f6a-0c1d2e3f4a5b/items/7", false), "GET /orders/{id}/items/{id}");
        assert_eq!(name("/orders/3f2b8c1e-9d4a-4e2b-8f6a-0c1d2e3f4a5b/items/7", true), "GET /orders/{id}/items/7");
        assert_eq!(name("/", false), "GET /");
        let long = name(&"/segment".repeat(40), false);
        assert_eq!(long.chars().count(), NAME_LEN);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn a_route_is_slow_against_the_typical_request_and_its_numbers_stay_apart_while_few() {
        let mut routes = Routes::default();
        assert_eq!(arrive(&mut routes, "/sleep/500"), LaneId::FAST, "not measured yet");
        run(&mut routes, "/sleep/20", 20 * MS, 9);
        run(&mut routes, "/sleep/500", 500 * MS, 1);
        run(&mut routes, "/hello", MS, 1);
        assert_eq!(arrive(&mut routes, "/sleep/500"), LaneId::SLOW);
        assert_eq!(arrive(&mut routes, "/sleep/20"), LaneId::FAST);
        assert_eq!(arrive(&mut routes, "/hello"), LaneId::FAST, "faster than the typical request is fast");
        let figures = routes.figures();
        let names: Vec<&str> = figures.iter().map(|route| route.name.as_str()).collect();
        assert_eq!(names, ["GET /sleep/20", "GET /hello", "GET /sleep/500"], "the most used first");
        assert_eq!(figures[2].lane, LaneId::SLOW);

        // More than MAX_VARIANTS numbers: they are identifiers, and the route is one.
        for n in 0..MAX_VARIANTS {
            run(&mut routes, &format!("/users/{n}"), 5 * MS, 1);
        }
        assert!(routes.figures().iter().any(|route| route.name == "GET /users/0"));
        run(&mut routes, "/users/99", 5 * MS, 1);
        let users: Vec<String> = routes
            .figures()
            .into_iter()
            .map(|route| route.name)
            .filter(|name| name.starts_with("GET /users"))
            .collect();
        assert_eq!(users, ["GET /users/{id}"]);
    }

    #[test]
    fn nothing_under_a_millisecond_is_slow() {
        let mut routes = Routes::default();
        run(&mut routes, "/hello", Duration::from_micros(50), 20);
        run(&mut routes, "/json", Duration::from_micros(600), 2);
        assert_eq!(arrive(&mut routes, "/json"), LaneId::FAST, "12 x the typical request, but under 1 ms");
    }

    #[test]
    fn a_route_that_slows_is_not_slow_against_itself() {
        let mut routes = Routes::default();
        run(&mut routes, "/json", Duration::from_micros(300), 3 * REFERENCE_EVERY as usize);
        run(&mut routes, "/hello", Duration::from_micros(300), 1);
        // Under load every request of the app's main route takes ten times as long.
        for _ in 0..REFERENCE_EVERY - 2 {
            run(&mut routes, "/json", 3 * MS, 1);
            assert_eq!(arrive(&mut routes, "/json"), LaneId::FAST, "the typical request is this route's");
        }
    }

    #[test]
    fn the_table_keeps_the_most_used_routes_within_its_capacity() {
        let mut routes = Routes::default();
        run(&mut routes, "/popular", 10 * MS, 50);
        for n in 0..2 * CAPACITY {
            run(&mut routes, &format!("/page-{n}"), 10 * MS, 1);
        }
        assert_eq!(routes.routes.len(), CAPACITY);
        assert!(routes.figures().iter().any(|route| route.name == "GET /popular"));
    }
}
