//! The CGI variables' rules that the WSGI environ and the Rack env share: PATH_INFO decoded from
//! the path, the part of it below a mount point (SCRIPT_NAME), and SERVER_NAME and SERVER_PORT
//! from the Host field.

use std::borrow::Cow;

use super::request::latin1;

/// PATH_INFO: the path percent-decoded, the bytes read as latin-1 (PEP 3333).
pub fn path_info(path: &str) -> String {
    if !path.contains('%') {
        return path.to_owned();
    }
    // The path's bytes as sent (it was read as latin-1), percent-escapes decoded.
    latin1(&percent_decoded(&bytes_of_latin1(path)))
}

/// `bytes` with each `%` and two hex digits replaced by the byte they name (what is not such an
/// escape stays as it is, as Python's `unquote_to_bytes` has it).
pub fn percent_decoded(bytes: &[u8]) -> Cow<'_, [u8]> {
    if !bytes.contains(&b'%') {
        return Cow::Borrowed(bytes);
    }
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some((&byte, tail)) = rest.split_first() {
        let hex = |b: u8| (b as char).to_digit(16);
        match tail {
            [high, low, after @ ..] if byte == b'%' && hex(*high).is_some() && hex(*low).is_some() => {
                decoded.push((hex(*high).unwrap_or(0) * 16 + hex(*low).unwrap_or(0)) as u8);
                rest = after;
            }
            _ => {
                decoded.push(byte);
                rest = tail;
            }
        }
    }
    Cow::Owned(decoded)
}

/// The bytes a head's text was read from (as latin-1: one character a byte).
pub fn bytes_of_latin1(text: &str) -> Vec<u8> {
    text.chars().map(|c| c as u32 as u8).collect()
}

/// The part of `path` below `root_path`: all of it if it is not there.
pub fn below<'a>(path: &'a str, root_path: &str) -> &'a str {
    match path.strip_prefix(root_path) {
        Some(rest) if !root_path.is_empty() && (rest.is_empty() || rest.starts_with('/')) => rest,
        _ => path,
    }
}

/// (SERVER_NAME, SERVER_PORT) from a Host header; either may be empty.
pub fn server_of_host(host: &str) -> (&str, &str) {
    let (name, port) = match host.strip_prefix('[') {
        Some(bracketed) => {
            let (name, rest) = bracketed.split_once(']').unwrap_or((bracketed, ""));
            (name, rest.strip_prefix(':').unwrap_or(""))
        }
        None => host.split_once(':').unwrap_or((host, "")),
    };
    let port = if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) { port } else { "" };
    (name, port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_info_is_percent_decoded_as_latin_1() {
        assert_eq!(path_info("/plain"), "/plain");
        assert_eq!(path_info("/envir%6Fn"), "/environ");
        assert_eq!(path_info("/caf%C3%A9"), "/caf\u{c3}\u{a9}");
        assert_eq!(path_info("/100%/%zz/%4"), "/100%/%zz/%4");
        // Raw bytes beside an escape stay the bytes they were (the path is read as latin-1).
        assert_eq!(path_info("/caf\u{c3}\u{a9}%20"), "/caf\u{c3}\u{a9} ");
    }

    #[test]
    fn the_root_path_is_taken_off_where_it_is() {
        assert_eq!(below("/api/users", "/api"), "/users");
        assert_eq!(below("/api", "/api"), "");
        assert_eq!(below("/users", "/api"), "/users", "a router took it off");
        assert_eq!(below("/apiary", "/api"), "/apiary", "a prefix of a segment is not the root");
        assert_eq!(below("/users", ""), "/users");
    }

    #[test]
    fn host_gives_server_name_and_port() {
        assert_eq!(server_of_host("example.com:8080"), ("example.com", "8080"));
        assert_eq!(server_of_host("[::1]:9000"), ("::1", "9000"));
        assert_eq!(server_of_host("example.org"), ("example.org", ""));
        assert_eq!(server_of_host("h:port"), ("h", ""));
    }
}
