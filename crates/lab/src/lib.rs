//! Placeholder: replaced by the lab.
use std::process::ExitCode;
#[derive(clap::Args, Debug)]
pub struct LabArgs {}
pub fn run(_args: LabArgs) -> anyhow::Result<ExitCode> { anyhow::bail!("not built yet") }
