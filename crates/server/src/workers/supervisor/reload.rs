//! A reload: every worker replaced in turn, each new process started while the old one serves
//! (SIGHUP, or `--reload` seeing a change; see the module comment of [`super`]).

use std::sync::Arc;

use anyhow::bail;
use tokio::sync::{mpsc, oneshot};

use crate::workers::recycle::Turns;
use crate::workers::zygote::Preloaded;

/// Reloads: replaces the workers one at a time; see the module comment of [`super`].
#[derive(Clone)]
pub struct Reloader {
    /// Per worker: where to ask its manager for a reload, and get the result.
    pub(super) workers: Vec<mpsc::Sender<ReloadDone>>,
    /// Shared with recycling, so that a reload never takes a worker away while a recycle has
    /// another one away.
    pub(super) turns: Turns,
    /// With `--preload`, a reload imports the new code in a new parent first.
    pub(super) preloaded: Option<Arc<Preloaded>>,
}

/// Tells whoever asked for a reload whether the new process started.
pub(super) type ReloadDone = oneshot::Sender<Result<(), String>>;

impl Reloader {
    /// Replaces every worker in turn. Stops at the first worker whose new process does not
    /// start, leaving the rest on the old code.
    pub async fn reload(&self) -> anyhow::Result<()> {
        if let Some(preloaded) = &self.preloaded {
            preloaded
                .renew()
                .await
                .map_err(|err| anyhow::anyhow!("a new preloaded parent {err}; the workers keep the old code"))?;
        }
        for (index, manager) in self.workers.iter().enumerate() {
            let _turn = self.turns.take().await;
            let (done, result) = oneshot::channel();
            manager.send(done).await.map_err(|_| anyhow::anyhow!("the server is stopping"))?;
            match result.await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => bail!("worker {} {err}; the workers after it keep the old code", index + 1),
                Err(_) => bail!("the server is stopping"),
            }
        }
        Ok(())
    }
}
