//! The TLS arguments shared by the commands that serve (`--cert`, `--key`) and the ones
//! that connect to a server (`--ca`, `--server-cert-sha256`).

use std::path::PathBuf;

use braid_io::tls::{self, ServerIdentity};
use braid_transport::proto::ClientCrypto;

/// The server's identity.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerTls {
    /// The certificate chain (PEM, end entity first). Without `--cert`/`--key` a
    /// self-signed certificate is made at start and its fingerprint printed.
    #[arg(long, value_name = "FILE")]
    pub cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
}

impl ServerTls {
    /// Loads or makes the identity and prints `certificate sha256 HEX` on stderr (what
    /// clients pin with `--server-cert-sha256`).
    pub fn identity(&self) -> anyhow::Result<ServerIdentity> {
        let id = tls::server_identity(self.cert.as_deref(), self.key.as_deref())?;
        eprintln!("certificate sha256 {}", id.fingerprint_hex());
        Ok(id)
    }
}

/// How a client authenticates the server.
#[derive(Debug, Clone, clap::Args)]
pub struct ClientTls {
    /// Trust servers whose certificate chains to a CA in this PEM file (the certificate
    /// must name the address connected to).
    #[arg(long, value_name = "FILE", conflicts_with = "server_cert_sha256")]
    pub ca: Option<PathBuf>,
    /// Accept exactly the server certificate with this SHA-256 fingerprint (64 hex digits,
    /// as `braid serve` prints it).
    #[arg(long, value_name = "HEX")]
    pub server_cert_sha256: Option<String>,
}

impl ClientTls {
    /// The client configuration (one of the two must be given).
    pub fn crypto(&self) -> anyhow::Result<ClientCrypto> {
        self.crypto_offering(tls::Suites::All)
    }

    /// [`ClientTls::crypto`], offering only `suites`.
    pub fn crypto_offering(&self, suites: tls::Suites) -> anyhow::Result<ClientCrypto> {
        let (ca, pin) = (self.ca.as_deref(), self.server_cert_sha256.as_deref());
        Ok(tls::client_trust_offering(ca, pin, suites)?)
    }
}
