//! The bundled Rack worker's launch: when it is the one (an APP ending in `.ru`, or `--interface
//! rack`), the Ruby that runs it (`--ruby`, `$HEADWAY_RUBY`, else `ruby` on PATH), and where its
//! Ruby side and extension are (`$HEADWAY_RUBY_LIB`, which the gem's `headway` sets to the gem's
//! lib folder, else the `ruby/lib` of the checkout this program was built from).

use std::path::PathBuf;

use anyhow::bail;
use headway_common::executable::{interpreter_problem, which};

use super::args::ServeArgs;
use crate::workers::launch::{Interface, Launch, RackApp};

/// The folder given to Ruby with `-I`, when set.
const LIB_ENV: &str = "HEADWAY_RUBY_LIB";

/// What `--reload` watches for the Rack worker unless `--reload-include` says.
pub const RACK_SOURCES: [&str; 3] = ["*.rb", "*.ru", "*.erb"];

/// Whether the flags ask for the Rack worker: an APP ending in `.ru`, or `--interface rack`.
pub fn serves_rack(args: &ServeArgs) -> bool {
    args.interface == Interface::Rack || args.app.as_deref().is_some_and(|app| app.ends_with(".ru"))
}

/// The Rack worker's launch, if the flags ask for it.
pub fn rack_launch(args: &ServeArgs) -> anyhow::Result<Option<Launch>> {
    if !serves_rack(args) {
        return Ok(None);
    }
    let config = args.app.clone().unwrap_or_else(|| "config.ru".to_owned());
    let root_path = args.root_path.clone().filter(|root| !root.is_empty());
    let app = RackApp { config, hooks: args.hooks.clone(), lib: lib(), root_path };
    Ok(Some(Launch::Ruby { ruby: ruby(args.ruby.clone())?, app }))
}

/// The Ruby to run the worker with: the one given, checked, else `ruby` on PATH.
fn ruby(given: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let Some(given) = given else {
        return match which("ruby", &path) {
            Some(ruby) => Ok(ruby),
            None => bail!("no ruby found on PATH: install Ruby (apt-get install ruby), or name one with --ruby"),
        };
    };
    if let Some(problem) = interpreter_problem(&given, &path) {
        bail!("--ruby {} (or $HEADWAY_RUBY): {problem}; it names the Ruby that runs the Rack app", given.display());
    }
    Ok(given)
}

fn lib() -> PathBuf {
    match std::env::var_os(LIB_ENV).filter(|value| !value.is_empty()) {
        Some(lib) => PathBuf::from(lib),
        None => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../ruby/lib")),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn launch(argv: &[&str]) -> anyhow::Result<Option<Launch>> {
        let args = Command::try_parse_from(["headway", "--ruby", "/bin/sh"].iter().chain(argv))?;
        rack_launch(&args.serve)
    }

    #[test]
    fn a_rackup_file_or_the_rack_interface_picks_the_ruby_worker() {
        let Some(Launch::Ruby { ruby, app }) = launch(&["app.ru"]).unwrap() else { panic!("not the Ruby worker") };
        assert_eq!((ruby, app.config.as_str()), (PathBuf::from("/bin/sh"), "app.ru"));
        let Some(Launch::Ruby { app, .. }) = launch(&["--interface", "rack"]).unwrap() else { panic!("not Ruby") };
        assert_eq!(app.config, "config.ru");
        assert!(launch(&["myapp:app"]).unwrap().is_none());
        assert!(launch(&[]).unwrap().is_none());
    }

    #[test]
    fn the_root_path_goes_to_the_rack_worker() {
        let Some(Launch::Ruby { app, .. }) = launch(&["--root-path", "/shop/", "app.ru"]).unwrap() else {
            panic!("not the Ruby worker")
        };
        assert_eq!(app.root_path.as_deref(), Some("/shop"));
        let Some(Launch::Ruby { app, .. }) = launch(&["--root-path", "/", "app.ru"]).unwrap() else {
            panic!("not Ruby")
        };
        assert_eq!(app.root_path, None);
    }

    #[test]
    fn a_wrong_ruby_is_refused() {
        let wrong = Command::try_parse_from(["headway", "--ruby", "/no/such/ruby", "app.ru"]).unwrap();
        let wrong = rack_launch(&wrong.serve).unwrap_err().to_string();
        assert!(wrong.starts_with("--ruby /no/such/ruby (or $HEADWAY_RUBY): no such file"), "{wrong}");
    }
}
