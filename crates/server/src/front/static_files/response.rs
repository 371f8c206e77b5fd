//! A file's response, from the file and the request's conditional fields: `200` with the whole
//! file, `206` with one range, `304` when the client's copy is current, `416` for a range past the
//! end; always with the file's validators and `Accept-Ranges`. The same for a static mount and for
//! a worker's `X-Accel-Redirect`, whose status and fields it starts from.

use std::fs::{File, Metadata};

use http::header::{self, HeaderMap, HeaderValue};
use http::StatusCode;

use super::conditional::{Preconditions, Selection, Validators};

/// The front's answer to a request under a mount.
pub enum StaticAnswer {
    File(FileResponse),
    /// Not there, with `--static-only`, or a path that tries to leave its directory.
    NotFound,
}

/// What the front sends for a file.
pub struct FileResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// The bytes of the file to send; `None` for `HEAD`, `304` and `416`.
    pub body: Option<FileBody>,
}

/// A run of a file's bytes.
pub struct FileBody {
    pub file: File,
    pub offset: u64,
    pub len: u64,
}

/// A file opened to be sent, with what `fstat` said of it.
pub struct Opened {
    pub file: File,
    pub meta: Metadata,
}

/// The response for `opened`, starting from `status` and `headers` (the worker's, or a mount's
/// content fields). Conditionals and ranges apply to a `200` only; `ranged`: a `Range` may apply
/// (a `GET`); `is_head`: the body is not sent, though its length is said.
pub fn file_response(
    opened: Opened,
    status: StatusCode,
    mut headers: HeaderMap,
    preconditions: &Preconditions,
    ranged: bool,
    is_head: bool,
) -> FileResponse {
    let Opened { file, meta } = opened;
    let len = meta.len();
    let validators = Validators::of(&meta);
    if !headers.contains_key(header::ETAG) {
        headers.insert(header::ETAG, HeaderValue::from_str(&validators.etag).expect("hex digits and quotes"));
    }
    if !headers.contains_key(header::LAST_MODIFIED) {
        let date = HeaderValue::from_str(&validators.last_modified()).expect("an HTTP date is a valid value");
        headers.insert(header::LAST_MODIFIED, date);
    }
    headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    let selection =
        if status == StatusCode::OK { preconditions.select(&validators, len, ranged) } else { Selection::Whole };
    let (status, offset, send) = match selection {
        Selection::NotModified => {
            headers.remove(header::CONTENT_TYPE);
            headers.remove(header::CONTENT_LENGTH);
            return FileResponse { status: StatusCode::NOT_MODIFIED, headers, body: None };
        }
        Selection::Unsatisfiable => {
            headers.insert(header::CONTENT_RANGE, HeaderValue::from_str(&format!("bytes */{len}")).expect("digits"));
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(0));
            return FileResponse { status: StatusCode::RANGE_NOT_SATISFIABLE, headers, body: None };
        }
        Selection::Whole => (status, 0, len),
        Selection::Part { start, end } => {
            let range = format!("bytes {start}-{end}/{len}");
            headers.insert(header::CONTENT_RANGE, HeaderValue::from_str(&range).expect("digits"));
            (StatusCode::PARTIAL_CONTENT, start, end - start + 1)
        }
    };
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(send));
    let body = (!is_head && send > 0).then_some(FileBody { file, offset, len: send });
    FileResponse { status, headers, body }
}
