//! The scaling rules on a simulated day: a pool of workers of 5 slots x 100 ms serving a load
//! that steps up and down, as a fluid (requests arrive and are served at rates, the backlog is
//! what arrived and was not served), measured each interval the way the scaling task measures
//! the real queue, with workers that take a while to start.

use std::time::{Duration, Instant};

use super::*;

const SLOTS: usize = 5;
const SERVICE: Duration = Duration::from_millis(100);
const MIB: u64 = 1 << 20;

fn policy(min: usize, max: usize) -> ScalingPolicy {
    ScalingPolicy {
        start: min,
        min,
        max,
        automatic: true,
        scale_up_wait: ScaleUpWait::Auto,
        idle_timeout: Duration::from_secs(10),
        max_memory: None,
    }
}

/// A simulated worker: when it serves from, and its memory.
struct SimWorker {
    index: usize,
    ready_at: Duration,
}

/// What happened on the day.
struct Day {
    /// W (serving or starting) at the end of each interval.
    counts: Vec<usize>,
    /// Each change of W: when, and by how much (+2, -1).
    changes: Vec<(Duration, i32)>,
    memory_caps: usize,
    /// Requests left waiting at the end.
    backlog: f64,
}

/// Runs `policy` through `load` (requests a second at each moment) for `length`, with workers
/// that take `boot` to start and use `rss` each.
fn simulate(policy: ScalingPolicy, load: impl Fn(Duration) -> f64, length: Duration, boot: Duration, rss: u64) -> Day {
    let start = Instant::now();
    let mut scaler = Scaler::new(policy.clone());
    let mut workers: Vec<SimWorker> =
        (1..=policy.min).map(|index| SimWorker { index, ready_at: Duration::ZERO }).collect();
    let mut backlog = 0.0f64;
    let mut day = Day { counts: Vec::new(), changes: Vec::new(), memory_caps: 0, backlog: 0.0 };
    let mut now = Duration::ZERO;
    while now < length {
        now += INTERVAL;
        let ready = workers.iter().filter(|worker| worker.ready_at <= now).count();
        let capacity = (ready * SLOTS) as f64 / SERVICE.as_secs_f64();
        let arriving = load(now);
        let before = backlog;
        backlog = (backlog + (arriving - capacity) * INTERVAL.as_secs_f64()).max(0.0);
        // Requests start one service round apart from the one ahead: a backlog of B waits B/capacity.
        let wait = if capacity > 0.0 { Duration::from_secs_f64(backlog / capacity) } else { Duration::from_secs(1) };
        // Busy slots swing about their mean: the peak of an interval is a third above it.
        let busy_peak = if backlog > 0.0 {
            ready * SLOTS
        } else {
            ((arriving * SERVICE.as_secs_f64() * 4.0 / 3.0).ceil() as usize).min(ready * SLOTS)
        };
        let measurements = Measurements {
            wait,
            backlog_grew: backlog > 0.0 && backlog >= before,
            spare_slots: ready * SLOTS - busy_peak,
            worker_slots: SLOTS,
            arrivals: arriving,
            mean_service: Some(SERVICE),
            target: Some(Duration::from_millis(50)),
            workers: workers
                .iter()
                .map(|worker| WorkerView { index: worker.index, ready: worker.ready_at <= now, busy: 0, rss })
                .collect(),
        };
        match scaler.decide(start + now, &measurements) {
            Decision::Add(count, cause) => {
                assert_eq!(cause, Cause::QueueWait);
                for _ in 0..count {
                    let index = (1..).find(|index| workers.iter().all(|worker| worker.index != *index)).unwrap();
                    workers.push(SimWorker { index, ready_at: now + boot });
                }
                day.changes.push((now, count as i32));
            }
            Decision::Remove(index, cause) => {
                assert_eq!(cause, Cause::Idle);
                workers.retain(|worker| worker.index != index);
                day.changes.push((now, -1));
            }
            Decision::Refuse(refusal) => {
                assert_eq!(refusal, Refusal::Memory);
                day.memory_caps += 1;
            }
            Decision::Hold => {}
        }
        day.counts.push(workers.len());
    }
    day.backlog = backlog;
    day
}

/// 15 % of two workers' capacity (100 a second), then 150 %, then 15 % again.
fn daily(now: Duration) -> f64 {
    match now.as_secs() {
        0..60 => 15.0,
        60..120 => 150.0,
        _ => 15.0,
    }
}

/// W never moves one way and then back within `gap`.
fn assert_no_flapping(day: &Day, gap: Duration) {
    for pair in day.changes.windows(2) {
        let ((first_at, first), (then_at, then)) = (pair[0], pair[1]);
        if first.signum() != then.signum() {
            assert!(then_at - first_at >= gap, "W turned from {first:+} to {then:+} within {:?}", then_at - first_at);
        }
    }
}

#[test]
fn a_day_grows_under_a_queue_that_waits_and_shrinks_back_to_min_when_idle() {
    let boot = Duration::from_millis(20); // --preload: a fork
    let day = simulate(policy(2, 8), daily, Duration::from_secs(240), boot, 0);
    let peak = *day.counts.iter().max().unwrap();
    // 150 a second keeps 15 slots busy: five workers (25 slots) leave under 1 % of the requests
    // waiting over 10 ms, added at once.
    assert_eq!(peak, 5, "{:?}", day.changes);
    assert_eq!(day.changes[0].1, 3, "the step met in one add: {:?}", day.changes);
    let at = |secs: u32| day.counts[(Duration::from_secs(secs.into()).as_millis() / INTERVAL.as_millis()) as usize - 1];
    assert_eq!(at(59), 2, "still at MIN in the quiet morning");
    assert_eq!(*day.counts.last().unwrap(), 2, "back to MIN: {:?}", day.changes);
    assert!(day.counts.iter().all(|&w| w >= 2), "never below MIN");
    assert!(day.backlog < 1.0, "the peak was served");
    // One climb and one descent: W turned once each way.
    let turns = day.changes.windows(2).filter(|pair| pair[0].1.signum() != pair[1].1.signum()).count();
    assert_eq!(turns, 1, "{:?}", day.changes);
    assert_no_flapping(&day, Duration::from_secs(10));
}

#[test]
fn a_worker_starting_is_no_capacity_and_adds_wait_for_it() {
    let boot = Duration::from_secs(3);
    // A load that keeps growing, 20 more a second every second: each add is outgrown.
    let day = simulate(policy(1, 8), |now| 20.0 * now.as_secs_f64(), Duration::from_secs(60), boot, 0);
    let adds: Vec<Duration> = day.changes.iter().filter(|(_, way)| *way > 0).map(|(at, _)| *at).collect();
    assert!(adds.len() >= 3, "{adds:?}");
    for pair in adds.windows(2) {
        assert!(pair[1] - pair[0] >= boot + INTERVAL, "added again before the last one served: {adds:?}");
    }
}

#[test]
fn w_stays_within_max() {
    let day = simulate(policy(2, 5), |_| 1000.0, Duration::from_secs(60), Duration::from_millis(20), 0);
    assert_eq!(day.counts.iter().max(), Some(&5));
    assert!(day.changes.iter().all(|(_, way)| *way > 0), "an overload removes nothing: {:?}", day.changes);
}

#[test]
fn an_add_is_sized_to_the_arrivals_within_max_and_the_budget() {
    let mut scaler = Scaler::new(policy(1, 8));
    let start = Instant::now();
    let view = |index| WorkerView { index, ready: true, busy: SLOTS, rss: 100 * MIB };
    // 200 a second x 100 ms keep 20 slots busy: six workers leave under 1 % waiting, five more.
    let mut m = Measurements {
        wait: Duration::from_secs(1),
        backlog_grew: true,
        worker_slots: SLOTS,
        arrivals: 200.0,
        mean_service: Some(SERVICE),
        workers: vec![view(1)],
        ..Measurements::default()
    };
    scaler.decide(start, &m);
    assert_eq!(scaler.decide(start + INTERVAL, &m), Decision::Add(5, Cause::QueueWait));
    let mut capped = Scaler::new(ScalingPolicy { max_memory: Some(350 * MIB), ..policy(1, 8) });
    capped.decide(start, &m);
    assert_eq!(capped.decide(start + INTERVAL, &m), Decision::Add(2, Cause::QueueWait), "two more fit");
    m.arrivals = 1000.0;
    let mut most = Scaler::new(policy(1, 8));
    most.decide(start, &m);
    assert_eq!(most.decide(start + INTERVAL, &m), Decision::Add(7, Cause::QueueWait), "up to MAX");
}

#[test]
fn adds_stop_at_the_memory_budget_and_count_it_once() {
    let mut capped = policy(1, 8);
    // 100 MiB each: three fit, a fourth would make 400 MiB.
    capped.max_memory = Some(350 * MIB);
    let day = simulate(capped, |_| 1000.0, Duration::from_secs(60), Duration::from_millis(20), 100 * MIB);
    assert_eq!(day.counts.iter().max(), Some(&3));
    assert_eq!(day.memory_caps, 1, "one refusal counted for one long overload");
}

#[test]
fn a_single_number_never_moves_by_itself() {
    let mut fixed = policy(2, 2);
    fixed.automatic = false;
    let day = simulate(fixed, daily, Duration::from_secs(240), Duration::from_millis(20), 0);
    assert!(day.changes.is_empty());
}

#[test]
fn a_backlog_that_drains_adds_nothing() {
    // A burst left a backlog the slots are already draining: the wait is long, but no worker helps.
    let mut scaler = Scaler::new(policy(2, 8));
    let start = Instant::now();
    let workers = vec![
        WorkerView { index: 1, ready: true, busy: 5, rss: 0 },
        WorkerView { index: 2, ready: true, busy: 5, rss: 0 },
    ];
    let mut m = Measurements { wait: Duration::from_secs(1), worker_slots: SLOTS, workers, ..Measurements::default() };
    for tick in 1..10 {
        assert_eq!(scaler.decide(start + INTERVAL * tick, &m), Decision::Hold);
    }
    m.backlog_grew = true;
    assert_eq!(scaler.decide(start + INTERVAL * 10, &m), Decision::Add(1, Cause::QueueWait));
}

#[test]
fn adds_that_fail_to_start_pause_longer_each_time() {
    let mut scaler = Scaler::new(policy(1, 8));
    let start = Instant::now();
    let m = Measurements {
        wait: Duration::from_secs(1),
        backlog_grew: true,
        worker_slots: SLOTS,
        workers: vec![WorkerView { index: 1, ready: true, busy: 5, rss: 0 }],
        ..Measurements::default()
    };
    let mut adds = Vec::new();
    for tick in 1..200 {
        let now = start + INTERVAL * tick;
        if let Decision::Add(..) = scaler.decide(now, &m) {
            adds.push(tick);
            scaler.add_failed(now);
        }
    }
    let gaps: Vec<u32> = adds.windows(2).map(|pair| pair[1] - pair[0]).collect();
    assert!(gaps.windows(2).all(|pair| pair[1] >= pair[0]), "pauses grow: {gaps:?}");
    assert!(gaps.last().unwrap() > &gaps[0], "{gaps:?}");
}

#[test]
fn by_hand_stays_within_the_range_and_the_budget() {
    let mut range = policy(2, 3);
    range.max_memory = Some(250 * MIB);
    let mut scaler = Scaler::new(range);
    let view = |index| WorkerView { index, ready: true, busy: 0, rss: 100 * MIB };
    let mut m = Measurements { workers: vec![view(1), view(2)], ..Measurements::default() };
    assert_eq!(scaler.by_hand(Instant::now(), Direction::Down, Cause::Signal, &m), Decision::Refuse(Refusal::AtMin));
    assert_eq!(scaler.by_hand(Instant::now(), Direction::Up, Cause::Control, &m), Decision::Refuse(Refusal::Memory));
    m.workers[0].rss = 10 * MIB;
    assert_eq!(scaler.by_hand(Instant::now(), Direction::Up, Cause::Control, &m), Decision::Add(1, Cause::Control));
    m.workers.push(view(3));
    m.workers[2].busy = 1;
    assert_eq!(scaler.by_hand(Instant::now(), Direction::Up, Cause::Signal, &m), Decision::Refuse(Refusal::AtMax));
    m.workers[0].busy = 2;
    assert_eq!(
        scaler.by_hand(Instant::now(), Direction::Down, Cause::Signal, &m),
        Decision::Remove(2, Cause::Signal),
        "the least busy"
    );
}

#[test]
fn a_worker_removed_by_hand_is_not_put_back_by_the_next_interval() {
    let mut scaler = Scaler::new(policy(1, 3));
    let start = Instant::now();
    let view = |index| WorkerView { index, ready: true, busy: 5, rss: 0 };
    let m = Measurements {
        workers: vec![view(1), view(2)],
        wait: Duration::from_secs(1),
        backlog_grew: true,
        ..Measurements::default()
    };
    assert_eq!(scaler.decide(start, &m), Decision::Hold, "the first interval of serving");
    assert!(matches!(scaler.decide(start + INTERVAL * 2, &m), Decision::Add(..)), "a queue that waits adds");
    let m = Measurements { workers: vec![view(1), view(2)], ..m };
    assert_eq!(
        scaler.by_hand(start + INTERVAL * 3, Direction::Down, Cause::Signal, &m),
        Decision::Remove(2, Cause::Signal)
    );
    let m = Measurements { workers: vec![view(1)], ..m };
    let later = |seconds| start + INTERVAL * 3 + Duration::from_secs(seconds);
    assert_eq!(scaler.decide(later(1), &m), Decision::Hold);
    assert_eq!(scaler.decide(later(5), &m), Decision::Hold, "within --worker-idle-timeout of the removal");
    assert!(matches!(scaler.decide(later(11), &m), Decision::Add(..)), "then the queue decides again");
}

#[test]
fn auto_scale_up_wait_is_a_tenth_of_a_service_time_below_half_the_target() {
    let ms = Duration::from_millis;
    assert_eq!(ScaleUpWait::Auto.of(Some(ms(10)), Some(ms(30))), ms(1));
    assert_eq!(ScaleUpWait::Auto.of(Some(ms(300)), Some(ms(50))), ms(25));
    assert_eq!(ScaleUpWait::Auto.of(Some(ms(100)), None), ms(10));
    assert_eq!(ScaleUpWait::Auto.of(None, None), AUTO_WAIT_UNKNOWN);
    assert_eq!(ScaleUpWait::Auto.of(Some(Duration::from_micros(30)), Some(ms(5))), AUTO_WAIT_LEAST);
    assert_eq!(ScaleUpWait::Fixed(ms(7)).of(Some(ms(100)), Some(ms(50))), ms(7));
}

#[test]
fn a_worker_the_arrivals_still_need_is_not_removed_for_idle_slots() {
    // Five workers for 150 a second: a worker's slots stood idle at every sample, yet four would
    // let more than 1 % wait, and the next interval would add the worker back.
    let mut scaler = Scaler::new(policy(2, 8));
    let start = Instant::now();
    let view = |index| WorkerView { index, ready: true, busy: 3, rss: 0 };
    let mut m = Measurements {
        spare_slots: SLOTS,
        worker_slots: SLOTS,
        arrivals: 150.0,
        mean_service: Some(SERVICE),
        workers: (1..=5).map(view).collect(),
        ..Measurements::default()
    };
    let idle_for = |ticks: u32| start + INTERVAL * ticks;
    let timeout = (Duration::from_secs(10).as_millis() / INTERVAL.as_millis()) as u32;
    for tick in 0..=timeout + 1 {
        assert_eq!(scaler.decide(idle_for(tick), &m), Decision::Hold);
    }
    m.arrivals = 100.0;
    assert!(matches!(scaler.decide(idle_for(timeout + 2), &m), Decision::Remove(_, Cause::Idle)));
}
