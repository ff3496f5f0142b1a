//! TLS through rustls (ring provider), following libpq's `sslmode`:
//!
//! * `verify-full`: the chain must lead to a trusted root and name the host (DNS name or IP
//!   address) the connection string gives;
//! * `verify-ca`: the chain must lead to a trusted root, whatever name it carries;
//! * `require` and `prefer`: encrypted, the certificate unverified (its handshake signature
//!   is still checked); with `sslrootcert=FILE` given, the chain is verified as with
//!   `verify-ca`, as libpq does when a root file exists.
//!
//! Roots come from `sslrootcert` (a PEM file) or the system store (`rustls-native-certs`);
//! a client certificate from `sslcert` and `sslkey` (PEM).

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ClientConfig, WebPkiServerVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::conninfo::{Roots, SslMode, TlsParams};
use crate::error::{Error, Result};

/// Builds the connector for `params` (not called for `sslmode=disable`).
pub(crate) fn connector(params: &TlsParams) -> Result<MakeRustlsConnect> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verify_chain = match params.mode {
        SslMode::Disable | SslMode::Prefer | SslMode::Require => {
            matches!(params.roots, Roots::File(_))
        }
        SslMode::VerifyCa | SslMode::VerifyFull => true,
    };
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::tls("the TLS protocol versions", e))?;
    let verifier: Arc<dyn ServerCertVerifier> = if verify_chain {
        let roots = Arc::new(roots(&params.roots)?);
        let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|e| Error::tls("the certificate verifier", e))?;
        if params.mode == SslMode::VerifyFull {
            webpki
        } else {
            Arc::new(ChainOnly(webpki))
        }
    } else {
        Arc::new(Unverified(provider.signature_verification_algorithms))
    };
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let config = match (&params.cert, &params.key) {
        (None, None) => builder.with_no_client_auth(),
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(Iterator::collect::<std::result::Result<Vec<_>, _>>)
                .map_err(|e| Error::tls(format!("sslcert {}", cert.display()), e))?;
            if chain.is_empty() {
                return Err(Error::tls(
                    format!("sslcert {}", cert.display()),
                    "no certificate in the file",
                ));
            }
            let key_der = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| Error::tls(format!("sslkey {}", key.display()), e))?;
            builder
                .with_client_auth_cert(chain, key_der)
                .map_err(|e| Error::tls("sslcert/sslkey", e))?
        }
        _ => {
            return Err(Error::InvalidConfig(
                "sslcert and sslkey must be given together".to_owned(),
            ));
        }
    };
    Ok(MakeRustlsConnect::new(config))
}

fn roots(roots: &Roots) -> Result<RootCertStore> {
    let mut store = RootCertStore::empty();
    match roots {
        Roots::File(path) => {
            let what = || format!("sslrootcert {}", path.display());
            for cert in CertificateDer::pem_file_iter(path).map_err(|e| Error::tls(what(), e))? {
                store
                    .add(cert.map_err(|e| Error::tls(what(), e))?)
                    .map_err(|e| Error::tls(what(), e))?;
            }
            if store.is_empty() {
                return Err(Error::tls(what(), "no certificate in the file"));
            }
        }
        Roots::System => {
            let found = rustls_native_certs::load_native_certs();
            store.add_parsable_certificates(found.certs);
            if store.is_empty() {
                return Err(Error::tls(
                    "the system root store",
                    "no usable root certificate (set sslrootcert to a PEM file)",
                ));
            }
        }
    }
    Ok(store)
}

/// `verify-ca`: the chain is verified, the name is not.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `require` / `prefer` without a root file: any certificate, but the handshake signature
/// must be the certificate's.
struct Unverified(WebPkiSupportedAlgorithms);

impl fmt::Debug for Unverified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Unverified")
    }
}

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}
