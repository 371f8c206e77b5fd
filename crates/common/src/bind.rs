//! An address of a headway server: where `--bind` and `--control` listen, and where
//! `headway stats` and the lab connect. One parser, so an address the server accepts is one its
//! readers can reach.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

/// An address to listen on or connect to, as given with `--bind` or `--control`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bind {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl Bind {
    /// Parses `HOST:PORT`, `[IPv6]:PORT` or `unix:/path`. A host name resolves to every
    /// address it has, each a bind of its own.
    pub fn parse_all(text: &str) -> Result<Vec<Bind>, String> {
        if let Some(path) = text.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(format!("'{text}': a unix socket needs a path, as in unix:/run/app.sock"));
            }
            return Ok(vec![Bind::Unix(PathBuf::from(path))]);
        }
        if let Ok(addr) = text.parse::<SocketAddr>() {
            return Ok(vec![Bind::Tcp(addr)]);
        }
        let addrs = text.to_socket_addrs().map_err(|err| format!("'{text}' is not HOST:PORT or unix:PATH ({err})"))?;
        let mut binds: Vec<Bind> = addrs.map(Bind::Tcp).collect();
        binds.dedup();
        if binds.is_empty() {
            return Err(format!("'{text}' resolves to no address"));
        }
        Ok(binds)
    }
}

impl Bind {
    /// The address as a client reaches it, `https://` where the server speaks TLS on it: how the
    /// server names its listeners in every line it logs about them.
    pub fn served(&self, tls: bool) -> Served<'_> {
        Served { bind: self, tls }
    }
}

/// A [`Bind`] shown with the scheme it is served with (see [`Bind::served`]).
pub struct Served<'a> {
    bind: &'a Bind,
    tls: bool,
}

impl fmt::Display for Served<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.bind, self.tls) {
            (Bind::Tcp(addr), false) => write!(f, "http://{addr}"),
            (Bind::Tcp(addr), true) => write!(f, "https://{addr}"),
            (Bind::Unix(path), false) => write!(f, "unix:{}", path.display()),
            (Bind::Unix(path), true) => write!(f, "unix:{} (HTTPS)", path.display()),
        }
    }
}

impl fmt::Display for Bind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.served(false).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_binds() {
        assert_eq!(Bind::parse_all("127.0.0.1:8000").unwrap(), vec![Bind::Tcp("127.0.0.1:8000".parse().unwrap())]);
        assert_eq!(Bind::parse_all("[::1]:80").unwrap(), vec![Bind::Tcp("[::1]:80".parse().unwrap())]);
        assert_eq!(Bind::parse_all("unix:/tmp/a.sock").unwrap(), vec![Bind::Unix("/tmp/a.sock".into())]);
        assert!(Bind::parse_all("unix:").is_err());
        assert!(Bind::parse_all("nonsense").is_err());
        assert!(!Bind::parse_all("localhost:8000").unwrap().is_empty());
    }

    #[test]
    fn shows_as_given() {
        assert_eq!(Bind::Tcp("[::1]:80".parse().unwrap()).to_string(), "http://[::1]:80");
        assert_eq!(Bind::Unix("/tmp/a.sock".into()).to_string(), "unix:/tmp/a.sock");
        assert_eq!(Bind::Tcp("127.0.0.1:443".parse().unwrap()).served(true).to_string(), "https://127.0.0.1:443");
        assert_eq!(Bind::Unix("/tmp/a.sock".into()).served(true).to_string(), "unix:/tmp/a.sock (HTTPS)");
    }
}
