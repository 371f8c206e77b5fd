//! Placeholder: replaced by the load generator.
use std::process::ExitCode;
#[derive(clap::Args, Debug)]
pub struct LoadArgs {}
pub fn run(_args: LoadArgs) -> anyhow::Result<ExitCode> { anyhow::bail!("not built yet") }
