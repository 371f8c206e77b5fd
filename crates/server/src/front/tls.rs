//! TLS on the front (`--certfile`, `--keyfile`), for serving clients directly over HTTPS as
//! gunicorn, uvicorn, granian and Puma can. Behind a balancer that terminates TLS it is not
//! needed; the balancer's `X-Forwarded-Proto` (or a PROXY v2 header's SSL TLV) says https then.
//!
//! rustls does the protocol (TLS 1.2 and 1.3, ALPN `http/1.1` only: the front speaks HTTP/1.1),
//! and the connection is served exactly as a plain one above it; its worker sees
//! `X-Forwarded-Proto: https`. The certificate chain and key are PEM files, read at start (a
//! bad one stops the start with a message) and again on SIGHUP, so a renewed certificate is
//! taken without a restart: new connections get it, open ones keep theirs, and a renewal that
//! does not load is logged and the certificate in use kept.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use anyhow::{bail, Context as _};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tracing::{info, warn};

/// `--certfile` and `--keyfile`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, the server's own first (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 RSA or SEC1 EC), not encrypted.
    pub key: PathBuf,
}

/// The TLS side of every listener.
pub struct Tls {
    files: TlsFiles,
    acceptor: RwLock<TlsAcceptor>,
}

impl Tls {
    pub fn load(files: TlsFiles) -> anyhow::Result<Tls> {
        let acceptor = TlsAcceptor::from(Arc::new(server_config(&files)?));
        Ok(Tls { files, acceptor: RwLock::new(acceptor) })
    }

    /// Reads the certificate and key again (SIGHUP). On failure the ones in use stay.
    pub async fn reload(self: Arc<Self>) {
        let tls = self.clone();
        let loaded = tokio::task::spawn_blocking(move || server_config(&tls.files)).await;
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

/// Whether a connection's first byte can open a TLS handshake: a TLS record of type handshake
/// (22). Anything else is most likely a plain HTTP request sent to the HTTPS port, which is
/// better answered in plain HTTP than with a failed handshake.
pub fn opens_handshake(first: u8) -> bool {
    first == 22
}

fn server_config(files: &TlsFiles) -> anyhow::Result<ServerConfig> {
    let cert = files.cert.display();
    let chain = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("cannot read --certfile {cert}"))?;
    if chain.is_empty() {
        bail!("--certfile {cert} holds no certificate (PEM, -----BEGIN CERTIFICATE-----)");
    }
    let key = PrivateKeyDer::from_pem_file(&files.key)
        .with_context(|| format!("cannot read a private key from --keyfile {}", files.key.display()))?;
    let mut config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()
        .context("TLS")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .with_context(|| format!("--keyfile {} does not fit --certfile {cert}", files.key.display()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}
