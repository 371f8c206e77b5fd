//! Placeholder: replaced by the serving core.
use std::process::ExitCode;
#[derive(clap::Args, Debug)]
pub struct ServeArgs {}
#[derive(clap::Args, Debug)]
pub struct StatsArgs {}
pub fn serve(_args: ServeArgs) -> anyhow::Result<ExitCode> { anyhow::bail!("not built yet") }
pub fn stats(_args: StatsArgs) -> anyhow::Result<ExitCode> { anyhow::bail!("not built yet") }
