//! TLS on the front (`--certfile`, `--keyfile`), for serving clients directly over HTTPS as
//! gunicorn, uvicorn, granian and Puma can. Behind a balancer that terminates TLS it is not
//! needed; the balancer's `X-Forwarded-Proto` (or a PROXY v2 header's SSL TLV) says https then.
//!
//! rustls does the protocol (TLS 1.2 and 1.3; ALPN offers `h2`, then `http/1.1`, or only
//! `http/1.1` with `--no-http2`), and the connection is served exactly as a plain one above it;
//! its worker sees `X-Forwarded-Proto: https`. The certificate chain and key are PEM files, read at start (a
//! bad one stops the start with a message) and again on SIGHUP, so a renewed certificate is
//! taken without a restart: new connections get it, open ones keep theirs, and a renewal that
//! does not load is logged and the certificate in use kept.
//!
//! With `--ca-certs`, clients show a certificate signed by one of those CAs (mutual TLS, as
//! between a mesh's sidecars or a balancer and its origin), and the app learns which in
//! `X-Forwarded-Client-Cert`, in the format Envoy made common, since WSGI and ASGI servers have
//! no shared way to say it and a header reaches `--cmd` workers too.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use anyhow::Context as _;
use base64::Engine as _;
use headway_common::pem;
use http::HeaderValue;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::rustls::crypto::{ring, CryptoProvider};
use tokio_rustls::rustls::server::danger::ClientCertVerifier;
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tracing::{info, warn};

/// `--certfile`, `--keyfile` and `--ca-certs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, the server's own first (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 RSA or SEC1 EC; or encrypted PKCS#8).
    pub key: PathBuf,
    /// `--keyfile-password`, for an encrypted key.
    pub key_password: Option<Password>,
    pub client_cas: Option<ClientCas>,
}

/// A password, shown as `(hidden)` wherever the settings are debug-printed, from the command
/// line's on.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(pub String);

impl Password {
    /// `--keyfile-password`: any text.
    pub fn parse(text: &str) -> Result<Password, String> {
        Ok(Password(text.to_owned()))
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("(hidden)")
    }
}

/// `--ca-certs` and `--cert-reqs`: the CAs that sign client certificates, and whether a client
/// must show one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCas {
    pub path: PathBuf,
    pub when: ClientAuth,
}

/// `--cert-reqs`. There is no `none`: leaving out `--ca-certs` is that. Unlike gunicorn, where
/// `--ca-certs` alone asks for nothing, giving it means `required` unless said otherwise, so a
/// CA file cannot sit there letting every client in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    Optional,
    Required,
}

impl ClientAuth {
    /// `required` or `optional`, or gunicorn's and uvicorn's numbers for them (Python's
    /// `ssl.CERT_REQUIRED`, 2, and `ssl.CERT_OPTIONAL`, 1).
    pub fn parse(text: &str) -> Result<ClientAuth, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "required" | "2" => Ok(ClientAuth::Required),
            "optional" | "1" => Ok(ClientAuth::Optional),
            "none" | "0" => Err("leave out --cert-reqs and --ca-certs to ask clients for no certificate".to_owned()),
            _ => Err(format!("'{text}' is not required (2) or optional (1)")),
        }
    }
}

/// The TLS side of every listener.
pub struct Tls {
    files: TlsFiles,
    /// Whether ALPN offers `h2`.
    http2: bool,
    acceptor: RwLock<TlsAcceptor>,
}

impl Tls {
    /// `http2`: offer HTTP/2 by ALPN, before HTTP/1.1.
    pub fn load(files: TlsFiles, http2: bool) -> anyhow::Result<Tls> {
        let acceptor = TlsAcceptor::from(Arc::new(server_config(&files, http2)?));
        Ok(Tls { files, http2, acceptor: RwLock::new(acceptor) })
    }

    /// Reads the certificate and key again (SIGHUP). On failure the ones in use stay.
    pub async fn reload(self: Arc<Self>) {
        let tls = self.clone();
        let loaded = tokio::task::spawn_blocking(move || server_config(&tls.files, tls.http2)).await;
        match loaded {
            Ok(Ok(config)) => {
                *self.acceptor.write().unwrap_or_else(|poisoned| poisoned.into_inner()) =
                    TlsAcceptor::from(Arc::new(config));
                info!("TLS: read {} again; new connections get it", self.files.cert.display());
            }
            Ok(Err(err)) => warn!("TLS: kept the certificate in use: {err:#}"),
            Err(err) => warn!("TLS: kept the certificate in use: {err}"),
        }
    }

    /// The handshake over a client's stream.
    pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(&self, stream: S) -> io::Result<TlsStream<S>> {
        let acceptor = self.acceptor.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        acceptor.accept(stream).await
    }
}

/// `X-Forwarded-Client-Cert` for the certificate a client showed in `stream`'s handshake, in
/// Envoy's format: `Hash=<SHA-256 of its DER, hex>;Cert="<its PEM, URL-encoded>"`. `None`: it
/// showed none. Only a certificate the verifier took gets here.
pub fn client_cert_field<S>(stream: &TlsStream<S>) -> Option<HeaderValue> {
    // What stays as it is in a URL-encoded value; everything else is %XX, the PEM's newlines too.
    const KEPT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');
    let der = stream.get_ref().1.peer_certificates()?.first()?.as_ref();
    let hash: String = ::ring::digest::digest(&::ring::digest::SHA256, der)
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for start in (0..body.len()).step_by(64) {
        pem.push_str(&body[start..body.len().min(start + 64)]); // base64 is ASCII: any index is a char boundary
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    HeaderValue::try_from(format!("Hash={hash};Cert=\"{}\"", utf8_percent_encode(&pem, KEPT))).ok()
}

/// Whether a connection's first byte can open a TLS handshake: a TLS record of type handshake
/// (22). Anything else is most likely a plain HTTP request sent to the HTTPS port, which is
/// better answered in plain HTTP than with a failed handshake.
pub fn opens_handshake(first: u8) -> bool {
    first == 22
}

/// Whether the client and the front agreed on HTTP/2 by ALPN.
pub fn negotiated_h2<S>(stream: &TlsStream<S>) -> bool {
    stream.get_ref().1.alpn_protocol() == Some(b"h2")
}

fn server_config(files: &TlsFiles, http2: bool) -> anyhow::Result<ServerConfig> {
    let chain = pem::certificates(&files.cert, "--certfile")?;
    let key =
        pem::private_key(&files.key, "--keyfile", files.key_password.as_ref().map(|password| password.0.as_str()))?;
    let provider = Arc::new(ring::default_provider());
    let builder =
        ServerConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().context("TLS")?;
    let builder = match &files.client_cas {
        None => builder.with_no_client_auth(),
        Some(cas) => builder.with_client_cert_verifier(client_verifier(cas, provider)?),
    };
    let mut config = builder.with_single_cert(chain, key).with_context(|| {
        format!("--keyfile {} does not fit --certfile {}", files.key.display(), files.cert.display())
    })?;
    config.alpn_protocols = if http2 { vec![b"h2".to_vec(), b"http/1.1".to_vec()] } else { vec![b"http/1.1".to_vec()] };
    Ok(config)
}

/// Checks client certificates against `--ca-certs`.
fn client_verifier(cas: &ClientCas, provider: Arc<CryptoProvider>) -> anyhow::Result<Arc<dyn ClientCertVerifier>> {
    let path = cas.path.display();
    let mut roots = RootCertStore::empty();
    for cert in pem::certificates(&cas.path, "--ca-certs")? {
        roots.add(cert).with_context(|| format!("--ca-certs {path} holds a certificate that cannot be a CA"))?;
    }
    let builder = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
    let builder = match cas.when {
        ClientAuth::Required => builder,
        ClientAuth::Optional => builder.allow_unauthenticated(),
    };
    builder.build().with_context(|| format!("--ca-certs {path}"))
}
