//! TLS for `https://` and `wss://` URLs (rustls, the ring provider, TLS 1.2 and 1.3, ALPN
//! `http/1.1`).
//!
//! The server's certificate is checked against the system's trusted roots (as curl and oha do;
//! `SSL_CERT_FILE` and `SSL_CERT_DIR` are honoured) plus `--cacert`, unless `--insecure` says
//! not to: hey and wrk never check, which suits a test server's self-signed certificate and
//! hides a wrong one. The handshake counts in a request's connect phase, as hey's "DNS+dialup".
//! A server that asks for a client certificate (mutual TLS) gets the one of `--cert`, as curl's.

use std::io;
use std::sync::Arc;

use anyhow::Context as _;
use headway_common::pem;
use tokio_rustls::rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use tokio_rustls::rustls::crypto::{ring, verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_rustls::TlsConnector;

use crate::conn::Stream;
use crate::settings::{Identity, TlsOptions};

/// The TLS side of one origin: the client configuration (shared by all origins) and the name
/// its certificate must carry.
#[derive(Clone)]
pub struct TlsOrigin {
    connector: TlsConnector,
    name: ServerName<'static>,
}

impl std::fmt::Debug for TlsOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TlsOrigin({:?})", self.name)
    }
}

impl TlsOrigin {
    pub fn new(connector: TlsConnector, host: &str) -> anyhow::Result<TlsOrigin> {
        // A URL's IPv6 host comes in brackets; a certificate names the address without them.
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name =
            ServerName::try_from(host.to_owned()).with_context(|| format!("{host:?} is not a TLS server name"))?;
        Ok(TlsOrigin { connector, name })
    }

    /// Makes the handshake over an open stream.
    pub async fn handshake(&self, stream: Stream) -> io::Result<Stream> {
        let tls = self.connector.connect(self.name.clone(), stream).await?;
        Ok(Stream::Tls(Box::new(tls)))
    }
}

/// The client configuration every TLS origin of a run uses; `http2`: ALPN asks for `h2`, else
/// `http/1.1`.
pub fn connector(options: &TlsOptions, http2: bool) -> anyhow::Result<TlsConnector> {
    let provider = Arc::new(ring::default_provider());
    let builder =
        ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().context("TLS")?;
    let builder = if options.insecure {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
    } else {
        builder.with_root_certificates(roots(options)?)
    };
    let mut config = match &options.identity {
        None => builder.with_no_client_auth(),
        Some(Identity { cert, key }) => builder
            .with_client_auth_cert(pem::certificates(cert, "--cert")?, pem::private_key(key, "--key", None)?)
            .with_context(|| format!("--key {} does not fit --cert {}", key.display(), cert.display()))?,
    };
    config.alpn_protocols = vec![if http2 { b"h2".to_vec() } else { b"http/1.1".to_vec() }];
    Ok(TlsConnector::from(Arc::new(config)))
}

fn roots(options: &TlsOptions) -> anyhow::Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    // Unreadable entries of the system's store are skipped, as every TLS client does.
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if let Some(path) = &options.ca_cert {
        for cert in pem::certificates(path, "--cacert")? {
            roots.add(cert).with_context(|| format!("--cacert {}", path.display()))?;
        }
    }
    Ok(roots)
}

/// `--insecure`: any certificate is taken, though the handshake's signatures are still checked
/// (they prove the server holds the key of the certificate it sent, whatever that is).
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, tokio_rustls::rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, tokio_rustls::rustls::Error> {
        verify_tls12_signature(message, cert, signature, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, tokio_rustls::rustls::Error> {
        verify_tls13_signature(message, cert, signature, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
