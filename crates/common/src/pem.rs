//! PEM files of certificates and private keys, read the one way the server's `--certfile`,
//! `--keyfile` and `--ca-certs` and `headway load`'s `--cacert`, `--cert` and `--key` are: every
//! error names the flag and the file, and a file with no certificate in it is an error rather
//! than an empty trust store. A key may be encrypted (PKCS#8 `ENCRYPTED PRIVATE KEY`, what
//! OpenSSL 3 and Python's cryptography write), given its password.

use std::path::Path;

use anyhow::{anyhow, bail, Context as _};
use pkcs8::EncryptedPrivateKeyInfo;
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

/// The private key in the file: an encrypted PKCS#8 one, opened with `password`, or else the
/// first plain one (PKCS#8, PKCS#1 RSA or SEC1 EC; a password is then not needed, as Python's
/// `ssl` takes it).
pub fn private_key(path: &Path, flag: &str, password: Option<&str>) -> anyhow::Result<PrivateKeyDer<'static>> {
    const BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
    const END: &str = "-----END ENCRYPTED PRIVATE KEY-----";
    let file = path.display();
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read a private key from {flag} {file}"))?;
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        bail!(
            "{flag} {file} is encrypted the old OpenSSL way (Proc-Type headers); convert it to PKCS#8: \
             openssl pkcs8 -topk8 -in {file} -out NEW.key"
        );
    }
    let Some(start) = text.find(BEGIN) else {
        return PrivateKeyDer::from_pem_slice(text.as_bytes())
            .with_context(|| format!("cannot read a private key from {flag} {file}"));
    };
    let Some(password) = password else {
        bail!("{flag} {file} holds an encrypted key, and no password was given for it");
    };
    let end = text[start..].find(END).map(|at| start + at + END.len()).unwrap_or(text.len());
    let (_, der) = pkcs8::der::pem::decode_vec(&text.as_bytes()[start..end])
        .map_err(|err| anyhow!("cannot read the encrypted key in {flag} {file}: {err}"))?;
    let info = EncryptedPrivateKeyInfo::try_from(der.as_slice())
        .map_err(|err| anyhow!("cannot read the encrypted key in {flag} {file}: {err}"))?;
    let key = info.decrypt(password).map_err(|err| anyhow!("the password does not open {flag} {file} ({err})"))?;
    Ok(PrivateKeyDer::Pkcs8(key.as_bytes().to_vec().into()))
}
