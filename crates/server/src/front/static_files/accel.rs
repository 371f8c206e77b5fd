//! `X-Accel-Redirect` and `X-Sendfile`: a worker answers with a file's name in a field and an
//! empty body, and the front sends the file, with the worker's status and fields and the same
//! conditionals, ranges and `sendfile` as a mount. The app keeps the decision (a permission
//! check, a download counter); the front does the sending, without a slot.
//!
//! Only names under what the operator allowed are taken: an `X-Accel-Redirect` URI under an
//! `--accel-mapping` prefix (nginx's `internal` locations), an `X-Sendfile` path under a
//! `--sendfile-root` (mod_xsendfile's `XSendFilePath`), each resolved as a mount's path is; any
//! other is a `502` and a log line, never a file. Without the flag for a field, the field goes
//! to the client as any other (a proxy in front may be the one to act on it).
//!
//! The request tells the app which field to use, as nginx configured for Rails does
//! (`X-Sendfile-Type`, and `X-Accel-Mapping` from directory to URI, which Rack::Sendfile
//! reads), in place of any a client sent.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode};

use super::conditional::Preconditions;
use super::mounts::StaticSettings;
use super::resolve::{resolve, within, Resolution};
use super::response::{file_response, FileResponse};
use crate::ops::stats::Stats;
use headway_http1::fields::{remove_fields, strip_connection_fields};

pub static X_ACCEL_REDIRECT: HeaderName = HeaderName::from_static("x-accel-redirect");
pub static X_SENDFILE: HeaderName = HeaderName::from_static("x-sendfile");
static X_SENDFILE_TYPE: HeaderName = HeaderName::from_static("x-sendfile-type");
static X_ACCEL_MAPPING: HeaderName = HeaderName::from_static("x-accel-mapping");

/// Fields nginx reads from a worker's `X-Accel-Redirect` response and never sends on.
const NGINX_CONTROLS: [HeaderName; 4] = [
    HeaderName::from_static("x-accel-buffering"),
    HeaderName::from_static("x-accel-charset"),
    HeaderName::from_static("x-accel-expires"),
    HeaderName::from_static("x-accel-limit-rate"),
];

/// What the front makes of a worker's response that hands it a file.
pub enum HandOff {
    File(FileResponse),
    /// `502`: a name outside what the operator allowed.
    Refused(String),
    /// `404`: an allowed name with no file.
    Missing(String),
}

impl StaticSettings {
    /// Whether workers may hand files to the front.
    pub fn takes_hand_offs(&self) -> bool {
        !self.accel_mappings.is_empty() || !self.sendfile_roots.is_empty()
    }

    /// Tells the app how to hand a file to the front, in place of what the client said.
    pub fn mark_request(&self, headers: &mut HeaderMap) {
        remove_fields(headers, &[X_SENDFILE_TYPE.clone(), X_ACCEL_MAPPING.clone()]);
        if !self.accel_mappings.is_empty() {
            headers.insert(X_SENDFILE_TYPE.clone(), HeaderValue::from_static("X-Accel-Redirect"));
            let mapping = self
                .accel_mappings
                .iter()
                .map(|mount| format!("{}/={}/", mount.root.display(), mount.prefix))
                .collect::<Vec<_>>()
                .join(",");
            if let Ok(mapping) = HeaderValue::from_str(&mapping) {
                headers.insert(X_ACCEL_MAPPING.clone(), mapping);
            }
        } else if !self.sendfile_roots.is_empty() {
            headers.insert(X_SENDFILE_TYPE.clone(), HeaderValue::from_static("X-Sendfile"));
        }
    }

    /// The file a worker's response hands over, if it names one by a field the front takes.
    /// The field is removed from `head` either way.
    pub fn hand_off(
        &self,
        head: &mut http::response::Parts,
        method: &Method,
        preconditions: &Preconditions,
    ) -> Option<HandOff> {
        let accel = if self.accel_mappings.is_empty() { None } else { head.headers.remove(&X_ACCEL_REDIRECT) };
        let sendfile = if self.sendfile_roots.is_empty() { None } else { head.headers.remove(&X_SENDFILE) };
        let (field, value) = match (accel, sendfile) {
            (Some(uri), _) => ("X-Accel-Redirect", uri),
            (None, Some(path)) => ("X-Sendfile", path),
            (None, None) => return None,
        };
        let named = String::from_utf8_lossy(value.as_bytes()).into_owned();
        let resolution = if field == "X-Sendfile" { self.sendfile_file(&value) } else { self.accel_file(&value) };
        let opened = match resolution {
            Resolution::Found(opened) => opened,
            Resolution::Missing => return Some(HandOff::Missing(format!("{field} {named}: no such file"))),
            Resolution::Refused(why) => return Some(HandOff::Refused(format!("{field} {named}: {why}"))),
        };
        let mut headers = std::mem::take(&mut head.headers);
        strip_connection_fields(&mut headers);
        remove_fields(&mut headers, &[header::CONTENT_LENGTH, header::TRANSFER_ENCODING]);
        remove_fields(&mut headers, &NGINX_CONTROLS);
        if !headers.contains_key(header::CONTENT_TYPE) {
            headers.insert(header::CONTENT_TYPE, opened.content_type.clone());
        }
        let is_head = *method == Method::HEAD;
        Some(HandOff::File(file_response(opened, head.status, headers, preconditions, !is_head, is_head)))
    }

    /// The file an `X-Accel-Redirect` URI names: under the mapping whose prefix it starts with.
    fn accel_file(&self, uri: &HeaderValue) -> Resolution {
        let Ok(uri) = uri.to_str() else { return Resolution::Refused("not a URI path") };
        let path = uri.split_once('?').map_or(uri, |(path, _)| path);
        let mut mapped = self.accel_mappings.iter().filter_map(|mount| Some((mount, mount.relative(path)?)));
        match mapped.next() {
            Some((mount, relative)) => resolve(&mount.root, relative, mount.options.dot_files),
            None => Resolution::Refused("not under any --accel-mapping prefix"),
        }
    }

    /// The file an `X-Sendfile` path names: an absolute path that resolves under a
    /// `--sendfile-root`.
    fn sendfile_file(&self, path: &HeaderValue) -> Resolution {
        let path = Path::new(OsStr::from_bytes(path.as_bytes()));
        if !path.is_absolute() {
            return Resolution::Refused("not an absolute path");
        }
        let resolutions = self.sendfile_roots.iter().map(|root| (root, within(root, path)));
        let mut missing = false;
        for (root, resolution) in resolutions {
            match resolution {
                Resolution::Found(file) => return Resolution::Found(file),
                Resolution::Missing if path.starts_with(root) => missing = true,
                _ => {}
            }
        }
        if missing {
            Resolution::Missing
        } else {
            Resolution::Refused("not under any --sendfile-root")
        }
    }
}

impl HandOff {
    /// The status a refused or missing hand-off is answered with.
    pub fn failure_status(&self) -> StatusCode {
        match self {
            HandOff::Missing(_) => StatusCode::NOT_FOUND,
            _ => StatusCode::BAD_GATEWAY,
        }
    }

    /// Counts a file sent, or a name refused (a name with no file is a plain `404`).
    pub fn count(&self, stats: &Stats) {
        match self {
            HandOff::File(_) => stats.handed_off(true),
            HandOff::Refused(_) => stats.handed_off(false),
            HandOff::Missing(_) => {}
        }
    }

    /// Why it failed, for the log.
    pub fn reason(&self) -> &str {
        match self {
            HandOff::Refused(why) | HandOff::Missing(why) => why,
            HandOff::File(_) => "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::static_files::resolve::tests::found_path;
    use crate::front::static_files::Mount;
    use std::path::PathBuf;

    #[test]
    fn only_names_under_the_allowed_roots_are_taken() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let private = base.join("private");
        std::fs::create_dir(&private).unwrap();
        std::fs::write(private.join("a.pdf"), "a").unwrap();
        std::fs::write(base.join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(base.join("secret"), private.join("leak")).unwrap();
        let settings = StaticSettings {
            accel_mappings: vec![Mount {
                prefix: "/internal".to_owned(),
                root: private.clone(),
                options: Default::default(),
            }],
            sendfile_roots: vec![private.clone()],
            ..StaticSettings::default()
        };
        let accel = |uri: &'static str| settings.accel_file(&HeaderValue::from_static(uri));
        let sendfile = |path: &Path| settings.sendfile_file(&HeaderValue::from_str(path.to_str().unwrap()).unwrap());
        assert_eq!(found_path(&accel("/internal/a.pdf?x=1")), Some(private.join("a.pdf")));
        assert!(matches!(accel("/internal/b.pdf"), Resolution::Missing));
        for refused in
            ["/other/a.pdf", "/internal/../secret", "/internal/%2e%2e/secret", "/internal/leak", "/internalx"]
        {
            assert!(matches!(accel(refused), Resolution::Refused(_)), "{refused}");
        }
        assert_eq!(found_path(&sendfile(&private.join("a.pdf"))), Some(private.join("a.pdf")));
        assert!(matches!(sendfile(&private.join("sub/../a.pdf")), Resolution::Missing), "sub does not exist");
        assert!(matches!(sendfile(&private.join("b.pdf")), Resolution::Missing));
        for refused in [base.join("secret"), private.join("../secret"), private.join("leak"), "a.pdf".into()] {
            assert!(matches!(sendfile(&refused), Resolution::Refused(_)), "{}", refused.display());
        }
        assert!(matches!(sendfile(&base.join("nope")), Resolution::Refused(_)), "missing, and outside");
    }

    #[test]
    fn the_app_is_told_the_field_and_mapping_in_place_of_the_clients() {
        let mut headers = HeaderMap::new();
        headers.insert(X_SENDFILE_TYPE.clone(), HeaderValue::from_static("X-Sendfile"));
        headers.insert(X_ACCEL_MAPPING.clone(), HeaderValue::from_static("/=/x/"));
        let root = PathBuf::from("/srv/files");
        let accel = StaticSettings {
            accel_mappings: vec![Mount {
                prefix: "/private".to_owned(),
                root: root.clone(),
                options: Default::default(),
            }],
            ..StaticSettings::default()
        };
        accel.mark_request(&mut headers);
        assert_eq!(headers[&X_SENDFILE_TYPE], "X-Accel-Redirect");
        assert_eq!(headers[&X_ACCEL_MAPPING], "/srv/files/=/private/");
        let sendfile = StaticSettings { sendfile_roots: vec![root], ..StaticSettings::default() };
        sendfile.mark_request(&mut headers);
        assert_eq!(headers[&X_SENDFILE_TYPE], "X-Sendfile");
        assert!(!headers.contains_key(&X_ACCEL_MAPPING));
    }
}
