//! A reload: every worker replaced in turn, each new process started while the old one serves
//! (SIGHUP, or `--reload` seeing a change; see the module comment of [`super`]).

use std::sync::Arc;

use anyhow::bail;
use tokio::sync::oneshot;

use super::pool::Pool;

/// Reloads: replaces the workers one at a time; see the module comment of [`super`].
#[derive(Clone)]
pub struct Reloader {
    /// Where to ask each worker's manager for a reload; its turns are shared with recycling, so
    /// that a reload never takes a worker away while a recycle has another one away. With
    /// `--preload`, a reload imports the new code in a new parent first, and workers added
    /// meanwhile are forked from it.
    pub(super) pool: Arc<Pool>,
}

impl Reloader {
    /// Replaces every worker in turn. Stops at the first worker whose new process does not
    /// start, leaving the rest on the old code. A worker removed meanwhile is passed over.
    pub async fn reload(&self) -> anyhow::Result<()> {
        if let Some(preloaded) = &self.pool.preloaded {
            preloaded
                .renew()
                .await
                .map_err(|err| anyhow::anyhow!("a new preloaded parent {err}; the workers keep the old code"))?;
        }
        for (index, manager) in self.pool.reloads() {
            let _turn = self.pool.turns.take().await;
            let (done, result) = oneshot::channel();
            if manager.send(done).await.is_err() {
                continue; // its manager has ended: the worker left the pool, or the server stops
            }
            match result.await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => bail!("worker {index} {err}; the workers after it keep the old code"),
                Err(_) => continue,
            }
        }
        Ok(())
    }
}
