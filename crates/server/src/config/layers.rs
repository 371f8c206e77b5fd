//! Where each `headway serve` setting comes from: a flag, else an environment variable, else the
//! TOML file of `-c/--config`, else its default; and `--print-config`, which shows the result.
//!
//! The flags are the only list of settings. Every argument clap knows for `serve` can also be
//! given as `HEADWAY_<FLAG>` (dashes as underscores: `HEADWAY_MAX_QUEUE=64`) or as a file key
//! named like the flag (`max-queue = 64`, or `max_queue`), so a flag added later gets both with
//! no second list to keep in sync. The conventions that predate this keep working as the
//! environment layer: `WEB_CONCURRENCY`, `FORWARDED_ALLOW_IPS` and the other `env` names
//! declared on the flags (and `PORT`, which only changes the default bind).
//!
//! Values from the environment and the file go through the same parsers as flags, one by one
//! first so that a bad one is named with its variable or file key; then the whole set is parsed
//! again as one command line, so that conflicts and everything clap checks apply alike.

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _};
use clap::builder::{BoolishValueParser, TypedValueParser as _};
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Args as _, FromArgMatches as _};

use crate::config::ServeArgs;

/// The flags that choose the layers themselves, which no layer below the command line sets.
const NOT_LAYERED: [&str; 3] = ["config", "print_config", "help"];
/// Settings `--print-config` shows as set but not what they are set to.
const SECRET: [&str; 1] = ["keyfile-password"];

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Flag,
    Environment(String),
    File(PathBuf),
    Default,
    /// No value, and no default: the setting's own rule applies (`--workers`: the CPUs).
    Unset,
}

/// One setting as resolved.
#[derive(Debug)]
pub struct Setting {
    /// The flag's long name, which is also its file key.
    pub key: String,
    pub source: Source,
    pub values: Vec<String>,
    is_switch: bool,
    is_list: bool,
}

/// Every setting of `headway serve` with where its value came from.
pub struct Sources(Vec<Setting>);

impl Sources {
    /// The key and origin of a value a message names as `--flag`, when it came from the
    /// environment or a file, for the reader to know where to fix it.
    pub fn origin_of_flag_in(&self, message: &str) -> Option<String> {
        self.0.iter().find_map(|setting| {
            let mentioned =
                message.contains(&format!("--{} ", setting.key)) || message.ends_with(&format!("--{}", setting.key));
            match &setting.source {
                Source::Environment(name) if mentioned => Some(format!("set by ${name}")),
                Source::File(path) if mentioned => Some(format!("set by {} in {}", setting.key, path.display())),
                _ => None,
            }
        })
    }

    /// The effective settings as a TOML file that would give them, each line saying where its
    /// value came from.
    pub fn render(&self) -> String {
        let mut out = String::from("# headway serve: effective settings (flag > environment > file > default)\n");
        let width = self.0.iter().map(|s| s.key.len()).max().unwrap_or(0);
        let value_width = self.0.iter().map(|s| s.toml_value().len()).max().unwrap_or(0).min(24);
        for setting in &self.0 {
            let origin = match &setting.source {
                Source::Flag => "flag".to_owned(),
                Source::Environment(name) => format!("environment: {name}"),
                Source::File(path) => format!("file: {}", path.display()),
                Source::Default => "default".to_owned(),
                Source::Unset => {
                    let _ = writeln!(out, "# {:width$} (not set)", setting.key);
                    continue;
                }
            };
            let value =
                if SECRET.contains(&setting.key.as_str()) { "\"(hidden)\"".to_owned() } else { setting.toml_value() };
            let _ = writeln!(out, "{:width$} = {value:value_width$}  # {origin}", setting.key);
        }
        out
    }
}

impl Setting {
    fn toml_value(&self) -> String {
        let one = |value: &str| {
            if self.is_switch || value.parse::<i64>().is_ok() || value.parse::<f64>().is_ok_and(f64::is_finite) {
                value.to_owned()
            } else {
                toml::Value::String(value.to_owned()).to_string()
            }
        };
        if self.is_list {
            format!("[{}]", self.values.iter().map(|value| one(value)).collect::<Vec<_>>().join(", "))
        } else {
            self.values.first().map_or_else(String::new, |value| one(value))
        }
    }
}

/// Resolves every setting from the command line `given` (as clap matched it), the environment
/// and the file `given` names.
pub fn resolve(given: &ArgMatches) -> anyhow::Result<(ServeArgs, Sources)> {
    let command = ServeArgs::augment_args(clap::Command::new("serve"));
    let without_environment = command.clone().mut_args(|arg| arg.env(None::<&str>));
    let file = match given.get_one::<PathBuf>("config") {
        Some(path) => Some((path.clone(), read_file(path, &command)?)),
        None => None,
    };

    let mut settings = Vec::new();
    let mut command_line: Vec<OsString> = vec!["serve".into()];
    let mut positionals: Vec<OsString> = Vec::new();
    for arg in command.get_arguments().filter(|arg| !NOT_LAYERED.contains(&arg.get_id().as_str())) {
        let id = arg.get_id().as_str();
        let key = key_of(arg);
        let is_switch = matches!(arg.get_action(), ArgAction::SetTrue);
        let is_list = matches!(arg.get_action(), ArgAction::Append);
        let raw = |matches: &ArgMatches| -> Vec<String> {
            matches.get_raw(id).into_iter().flatten().map(|value| value.to_string_lossy().into_owned()).collect()
        };
        let from_env = environment_value(arg, &key, given.value_source(id));
        let from_file = file.as_ref().and_then(|(path, table)| Some((path, table_value(table, &key)?)));
        let (source, values) = if given.value_source(id) == Some(ValueSource::CommandLine) {
            (Source::Flag, raw(given))
        } else if let Some((name, text)) = from_env {
            let values = if is_list { text.split(',').map(str::trim).map(str::to_owned).collect() } else { vec![text] };
            (Source::Environment(name), values)
        } else if let Some((path, value)) = from_file {
            let values =
                file_values(value, is_switch, is_list).map_err(|err| anyhow!("{}: {key}: {err}", path.display()))?;
            (Source::File(path.clone()), values)
        } else if given.value_source(id) == Some(ValueSource::DefaultValue) {
            (Source::Default, raw(given))
        } else {
            (Source::Unset, Vec::new())
        };

        let where_from = |source: &Source| match source {
            Source::Environment(name) => Some(format!("${name}")),
            Source::File(path) => Some(format!("{}: {key}", path.display())),
            _ => None,
        };
        if let Some(origin) = where_from(&source) {
            for value in &values {
                check_value(&without_environment, arg, is_switch, value).map_err(|err| anyhow!("{origin}: {err}"))?;
            }
        }
        // A switch reads `yes`, `on`, `1`... from the environment; it is shown as TOML's bool.
        let values = if is_switch { values.iter().map(|value| is_true(value).to_string()).collect() } else { values };
        if source != Source::Default && source != Source::Unset {
            if arg.is_positional() {
                positionals.extend(values.iter().map(OsString::from));
            } else if is_switch {
                if values.iter().any(|value| value == "true") {
                    command_line.push(format!("--{key}").into());
                }
            } else {
                command_line.extend(values.iter().map(|value| OsString::from(format!("--{key}={value}"))));
            }
        }
        settings.push(Setting { key, source, values, is_switch, is_list });
    }
    if !positionals.is_empty() {
        command_line.push("--".into());
        command_line.extend(positionals);
    }
    let matches = command.try_get_matches_from(command_line).map_err(|err| anyhow!(first_line(&err)))?;
    let mut args = ServeArgs::from_arg_matches(&matches).map_err(|err| anyhow!(first_line(&err)))?;
    args.config = given.get_one::<PathBuf>("config").cloned();
    args.print_config = given.get_flag("print_config");
    Ok((args, Sources(settings)))
}

/// The flag's long name, or the positional's id (`app`).
fn key_of(arg: &Arg) -> String {
    arg.get_long().map_or_else(|| arg.get_id().as_str().to_owned(), str::to_owned)
}

/// `HEADWAY_<FLAG>`, else the conventional variable the flag declares (which clap has read).
fn environment_value(arg: &Arg, key: &str, source: Option<ValueSource>) -> Option<(String, String)> {
    let name = format!("HEADWAY_{}", key.replace('-', "_").to_ascii_uppercase());
    if let Ok(value) = std::env::var(&name) {
        return Some((name, value));
    }
    let conventional = arg.get_env()?;
    if source != Some(ValueSource::EnvVariable) {
        return None;
    }
    let value = std::env::var(conventional).ok()?;
    Some((conventional.to_string_lossy().into_owned(), value))
}

fn read_file(path: &Path, command: &clap::Command) -> anyhow::Result<toml::Table> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read --config {}", path.display()))?;
    let table: toml::Table = text.parse().map_err(|err: toml::de::Error| {
        let line = err.span().map(|span| text[..span.start].lines().count().max(1));
        let at = line.map_or_else(String::new, |line| format!(" (line {line})"));
        anyhow!("{}{at}: {}", path.display(), err.message())
    })?;
    for key in table.keys() {
        let known = command
            .get_arguments()
            .any(|arg| !NOT_LAYERED.contains(&arg.get_id().as_str()) && key_of(arg) == key.replace('_', "-"));
        if !known {
            bail!("{}: unknown key '{key}' (the keys are the long names of headway serve's flags)", path.display());
        }
    }
    Ok(table)
}

/// The file's value for `key`, written with dashes or underscores.
fn table_value<'a>(table: &'a toml::Table, key: &str) -> Option<&'a toml::Value> {
    table.get(key).or_else(|| table.get(&key.replace('-', "_")))
}

/// A file value as the flag's value or values.
fn file_values(value: &toml::Value, is_switch: bool, is_list: bool) -> Result<Vec<String>, String> {
    let scalar = |value: &toml::Value| match value {
        toml::Value::Boolean(b) if is_switch => Ok(b.to_string()),
        other if is_switch => Err(format!("expected true or false, not {}", other.type_str())),
        toml::Value::String(text) => Ok(text.clone()),
        toml::Value::Integer(n) => Ok(n.to_string()),
        toml::Value::Float(x) => Ok(x.to_string()),
        other => Err(format!("expected a value, not {}", other.type_str())),
    };
    match value {
        toml::Value::Array(items) if is_list => items.iter().map(scalar).collect(),
        toml::Value::Array(_) => Err("expected one value, not a list".to_owned()),
        one => Ok(vec![scalar(one)?]),
    }
}

/// Parses one value as the flag would, for a message that names where it came from.
/// (`command` reads no environment, so that only this value is judged.)
fn check_value(command: &clap::Command, arg: &Arg, is_switch: bool, value: &str) -> Result<(), String> {
    let parsed = if is_switch {
        BoolishValueParser::new().parse_ref(command, Some(arg), OsStr::new(value)).map(|_| ())
    } else {
        let token = if arg.is_positional() { value.to_owned() } else { format!("--{}={value}", key_of(arg)) };
        command.clone().try_get_matches_from(["serve", token.as_str()]).map(|_| ())
    };
    parsed.map_err(|err| first_line(&err))
}

fn is_true(value: &str) -> bool {
    matches!(value.to_ascii_lowercase().as_str(), "true" | "1" | "yes" | "on" | "y")
}

/// clap's message without its `error: ` prefix and usage lines.
fn first_line(err: &clap::Error) -> String {
    let text = err.to_string();
    let line = text.lines().next().unwrap_or_default();
    line.strip_prefix("error: ").unwrap_or(line).to_owned()
}
