//! Runs a load: N threads, each with its own current-thread runtime and its share of the
//! connections, then merges what they measured into one [`Report`].
//!
//! Threads share nothing on the hot path (each has its own demand, picker and recorder); they
//! meet only in the per-second series (once a second) and at the end, where histograms add up
//! exactly. They also start together: the clock starts once every thread is ready to send,
//! which in the WebSocket mode means its sockets are open, so that no message is timed waiting
//! for a handshake.

use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use tokio::sync::{watch, Semaphore};
use tokio::task::{JoinSet, LocalSet};

use crate::client::client_loop;
use crate::http2;
use crate::plan::Plan;
use crate::progress;
use crate::record::{ErrorKind, LiveCounters, Recorder, SeriesCollector, Totals};
use crate::report::Report;
use crate::schedule::{thread_connections, Demand, Picker};
use crate::settings::LoadConfig;
use crate::thread::{ThreadCtx, ThreadState};
use crate::websocket::{open_before, socket_loop};

/// Everything a load thread needs, shared by all of them.
struct Shared {
    plan: Arc<Plan>,
    /// A permit from each thread once it is ready to send (or has failed).
    ready: Semaphore,
    /// The start of the run, set once every thread is ready.
    start: watch::Sender<Option<Instant>>,
    series: Arc<SeriesCollector>,
    live: Arc<[LiveCounters]>,
    stop: Arc<AtomicBool>,
}

/// Runs the load described by `config` and returns what it measured. With `show_progress`, a
/// progress line is drawn on stderr once a second.
pub async fn execute(config: LoadConfig, show_progress: bool) -> anyhow::Result<Report> {
    let plan = Arc::new(Plan::new(config).await?);
    let threads = plan.threads;
    let shared = Arc::new(Shared {
        plan: plan.clone(),
        ready: Semaphore::new(0),
        start: watch::Sender::new(None),
        series: Arc::new(SeriesCollector::new(threads)),
        live: (0..threads).map(|_| LiveCounters::default()).collect(),
        stop: Arc::new(AtomicBool::new(false)),
    });

    let mut results = Vec::with_capacity(threads);
    for index in 0..threads {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let shared = shared.clone();
        std::thread::Builder::new()
            .name(format!("headway-load-{index}"))
            .spawn(move || {
                let result = run_thread(&shared, index);
                // Let go of the shared state before reporting, so the caller owns it alone.
                drop(shared);
                // If the receiver is gone the caller stopped waiting for the run; there is
                // nobody left to tell.
                let _ = sender.send(result);
            })
            .context("cannot start a load thread")?;
        results.push(receiver);
    }

    // The permits are not given back: a thread is ready once.
    shared.ready.acquire_many(threads as u32).await.context("load threads went away")?.forget();
    let start = Instant::now();
    shared.start.send_replace(Some(start));
    let progress = show_progress.then(|| tokio::spawn(progress::draw(shared.live.clone(), start)));
    let mut totals = Totals::new(plan.targets.len());
    for receiver in results {
        let thread_totals = receiver.await.context("a load thread ended without a result")??;
        totals.merge(&thread_totals);
    }
    let elapsed = start.elapsed();
    if let Some(progress) = progress {
        progress.abort();
        progress::clear();
    }

    if totals.responses == 0 {
        if let Some(first) = totals.errors.iter().find(|(kind, _)| is_connect(**kind)) {
            if totals.errors.keys().all(|kind| is_connect(*kind)) {
                anyhow::bail!("{}", first.1.example);
            }
        }
    }
    let shared = Arc::into_inner(shared).context("load threads still hold the run state")?;
    let series = Arc::into_inner(shared.series).context("load threads still hold the series")?.into_series();
    Ok(Report::new(&plan, &totals, series, elapsed))
}

fn is_connect(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::ConnectRefused | ErrorKind::Connect)
}

/// Gives the run its permit when dropped: ready, or failed on the way.
struct Ready<'a>(&'a Semaphore);

impl Drop for Ready<'_> {
    fn drop(&mut self) {
        self.0.add_permits(1);
    }
}

/// One load thread: its runtime, its clients, its recorder.
fn run_thread(shared: &Shared, index: usize) -> anyhow::Result<Totals> {
    let ready = Ready(&shared.ready);
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot build a load runtime")?;
    let plan = &shared.plan;
    let (_, clients) = thread_connections(plan.config.connections, index, plan.threads);

    LocalSet::new().block_on(&runtime, async {
        let opened = if plan.config.websocket { open_before(plan, clients).await } else { Vec::new() };
        drop(ready);
        let mut starting = shared.start.subscribe();
        let start = match starting.wait_for(Option::is_some).await {
            Ok(start) => start.expect("waited for it"),
            Err(_) => anyhow::bail!("the run ended before it started"),
        };
        let cpu_at_start = thread_cpu_secs();
        let state = ThreadState {
            demand: Demand::for_thread(plan, index, clients, start),
            picker: Picker::new(plan),
            recorder: Recorder::new(plan.targets.len(), start, index, shared.series.clone(), shared.live.clone()),
        };
        let ctx = Rc::new(ThreadCtx::new(plan.clone(), state, shared.stop.clone(), shared.live.clone(), clients));
        let hard_stop = plan.hard_stop(start);
        let mut tasks = JoinSet::new();
        if plan.config.websocket {
            for sockets in opened {
                sockets.record(&mut ctx.state.borrow_mut().recorder);
                tasks.spawn_local(socket_loop(ctx.clone(), sockets));
            }
        } else if plan.config.http2 {
            for _ in 0..clients {
                tasks.spawn_local(http2::connection_loop(ctx.clone()));
            }
        } else {
            for _ in 0..clients {
                tasks.spawn_local(client_loop(ctx.clone()));
            }
        }
        let all_done = async {
            while let Some(joined) = tasks.join_next().await {
                joined.context("a load client failed")?;
            }
            anyhow::Ok(())
        };
        match hard_stop {
            None => all_done.await?,
            Some(at) => {
                let outcome = tokio::time::timeout_at(at.into(), all_done).await;
                if let Ok(done) = outcome {
                    done?;
                } else {
                    tasks.shutdown().await;
                    let cut_off = ctx.in_flight.get();
                    if cut_off > 0 {
                        ctx.state.borrow_mut().recorder.record_errors(
                            ErrorKind::Aborted,
                            None,
                            cut_off,
                            Instant::now(),
                            || "still in flight at the hard stop (duration + timeout)".to_string(),
                        );
                    }
                }
            }
        }
        drop(tasks);
        let ctx = Rc::into_inner(ctx).context("load clients still hold the thread state")?;
        let mut totals = ctx.state.into_inner().recorder.finish();
        totals.cpu_secs = thread_cpu_secs() - cpu_at_start;
        Ok(totals)
    })
}

/// The CPU time (user + system) the calling thread has used so far, in seconds: what a load
/// thread costs the machine it shares with the server it loads.
fn thread_cpu_secs() -> f64 {
    let mut used = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes only the timespec it is given. It cannot fail for this clock
    // on Linux; if it did, the thread would count as having used nothing.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut used) } != 0 {
        return 0.0;
    }
    used.tv_sec as f64 + used.tv_nsec as f64 * 1e-9
}
