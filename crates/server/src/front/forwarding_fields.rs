//! Who the client is and how it reached us, when a router stands in front: which peers may say
//! so (`--forwarded-allow-ips`), and the forwarding headers a worker gets from each.
//!
//! A router that terminates TLS (Heroku's, an ALB, nginx) tells the app the client's scheme
//! and address in `X-Forwarded-Proto`, `X-Forwarded-For` and friends, or RFC 7239 `Forwarded`.
//! Anyone can send those headers, so they are believed only from a trusted peer: from it they
//! pass unchanged (the peer's address appended to `X-Forwarded-For`, as every proxy does); from
//! any other peer they are dropped and the front says what it saw itself. The worker then
//! reads them without knowing about trust: `X-Forwarded-Proto` is the client's scheme, and the
//! client's address ([`client_of`], the last one no trusted proxy vouches for) comes with the
//! request for the bundled worker's `REMOTE_ADDR`.
//!
//! The peer is the TCP peer, or the client named by a PROXY protocol header (then the real
//! client, as HAProxy or an NLB saw it). A unix socket's peer is a process on this machine (a
//! local router), so it is trusted and appends nothing: the last `X-Forwarded-For` entry is
//! the client as the router saw it.
//!
//! `X-Forwarded-Client-Cert` (the client's certificate, as Envoy and service meshes send it) is
//! one of those headers, with one more rule: on a connection whose TLS the front terminated
//! itself, only the front can know the certificate, so the field is always its own (or absent).
//!
//! Which fields count is every `X-Forwarded-*` ([`FORWARDING_PREFIX`]) and the others the
//! frameworks behind us read ([`FORWARDING_FIELDS`]; the survey is in
//! docs/design/forwarding-fields.md), in any spelling: CGI-style servers (Rack under Puma,
//! Django's ASGI handler) name a field `HTTP_` and its name with `-` turned into `_`, so
//! `X_Forwarded_Host` lands where `X-Forwarded-Host` would. No router writes a forwarding field
//! with `_`, so such a spelling is a client's, and is dropped whoever the peer is.

use std::fmt;
use std::net::IpAddr;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use ipnet::IpNet;

use crate::queue::job::Client;

pub(super) const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
pub(super) const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const FORWARDED: HeaderName = HeaderName::from_static("forwarded");
const X_FORWARDED_CLIENT_CERT: HeaderName = HeaderName::from_static("x-forwarded-client-cert");

/// Every field whose name starts with this says who the client is or how it came (`-For`,
/// `-Proto`, `-Host`, `-Port`, `-Ssl`, `-Prefix`, `-Uri`, `-Client-Cert`, and whatever a router or
/// framework names next): all of them are forwarding fields.
const FORWARDING_PREFIX: &str = "x-forwarded-";

/// The forwarding fields not under [`FORWARDING_PREFIX`]: what servers, frameworks and the
/// client-address libraries behind us believe about the client's address, scheme, URL or
/// certificate. Who reads which is in docs/design/forwarding-fields.md; the README names them.
const FORWARDING_FIELDS: [&str; 24] = [
    // RFC 7239, and the bare names client-address libraries read besides it.
    "forwarded",
    "forwarded-for",
    "x-forwarded",
    // The client's address.
    "x-real-ip",
    "client-ip",
    "x-client-ip",
    "x-cluster-client-ip",
    "true-client-ip",
    "cf-connecting-ip",
    "cf-connecting-ipv6",
    "fastly-client-ip",
    "fly-client-ip",
    "x-appengine-user-ip",
    "x-original-forwarded-for",
    "x-envoy-external-address",
    // The client's scheme.
    "x-scheme",
    "x-url-scheme",
    "front-end-https",
    "cloudfront-forwarded-proto",
    // The URL the client asked for, before a rewrite.
    "x-original-url",
    "x-rewrite-url",
    // The client's certificate.
    "client-cert",
    "client-cert-chain",
    "x-ssl-client-cert",
];

/// How a field's name stands to the forwarding fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spelling {
    /// A forwarding field as routers write it.
    Router,
    /// A forwarding field with `_` for some `-`: the same field to a CGI-style server.
    Underscored,
}

/// Whether `name` is a forwarding field, and in which spelling. Names arrive lower-cased.
fn forwarding_spelling(name: &str) -> Option<Spelling> {
    let name = name.as_bytes();
    // Most fields of a request start with none of the forwarding fields' first letters.
    let first = *name.first()?;
    if first != FORWARDING_PREFIX.as_bytes()[0] && !FORWARDING_FIELDS.iter().any(|field| field.as_bytes()[0] == first) {
        return None;
    }
    // `_` in `name` stands for `-` in `field`.
    let same = |field: &[u8], name: &[u8]| {
        field.len() == name.len() && field.iter().zip(name).all(|(f, n)| f == n || (*f == b'-' && *n == b'_'))
    };
    let prefix = FORWARDING_PREFIX.as_bytes();
    let prefixed = name.len() > prefix.len() && same(prefix, &name[..prefix.len()]);
    let forwarding = prefixed || FORWARDING_FIELDS.iter().any(|field| same(field.as_bytes(), name));
    // No forwarding field has `_` in the name routers write.
    forwarding.then(|| if name.contains(&b'_') { Spelling::Underscored } else { Spelling::Router })
}

/// Removes the forwarding fields `peer` may not send: every underscored spelling, and, from an
/// untrusted peer, the router spellings too. Returns whether any forwarding field is left.
fn remove_forwarding_fields(headers: &mut HeaderMap, peer: &Peer) -> bool {
    let refused = |spelling: Spelling| spelling == Spelling::Underscored || !peer.trusted;
    let (mut any_refused, mut any_kept) = (false, false);
    for spelling in headers.keys().filter_map(|name| forwarding_spelling(name.as_str())) {
        if refused(spelling) {
            any_refused = true;
        } else {
            any_kept = true;
        }
    }
    // Collected first: rare, and a map cannot lose fields while its names are being read.
    if any_refused {
        let names: Vec<HeaderName> =
            headers.keys().filter(|name| forwarding_spelling(name.as_str()).is_some_and(refused)).cloned().collect();
        for name in names {
            headers.remove(name);
        }
    }
    any_kept
}

/// `--forwarded-allow-ips`: the peers whose forwarding headers are believed.
#[derive(Clone, PartialEq, Eq)]
pub struct TrustedProxies {
    any: bool,
    networks: Vec<IpNet>,
}

impl TrustedProxies {
    /// Parses a comma-separated list of addresses and CIDR ranges; `*` trusts every peer.
    pub fn parse(list: &str) -> Result<TrustedProxies, String> {
        let mut trusted = TrustedProxies { any: false, networks: Vec::new() };
        for item in list.split(',').map(str::trim).filter(|item| !item.is_empty()) {
            if item == "*" {
                trusted.any = true;
            } else if let Ok(network) = item.parse::<IpNet>() {
                trusted.networks.push(network);
            } else if let Ok(ip) = item.parse::<IpAddr>() {
                trusted.networks.push(IpNet::from(ip));
            } else {
                return Err(format!("'{item}' is not an IP address, a CIDR range such as 10.0.0.0/8, or *"));
            }
        }
        Ok(trusted)
    }

    pub fn trusts(&self, ip: IpAddr) -> bool {
        // An IPv4 client on a dual-stack socket shows as ::ffff:a.b.c.d.
        let ip = ip.to_canonical();
        self.any || self.networks.iter().any(|network| network.contains(&ip))
    }
}

impl fmt::Debug for TrustedProxies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut items: Vec<String> = self.networks.iter().map(ToString::to_string).collect();
        if self.any {
            items.insert(0, "*".to_owned());
        }
        write!(f, "{}", items.join(","))
    }
}

/// The other end of a client connection, as far as the front can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// `None` on a unix socket.
    pub ip: Option<IpAddr>,
    /// Whether its forwarding headers are believed.
    pub trusted: bool,
    /// The client spoke TLS: to the front, or to the balancer, as a PROXY protocol header said.
    pub tls: bool,
    pub client_cert: ClientCert,
    /// `ip` as `X-Forwarded-For` writes it, made once per connection rather than per request.
    text: Option<HeaderValue>,
    /// The client of a request that names none before this peer: the peer itself, as
    /// [`client_of`] reads it from `text`, made once per connection.
    client: Option<Client>,
}

/// Who may say what the client's certificate is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ClientCert {
    /// A router, trusted as for the other forwarding headers: the front did no handshake.
    #[default]
    RoutersWord,
    /// The front, which did the TLS handshake: the `X-Forwarded-Client-Cert` it makes of the
    /// certificate the client showed (checked against `--ca-certs`), or none.
    Handshake(Option<HeaderValue>),
}

impl Peer {
    pub fn new(ip: Option<IpAddr>, trusted: bool, tls: bool) -> Peer {
        let canonical = ip.map(|ip| ip.to_canonical().to_string());
        let text = canonical.as_deref().and_then(|ip| HeaderValue::try_from(ip).ok());
        let client = canonical.map(|ip| Client(Bytes::from(ip)));
        Peer { ip, trusted, tls, client_cert: ClientCert::RoutersWord, text, client }
    }

    pub fn tcp(ip: IpAddr, trusted: &TrustedProxies) -> Peer {
        Peer::new(Some(ip), trusted.trusts(ip), false)
    }

    /// A process on this machine, connected over a unix socket.
    pub fn local() -> Peer {
        Peer::new(None, true, false)
    }
}

/// Makes the forwarding headers of a request say what is true for `peer` (see the module
/// comment), and returns who the client is, as [`client_of`] reads those headers.
pub fn forward_for(headers: &mut HeaderMap, peer: &Peer, trusted: &TrustedProxies) -> Option<Client> {
    if set_forwarding_headers(headers, peer) {
        client_of(headers, trusted)
    } else {
        // `X-Forwarded-For` is the peer alone, or absent: the client is the peer, and reading it
        // back (a parse, a look at the trusted networks, a copy) would say nothing more.
        peer.client.clone()
    }
}

/// Makes the forwarding headers of a request say what is true for `peer`; see the module
/// comment. Returns whether `X-Forwarded-For` names anyone before `peer`.
fn set_forwarding_headers(headers: &mut HeaderMap, peer: &Peer) -> bool {
    let any_left = remove_forwarding_fields(headers, peer);
    if let ClientCert::Handshake(ours) = &peer.client_cert {
        headers.remove(X_FORWARDED_CLIENT_CERT);
        if let Some(field) = ours {
            headers.insert(X_FORWARDED_CLIENT_CERT, field.clone());
        }
    }
    let ours = HeaderValue::from_static(if peer.tls { "https" } else { "http" });
    if !any_left {
        // No router spoke (most requests): the fields are the front's alone, and looking up
        // `X-Forwarded-For`, `X-Forwarded-Proto` and `Forwarded` would find none of them.
        if let Some(ip) = &peer.text {
            headers.insert(X_FORWARDED_FOR, ip.clone());
        }
        headers.insert(X_FORWARDED_PROTO, ours);
        return false;
    }
    let relayed = headers.contains_key(&X_FORWARDED_FOR);
    if let Some(ip) = &peer.text {
        let value = if relayed {
            let mut chain: Vec<&[u8]> = headers.get_all(&X_FORWARDED_FOR).iter().map(HeaderValue::as_bytes).collect();
            chain.push(ip.as_bytes());
            HeaderValue::from_bytes(&chain.join(&b", "[..]))
        } else {
            Ok(ip.clone())
        };
        if let Ok(value) = value {
            headers.insert(X_FORWARDED_FOR, value);
        }
    }
    if !headers.contains_key(&X_FORWARDED_PROTO) {
        // A proxy that speaks only RFC 7239 says the scheme in `Forwarded`; the worker reads
        // `X-Forwarded-Proto`.
        let proto = forwarded_proto(headers).unwrap_or(ours);
        headers.insert(X_FORWARDED_PROTO, proto);
    }
    relayed
}

/// Who the client is, from forwarding headers already made true by [`set_forwarding_headers`]:
/// walking `X-Forwarded-For` back from our own peer, the first entry that is not a trusted
/// proxy. Each proxy appends the address it received from, so an untrusted entry is where the
/// trustworthy part of the chain ends; whatever stands left of it is that client's own claim.
/// A chain of trusted proxies only: its first entry. `None` when nothing names a client (a
/// local router that sent no `X-Forwarded-For`).
fn client_of(headers: &HeaderMap, trusted: &TrustedProxies) -> Option<Client> {
    let chain = headers.get_all(&X_FORWARDED_FOR).iter().rev().filter_map(|value| value.to_str().ok());
    let mut from_us = chain.flat_map(|value| value.rsplit(',')).map(str::trim).filter(|entry| !entry.is_empty());
    // Walked lazily from our end (a request's chain is mostly our own peer alone), keeping the
    // last entry seen: the first of the chain, if every entry is a trusted proxy.
    let mut first = None;
    let (entry, ip) = from_us
        .find_map(|entry| {
            let ip = ip_of(entry);
            first = Some((entry, ip));
            (!ip.is_some_and(|ip| trusted.trusts(ip))).then_some((entry, ip))
        })
        .or(first)?;
    let canonical = match ip {
        // A dotted quad that parsed is written as the standard library would write it.
        Some(IpAddr::V4(_)) if !entry.contains(':') => None,
        ip => ip.map(|ip| ip.to_canonical().to_string()),
    };
    Some(Client(Bytes::from(canonical.unwrap_or_else(|| (*entry).to_owned()))))
}

/// The address of an `X-Forwarded-For` entry: `192.0.2.1`, `2001:db8::1`, or either with a port
/// (`192.0.2.1:4711`, `[2001:db8::1]:4711`), as some proxies write it.
fn ip_of(entry: &str) -> Option<IpAddr> {
    entry.parse().ok().or_else(|| entry.parse::<std::net::SocketAddr>().ok().map(|addr| addr.ip()))
}

/// The `proto` of the last element of `Forwarded` (the proxy nearest to us), if any.
fn forwarded_proto(headers: &HeaderMap) -> Option<HeaderValue> {
    let last_value = headers.get_all(&FORWARDED).iter().next_back()?.to_str().ok()?;
    let last_element = last_value.rsplit(',').next()?;
    last_element.split(';').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("proto") {
            return None;
        }
        let value = value.trim().trim_matches('"');
        let is_scheme = !value.is_empty() && value.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b));
        is_scheme.then(|| HeaderValue::from_str(&value.to_ascii_lowercase()).ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs.iter().map(|(name, value)| (HeaderName::from_static(name), HeaderValue::from_static(value))).collect()
    }

    const ROUTER: [(&str, &str); 5] = [
        ("x-forwarded-for", "203.0.113.9"),
        ("x-forwarded-proto", "https"),
        ("x-forwarded-host", "app.example"),
        ("x-forwarded-port", "443"),
        ("forwarded", "for=203.0.113.9;proto=https"),
    ];

    #[test]
    fn parses_addresses_ranges_and_any() {
        let trusted = TrustedProxies::parse("127.0.0.1, ::1,10.0.0.0/8").unwrap();
        assert!(trusted.trusts("10.1.2.3".parse().unwrap()));
        assert!(trusted.trusts("::ffff:127.0.0.1".parse().unwrap()), "IPv4-mapped");
        assert!(trusted.trusts("::1".parse().unwrap()));
        assert!(!trusted.trusts("192.0.2.1".parse().unwrap()));
        assert!(TrustedProxies::parse("*").unwrap().trusts("192.0.2.1".parse().unwrap()));
        assert!(!TrustedProxies::parse("").unwrap().trusts("127.0.0.1".parse().unwrap()));
        assert!(TrustedProxies::parse("10.0.0.0/33").is_err());
        assert!(TrustedProxies::parse("router.local").is_err());
        assert_eq!(format!("{trusted:?}"), "127.0.0.1/32,::1/128,10.0.0.0/8");
    }

    #[test]
    fn a_trusted_peer_keeps_its_headers_and_is_appended() {
        let mut forwarded = headers(&ROUTER);
        set_forwarding_headers(&mut forwarded, &Peer::new(Some("10.0.0.2".parse().unwrap()), true, false));
        assert_eq!(forwarded[&X_FORWARDED_FOR], "203.0.113.9, 10.0.0.2");
        for (name, value) in &ROUTER[1..] {
            assert_eq!(forwarded[*name], value);
        }
    }

    #[test]
    fn an_untrusted_peer_cannot_claim_anything() {
        let mut forwarded = headers(&ROUTER);
        set_forwarding_headers(&mut forwarded, &Peer::new(Some("192.0.2.66".parse().unwrap()), false, false));
        assert_eq!(forwarded[&X_FORWARDED_FOR], "192.0.2.66");
        assert_eq!(forwarded[&X_FORWARDED_PROTO], "http");
        for gone in ["x-forwarded-host", "x-forwarded-port", "forwarded"] {
            assert!(!forwarded.contains_key(gone), "{gone}");
        }
    }

    /// What Rack, Werkzeug, Django and gunicorn would believe, in the spellings a CGI-style
    /// environ makes one: none of it from a stranger, only the router's spelling from a router.
    const CLAIMS: [(&str, &str); 10] = [
        ("x-forwarded-ssl", "on"),
        ("x-forwarded-scheme", "https"),
        ("x-forwarded-prefix", "/admin"),
        ("x-real-ip", "10.0.0.1"),
        ("x_forwarded_host", "evil.example"),
        ("x_forwarded_proto", "https"),
        ("x-forwarded_port", "443"),
        ("x_real_ip", "10.0.0.1"),
        ("front_end_https", "on"),
        ("client_ip", "10.0.0.1"),
    ];

    #[test]
    fn no_spelling_of_a_forwarding_field_gets_past_an_untrusted_peer() {
        let mut claimed = headers(&CLAIMS);
        claimed.insert("x-app_token", HeaderValue::from_static("kept"));
        set_forwarding_headers(&mut claimed, &Peer::new(Some("192.0.2.66".parse().unwrap()), false, false));
        let left: Vec<&str> = claimed.keys().map(HeaderName::as_str).collect();
        assert_eq!(left, ["x-app_token", "x-forwarded-for", "x-forwarded-proto"]);
        assert_eq!(claimed[&X_FORWARDED_PROTO], "http");
    }

    #[test]
    fn a_router_keeps_its_spelling_and_loses_the_underscored_ones() {
        let mut claimed = headers(&CLAIMS);
        set_forwarding_headers(&mut claimed, &Peer::local());
        let mut left: Vec<&str> = claimed.keys().map(HeaderName::as_str).collect();
        left.sort_unstable();
        assert_eq!(
            left,
            ["x-forwarded-prefix", "x-forwarded-proto", "x-forwarded-scheme", "x-forwarded-ssl", "x-real-ip"]
        );
        assert_eq!(claimed[&X_FORWARDED_PROTO], "http", "the underscored proto was not the router's word");
    }

    #[test]
    fn spellings() {
        assert_eq!(forwarding_spelling("x-forwarded-host"), Some(Spelling::Router));
        assert_eq!(forwarding_spelling("x_forwarded_host"), Some(Spelling::Underscored));
        assert_eq!(forwarding_spelling("forwarded"), Some(Spelling::Router));
        assert_eq!(forwarding_spelling("x-forwarded-anything-new"), Some(Spelling::Router), "by the prefix");
        assert_eq!(forwarding_spelling("x_forwarded-tls_client-cert"), Some(Spelling::Underscored));
        for other in ["x-forwarded-", "xforwarded-host", "x-request-start", "host", "forwarde_", "x-real-ips", "cf-ray"]
        {
            assert_eq!(forwarding_spelling(other), None, "{other}");
        }
    }

    /// Every forwarding field: the listed ones and some under the prefix that frameworks and
    /// routers use (`-Https`, `-Uri`, `-Path`, `-By`, `-Tls-Client-Cert`).
    fn every_forwarding_field() -> Vec<String> {
        let prefixed = ["https", "uri", "path", "by", "tls-client-cert", "host", "client-cert"];
        let prefixed = prefixed.iter().map(|rest| format!("{FORWARDING_PREFIX}{rest}"));
        FORWARDING_FIELDS.iter().map(|field| (*field).to_owned()).chain(prefixed).collect()
    }

    fn claiming(names: &[String]) -> HeaderMap {
        let claim = HeaderValue::from_static("claimed");
        names.iter().map(|name| (HeaderName::from_bytes(name.as_bytes()).unwrap(), claim.clone())).collect()
    }

    #[test]
    fn an_untrusted_peer_gets_no_forwarding_field_through_in_any_spelling() {
        let names = every_forwarding_field();
        let underscored: Vec<String> = names.iter().map(|name| name.replace('-', "_")).collect();
        for names in [&names, &underscored] {
            let mut claimed = claiming(names);
            claimed.insert("x-app-token", HeaderValue::from_static("kept"));
            set_forwarding_headers(&mut claimed, &Peer::new(Some("192.0.2.66".parse().unwrap()), false, false));
            let mut left: Vec<&str> = claimed.keys().map(HeaderName::as_str).collect();
            left.sort_unstable();
            assert_eq!(left, ["x-app-token", "x-forwarded-for", "x-forwarded-proto"]);
            assert_eq!(claimed[&X_FORWARDED_FOR], "192.0.2.66");
            assert_eq!(claimed[&X_FORWARDED_PROTO], "http");
        }
    }

    #[test]
    fn a_trusted_peer_keeps_every_forwarding_field_in_its_own_spelling() {
        let names = every_forwarding_field();
        let mut claimed = claiming(&names);
        set_forwarding_headers(&mut claimed, &Peer::local());
        for name in &names {
            assert_eq!(claimed[name.as_str()], "claimed", "{name}");
        }
    }

    #[test]
    fn a_balancer_that_terminated_tls_says_https_through_the_proxy_protocol() {
        let mut forwarded = headers(&[("x-forwarded-proto", "http")]);
        let client = Peer::new(Some("203.0.113.9".parse().unwrap()), false, true);
        set_forwarding_headers(&mut forwarded, &client);
        assert_eq!(forwarded[&X_FORWARDED_PROTO], "https");
    }

    #[test]
    fn the_client_certificate_is_the_fronts_word_when_it_did_the_handshake() {
        let claimed = [("x-forwarded-client-cert", "Hash=forged")];
        let router = Peer::new(Some("10.0.0.2".parse().unwrap()), true, false);
        let mut from_router = headers(&claimed);
        set_forwarding_headers(&mut from_router, &router);
        assert_eq!(from_router[&X_FORWARDED_CLIENT_CERT], "Hash=forged", "a trusted router's word");
        let mut from_stranger = headers(&claimed);
        set_forwarding_headers(&mut from_stranger, &Peer::new(Some("192.0.2.66".parse().unwrap()), false, false));
        assert!(!from_stranger.contains_key(&X_FORWARDED_CLIENT_CERT));
        // Over TLS the front terminated, even from a trusted address: the handshake's, or none.
        for (shown, expected) in [(Some("Hash=ab"), Some("Hash=ab")), (None, None)] {
            let peer =
                Peer { client_cert: ClientCert::Handshake(shown.map(HeaderValue::from_static)), ..router.clone() };
            let mut forwarded = headers(&claimed);
            set_forwarding_headers(&mut forwarded, &peer);
            assert_eq!(forwarded.get(&X_FORWARDED_CLIENT_CERT).map(|v| v.to_str().unwrap()), expected);
        }
    }

    #[test]
    fn a_local_router_names_the_client_last() {
        let mut forwarded = headers(&ROUTER[..2]);
        set_forwarding_headers(&mut forwarded, &Peer::local());
        assert_eq!(forwarded[&X_FORWARDED_FOR], "203.0.113.9");
        assert_eq!(forwarded[&X_FORWARDED_PROTO], "https");
    }

    #[test]
    fn the_client_is_the_last_address_no_trusted_proxy_vouches_for() {
        let trusted = TrustedProxies::parse("127.0.0.1,10.0.0.0/8").unwrap();
        let client = |chain: &'static str| client_of(&headers(&[("x-forwarded-for", chain)]), &trusted);
        assert_eq!(client("203.0.113.9, 10.0.0.2, 127.0.0.1"), Some(Client(Bytes::from_static(b"203.0.113.9"))));
        // Whatever the client itself claimed is left of it, and not believed.
        assert_eq!(client("1.1.1.1, 203.0.113.9, 127.0.0.1"), Some(Client(Bytes::from_static(b"203.0.113.9"))));
        assert_eq!(client("[2001:db8::1]:4711, 10.0.0.2:80"), Some(Client(Bytes::from_static(b"2001:db8::1"))));
        assert_eq!(client("unknown, 127.0.0.1"), Some(Client(Bytes::from_static(b"unknown"))));
        assert_eq!(
            client("10.0.0.3, 127.0.0.1"),
            Some(Client(Bytes::from_static(b"10.0.0.3"))),
            "proxies only: the first"
        );
        assert_eq!(client_of(&HeaderMap::new(), &trusted), None);
    }

    #[test]
    fn a_request_that_names_no_one_has_the_peer_for_its_client_as_its_headers_say() {
        let trusted = TrustedProxies::parse("127.0.0.1,::1").unwrap();
        for ip in ["127.0.0.1", "192.0.2.66", "::1", "2001:db8::1", "::ffff:192.0.2.7"] {
            let peer = Peer::tcp(ip.parse().unwrap(), &trusted);
            for sent in [&[][..], &[("x-forwarded-for", "203.0.113.9")][..]] {
                let mut forwarded = headers(sent);
                let client = forward_for(&mut forwarded, &peer, &trusted);
                assert_eq!(client, client_of(&forwarded, &trusted), "{ip} sending {sent:?}");
            }
        }
        let mut local = HeaderMap::new();
        assert_eq!(forward_for(&mut local, &Peer::local(), &trusted), None);
    }

    #[test]
    fn a_request_no_router_spoke_for_carries_the_fronts_own_fields_alone() {
        for (peer, scheme, client) in [
            (Peer::new(Some("192.0.2.66".parse().unwrap()), false, false), "http", Some("192.0.2.66")),
            (Peer::new(Some("10.0.0.2".parse().unwrap()), true, true), "https", Some("10.0.0.2")),
            (Peer::local(), "http", None),
        ] {
            let mut plain = headers(&[("host", "app.example"), ("x-app", "1")]);
            assert!(!set_forwarding_headers(&mut plain, &peer), "{peer:?}: nobody before the peer");
            assert_eq!(plain[&X_FORWARDED_PROTO], scheme, "{peer:?}");
            assert_eq!(plain.get(&X_FORWARDED_FOR).map(|ip| ip.to_str().unwrap()), client, "{peer:?}");
            assert_eq!(plain.len(), 3 + usize::from(client.is_some()), "{peer:?}: {plain:?}");
        }
    }

    #[test]
    fn the_scheme_of_rfc_7239_alone() {
        let mut forwarded =
            headers(&[("forwarded", "for=192.0.2.1;proto=http, for=\"[2001:db8::1]\";Proto=\"HTTPS\"")]);
        set_forwarding_headers(&mut forwarded, &Peer::local());
        assert_eq!(forwarded[&X_FORWARDED_PROTO], "https");
        let mut odd = headers(&[("forwarded", "for=192.0.2.1;proto=\"ht tp\"")]);
        set_forwarding_headers(&mut odd, &Peer::local());
        assert_eq!(odd[&X_FORWARDED_PROTO], "http");
    }
}
