//! The PROXY protocol (HAProxy's proxy-protocol.txt): with `--proxy-protocol`, every TCP
//! connection starts with a header, text (v1) or binary (v2), in which the balancer in front
//! (HAProxy's `send-proxy[-v2]`, an AWS NLB, a router) names the client it accepted. That client
//! becomes the connection's peer for every purpose: trust, `X-Forwarded-For`, the access log.
//! A v2 header's SSL TLV (HAProxy's `send-proxy-v2-ssl`) says the client spoke TLS to the
//! balancer: the front then says `X-Forwarded-Proto: https` itself, since the header, unlike a
//! client's own `X-Forwarded-Proto`, comes from the balancer.
//!
//! The parsing is the `ppp` crate's. A connection whose first bytes are not a complete, valid
//! header within the header timeout is closed with a log line: the spec forbids guessing, since
//! a client could otherwise pretend to be anyone. A `LOCAL` (v2) or `UNKNOWN` (v1) header is the
//! balancer speaking for itself (its health checks): the socket's own peer stays.

use std::net::IpAddr;

use bytes::BytesMut;
use ppp::{v1, v2, HeaderResult, PartialResult as _};
use tokio::io::{AsyncRead, AsyncReadExt as _};
use tokio::time::{timeout_at, Instant};

use super::conn::READ_CHUNK;
use super::forwarding_fields::{Peer, TrustedProxies};

/// The longest header: v2's 16 fixed bytes and a 16-bit length of addresses and TLVs.
const MAX_HEADER: usize = 16 + u16::MAX as usize;

/// Reads the PROXY header that must open a connection by `deadline`, and makes the client it
/// names the peer. Bytes read after the header are left in `buf`: they are the connection's own
/// (its first request, or its TLS handshake). `Err` says why the connection must be closed.
pub(super) async fn read_header(
    io: &mut (impl AsyncRead + Unpin),
    buf: &mut BytesMut,
    peer: &mut Peer,
    trusted: &TrustedProxies,
    deadline: Instant,
) -> Result<(), String> {
    loop {
        if let Some((used, named)) = parse(buf)? {
            let _ = buf.split_to(used);
            if let Some(client) = named.client {
                *peer = Peer::tcp(client, trusted);
            }
            peer.tls = named.tls;
            return Ok(());
        }
        if buf.len() >= MAX_HEADER {
            return Err("header too long".to_owned());
        }
        buf.reserve(READ_CHUNK);
        match timeout_at(deadline, io.read_buf(buf)).await {
            Ok(Ok(0)) => return Err("closed before a complete header".to_owned()),
            Ok(Ok(_)) => {}
            Ok(Err(err)) => return Err(err.to_string()),
            Err(_) => return Err("no complete header in time".to_owned()),
        }
    }
}

/// What a header says about the client.
#[derive(Debug, PartialEq)]
struct Named {
    /// `None`: the balancer speaks for itself.
    client: Option<IpAddr>,
    /// The client's connection to the balancer was TLS.
    tls: bool,
}

/// The SSL TLV's first byte: the client connected over TLS (PP2_CLIENT_SSL).
const CLIENT_SSL: u8 = 0x01;

/// A complete header at the start of `bytes`: its length and what it names. `Ok(None)`: not
/// complete yet.
fn parse(bytes: &[u8]) -> Result<Option<(usize, Named)>, String> {
    let result = HeaderResult::parse(bytes);
    if result.is_incomplete() {
        return Ok(None);
    }
    match result {
        HeaderResult::V1(Ok(header)) => {
            let client = match header.addresses {
                v1::Addresses::Tcp4(addresses) => Some(IpAddr::V4(addresses.source_address)),
                v1::Addresses::Tcp6(addresses) => Some(IpAddr::V6(addresses.source_address)),
                v1::Addresses::Unknown => None,
            };
            Ok(Some((header.header.len(), Named { client, tls: false })))
        }
        HeaderResult::V2(Ok(header)) => {
            let client = match (header.command, header.addresses) {
                (v2::Command::Proxy, v2::Addresses::IPv4(addresses)) => Some(IpAddr::V4(addresses.source_address)),
                (v2::Command::Proxy, v2::Addresses::IPv6(addresses)) => Some(IpAddr::V6(addresses.source_address)),
                _ => None,
            };
            let tls = header.tlvs().flatten().any(|tlv| {
                tlv.kind == v2::Type::SSL as u8 && tlv.value.first().is_some_and(|bits| bits & CLIENT_SSL != 0)
            });
            Ok(Some((header.len(), Named { client, tls })))
        }
        HeaderResult::V1(Err(err)) => Err(format!("not a PROXY protocol header ({err})")),
        HeaderResult::V2(Err(err)) => Err(format!("bad PROXY protocol v2 header ({err})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(client: &str) -> Named {
        Named { client: Some(client.parse().unwrap()), tls: false }
    }

    fn v2_header(source: &str, command: u8) -> Vec<u8> {
        let source: std::net::SocketAddr = source.parse().unwrap();
        let destination: std::net::SocketAddr =
            if source.is_ipv4() { "127.0.0.1:8000" } else { "[::1]:8000" }.parse().unwrap();
        v2::Builder::with_addresses(v2::Version::Two as u8 | command, v2::Protocol::Stream, (source, destination))
            .write_tlv(v2::Type::NoOp, b"padding")
            .unwrap()
            .build()
            .unwrap()
    }

    #[test]
    fn text_headers() {
        let header = b"PROXY TCP4 203.0.113.9 127.0.0.1 56324 443\r\n";
        let mut bytes = header.to_vec();
        bytes.extend_from_slice(b"GET / HTTP/1.1\r\n");
        assert_eq!(parse(&bytes), Ok(Some((header.len(), named("203.0.113.9")))));
        let six = b"PROXY TCP6 2001:db8::7 ::1 4000 80\r\n";
        assert_eq!(parse(six), Ok(Some((six.len(), named("2001:db8::7")))));
        assert_eq!(parse(b"PROXY UNKNOWN\r\n"), Ok(Some((15, Named { client: None, tls: false }))));
        assert_eq!(parse(b"PROXY TCP4 203.0.113.9 127.0"), Ok(None), "partial");
        assert_eq!(parse(b"PRO"), Ok(None), "partial");
    }

    #[test]
    fn binary_headers() {
        let header = v2_header("198.51.100.4:61000", v2::Command::Proxy as u8);
        let mut bytes = header.clone();
        bytes.extend_from_slice(b"GET / HTTP/1.1\r\n");
        assert_eq!(parse(&bytes), Ok(Some((header.len(), named("198.51.100.4")))));
        assert_eq!(parse(&header[..20]), Ok(None), "partial");
        let six = v2_header("[2001:db8::9]:61000", v2::Command::Proxy as u8);
        assert_eq!(parse(&six), Ok(Some((six.len(), named("2001:db8::9")))));
        let local = v2_header("198.51.100.4:61000", v2::Command::Local as u8);
        assert_eq!(parse(&local).unwrap().unwrap().1.client, None, "the balancer's own health check");
        let source = "198.51.100.4:61000".parse::<std::net::SocketAddr>().unwrap();
        let tls = v2::Builder::with_addresses(0x21, v2::Protocol::Stream, (source, "127.0.0.1:443".parse().unwrap()))
            .write_tlv(v2::Type::SSL, &[CLIENT_SSL, 0, 0, 0, 0])
            .unwrap()
            .build()
            .unwrap();
        assert_eq!(parse(&tls).unwrap().unwrap().1, Named { tls: true, ..named("198.51.100.4") });
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            &b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"[..],
            b"PROXY TCP4 203.0.113.9 127.0.0.1 56324\r\n",
            b"PROXY TCP4 not.an.address 127.0.0.1 1 2\r\n",
            b"PROXY TCP5 203.0.113.9 127.0.0.1 1 2\r\n",
            b"PROXY TCP4 203.0.113.9 127.0.0.1 1 2\n",
            b"\r\n\r\n\0\r\nQUIT\n\x99\x11\0\0",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        assert!(parse(&[b'P'; 200]).is_err(), "too long for v1");
    }
}
