//! The parsers of flag values that are more than a number or a name: seconds, sizes, `auto`,
//! paths. Each says what it wanted, for clap to show beside the flag.

use std::time::Duration;

use super::count_or_auto::CountOrAuto;
use super::worker_count::WorkerCount;
use crate::queue::Target;
use crate::workers::scaling::ScaleUpWait;

/// `--root-path`: an absolute path of plain URL characters (no percent-encoding: it is compared
/// with decoded paths), kept without a trailing slash (`/` alone is no prefix at all).
pub fn parse_root_path(text: &str) -> Result<String, String> {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@".contains(&b);
    if !text.starts_with('/') || !text.bytes().all(allowed) {
        return Err("must be a path such as /api: starting with /, of URL path characters".to_owned());
    }
    Ok(text.trim_end_matches('/').to_owned())
}

/// `--health-path`: an absolute path, matched without its query.
pub fn parse_health_path(text: &str) -> Result<String, String> {
    if !text.starts_with('/') || text.contains(['?', '#', ' ']) {
        return Err(format!("'{text}' is not a path such as /healthz"));
    }
    Ok(text.to_owned())
}

/// Seconds, fractions allowed: `10`, `0.5`.
pub fn parse_secs(text: &str) -> Result<Duration, String> {
    let secs: f64 = text.trim().parse().map_err(|_| format!("'{text}' is not a number of seconds"))?;
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err(format!("'{text}' is not a number of seconds"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `--threads` and `--front-threads`.
pub fn parse_count_or_auto(text: &str) -> Result<CountOrAuto, String> {
    if text.trim().eq_ignore_ascii_case("auto") {
        return Ok(CountOrAuto::Auto);
    }
    text.trim().parse().map(CountOrAuto::Count).map_err(|_| format!("'{text}' is not a number or auto"))
}

/// `--workers`: `N`, or `MIN:MAX` (their bounds are checked with the other flags).
pub fn parse_worker_count(text: &str) -> Result<WorkerCount, String> {
    let number = |part: &str| part.trim().parse::<usize>().map_err(|_| format!("'{text}' is not N or MIN:MAX"));
    match text.split_once(':') {
        Some((min, max)) => Ok(WorkerCount::Range { min: number(min)?, max: number(max)? }),
        None => number(text).map(WorkerCount::Fixed),
    }
}

/// `--scale-up-wait`: `auto`, or seconds.
pub fn parse_scale_up_wait(text: &str) -> Result<ScaleUpWait, String> {
    if text.trim().eq_ignore_ascii_case("auto") {
        return Ok(ScaleUpWait::Auto);
    }
    parse_secs(text).map(ScaleUpWait::Fixed).map_err(|_| format!("'{text}' is not a number of seconds or auto"))
}

/// `--queue-target`: `auto`, or seconds where 0 means off.
pub fn parse_target(text: &str) -> Result<Target, String> {
    if text.trim().eq_ignore_ascii_case("auto") {
        return Ok(Target::Auto);
    }
    let secs = parse_secs(text).map_err(|_| format!("'{text}' is not a number of seconds or auto"))?;
    Ok(if secs.is_zero() { Target::Off } else { Target::Fixed(secs) })
}

/// A byte count, with an optional binary unit: `4096`, `32KiB`, `100MiB`, `1G` (K, M and G
/// are 1024-based too, as in nginx).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let split = trimmed.find(|c: char| !c.is_ascii_digit()).unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(split);
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(format!("'{text}' is not a size such as 4096, 32KiB or 100MiB")),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(multiplier))
        .ok_or_else(|| format!("'{text}' is not a size such as 4096, 32KiB or 100MiB"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        assert_eq!(parse_count_or_auto("auto"), Ok(CountOrAuto::Auto));
        assert_eq!(parse_count_or_auto("8"), Ok(CountOrAuto::Count(8)));
        assert!(parse_count_or_auto("many").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("32KiB"), Ok(32 * 1024));
        assert_eq!(parse_size("100M"), Ok(100 << 20));
        assert_eq!(parse_size("1 GiB"), Ok(1 << 30));
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("KiB").is_err());
        assert!(parse_size("99999999999G").is_err());
    }

    #[test]
    fn worker_counts() {
        assert_eq!(parse_worker_count("4"), Ok(WorkerCount::Fixed(4)));
        assert_eq!(parse_worker_count("2:8"), Ok(WorkerCount::Range { min: 2, max: 8 }));
        assert!(parse_worker_count("2:").is_err());
        assert!(parse_worker_count("many").is_err());
        assert_eq!(parse_scale_up_wait("auto"), Ok(ScaleUpWait::Auto));
        assert_eq!(parse_scale_up_wait("0.05"), Ok(ScaleUpWait::Fixed(Duration::from_millis(50))));
    }

    #[test]
    fn queue_targets() {
        assert_eq!(parse_target("auto"), Ok(Target::Auto));
        assert_eq!(parse_target("0"), Ok(Target::Off));
        assert_eq!(parse_target("0.02"), Ok(Target::Fixed(Duration::from_millis(20))));
        assert_eq!(parse_target("soon"), Err("'soon' is not a number of seconds or auto".to_owned()));
    }

    #[test]
    fn root_paths() {
        assert_eq!(parse_root_path("/api"), Ok("/api".to_owned()));
        assert_eq!(parse_root_path("/shop/v2/"), Ok("/shop/v2".to_owned()));
        assert_eq!(parse_root_path("/"), Ok(String::new()));
        for bad in ["api", "/a b", "/a?x=1", "/a#top", "/caf\u{e9}", "/caf%C3%A9", ""] {
            assert!(parse_root_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn seconds() {
        assert_eq!(parse_secs("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_secs("0.25"), Ok(Duration::from_millis(250)));
        assert!(parse_secs("-1").is_err());
        assert!(parse_secs("soon").is_err());
        assert!(parse_secs("inf").is_err());
    }
}
