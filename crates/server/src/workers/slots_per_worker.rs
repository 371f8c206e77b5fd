//! How many slots a worker process has: `-t T`, or with `-t auto` a number that suits how the app
//! runs its requests.
//!
//! A WSGI app runs a request on a thread, and threads of one process take turns on the GIL: a
//! few are enough to overlap a request's waiting with another's work, and each one more is a
//! request that may wait inside the worker behind a slow one, rather than in the one queue where
//! any worker could take it. An ASGI app runs its requests as tasks of one event loop, which
//! interleaves them at each `await`: with only a few, an app that awaits a database or another
//! service leaves its CPU idle, and an app that awaits nothing runs dry between the front's
//! hand-overs, its loop sleeping and waking for every few requests (docs/design/asgi-slots.md
//! has the measurements). The bundled worker tells the front which kind of app it imported only
//! once it has, so with `--interface auto` a worker's region is made for the larger number and
//! the front opens as many slots as the worker's kind takes.

/// `-t auto`: a thread per slot of a WSGI app (and of a `--cmd` server, whose model is unknown).
pub const AUTO_THREADS: usize = 5;
/// `-t auto`: tasks at once on an ASGI app's event loop.
pub const AUTO_ASGI_TASKS: usize = 16;

/// The slots of each worker process, by the kind of app it serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotsPerWorker {
    /// A WSGI app's (its threads), or a `--cmd` server's.
    pub threads: usize,
    /// An ASGI app's (tasks at once on its loop).
    pub asgi: usize,
}

impl SlotsPerWorker {
    /// `-t T`: T slots whatever the app.
    pub fn fixed(slots: usize) -> SlotsPerWorker {
        SlotsPerWorker { threads: slots, asgi: slots }
    }

    /// `-t auto`, as far as the launch knows the app's kind: `asgi` is `Some` when it does.
    pub fn auto(asgi: Option<bool>) -> SlotsPerWorker {
        match asgi {
            Some(true) => SlotsPerWorker::fixed(AUTO_ASGI_TASKS),
            Some(false) => SlotsPerWorker::fixed(AUTO_THREADS),
            None => SlotsPerWorker { threads: AUTO_THREADS, asgi: AUTO_ASGI_TASKS },
        }
    }

    /// The slots of a worker that serves an ASGI app or not.
    pub fn of(&self, asgi: bool) -> usize {
        if asgi {
            self.asgi
        } else {
            self.threads
        }
    }

    /// How the bundled worker (and its preloading parent) is told: it picks by the app it imports.
    pub fn worker_args(&self) -> [String; 4] {
        ["--threads".into(), self.threads.to_string(), "--asgi-tasks".into(), self.asgi.to_string()]
    }

    /// The most a worker may have: what its region is made for before it says its kind.
    pub fn most(&self) -> usize {
        self.threads.max(self.asgi)
    }

    /// The slots of every worker, when they do not hang on the app's kind (a number `-t` gave,
    /// or a kind the launch fixed); `None` until each worker has said its kind.
    pub fn known(&self) -> Option<usize> {
        (self.threads == self.asgi).then_some(self.threads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_is_decided_by_the_kind_of_app_and_a_fixed_count_is_kept() {
        let unknown = SlotsPerWorker::auto(None);
        assert_eq!((unknown.of(false), unknown.of(true), unknown.most(), unknown.known()), (5, 16, 16, None));
        assert_eq!(SlotsPerWorker::auto(Some(false)).most(), 5);
        assert_eq!(SlotsPerWorker::auto(Some(true)).of(false), 16);
        let fixed = SlotsPerWorker::fixed(3);
        assert_eq!((fixed.of(false), fixed.of(true), fixed.most(), fixed.known()), (3, 3, 3, Some(3)));
    }
}
