//! PEM files of certificates and private keys, read the one way the server's `--certfile`,
//! `--keyfile` and `--ca-certs` and `headway load`'s `--cacert`, `--cert` and `--key` are: every
//! error names the flag and the file, and a file with no certificate in it is an error rather
//! than an empty trust store.

use std::path::Path;

use anyhow::Context as _;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Every certificate in the file, in order.
pub fn certificates(path: &Path, flag: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("cannot read {flag} {}", path.display()))?;
    anyhow::ensure!(
        !certs.is_empty(),
        "{flag} {} holds no certificate (PEM, -----BEGIN CERTIFICATE-----)",
        path.display()
    );
    Ok(certs)
}

/// The first private key in the file (PKCS#8, PKCS#1 RSA or SEC1 EC), not encrypted.
pub fn private_key(path: &Path, flag: &str) -> anyhow::Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path)
        .with_context(|| format!("cannot read a private key from {flag} {}", path.display()))
}
