// The interop runner's cases against one QUIC stack, both ways: included by
// `interop_hq.rs` once for quinn and once for noq (their APIs agree), each time in a module
// that names the stack `q`.

/// The stack's client with the runner's ALPN; `chacha20`: that suite only.
pub(super) fn client(fingerprint: [u8; 32], chacha20: bool) -> q::Endpoint {
    client_with_ids(fingerprint, chacha20, None)
}

/// [`client`] with connection ids of its own `ids` bytes long.
fn client_with_ids(fingerprint: [u8; 32], chacha20: bool, ids: Option<usize>) -> q::Endpoint {
    let mut tls = client_tls(fingerprint);
    tls.alpn_protocols = vec![hq::ALPN.to_vec()];
    if chacha20 {
        let mut p = rustls::crypto::ring::default_provider();
        p.cipher_suites = vec![rustls::crypto::ring::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256];
        let verifier = Arc::new(braid_transport::proto::crypto::PinnedCertVerifier::new(
            fingerprint,
            p.signature_verification_algorithms,
        ));
        tls = rustls::ClientConfig::builder_with_provider(Arc::new(p))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("TLS 1.3")
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        tls.alpn_protocols = vec![hq::ALPN.to_vec()];
    }
    // Initial packets are always AES-128-GCM (RFC 9001 §5.2), whatever TLS negotiates.
    let initial = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .and_then(|s| s.quic_suite())
        .expect("the Initial suite");
    let quic = q::crypto::rustls::QuicClientConfig::with_initial(Arc::new(tls), initial)
        .expect("a QUIC config");
    // quinn's setter takes `&mut self`, noq's `&self`.
    #[allow(unused_mut)]
    let mut client = endpoint(ids, None);
    client.set_default_client_config(q::ClientConfig::new(Arc::new(quic)));
    client
}

/// Draws the stack's own connection ids with a length of our choice.
struct Ids(usize);

impl q::ConnectionIdGenerator for Ids {
    fn generate_cid(&mut self) -> q::ConnectionId {
        use ring::rand::SecureRandom;
        let mut b = vec![0u8; self.0];
        ring::rand::SystemRandom::new().fill(&mut b).expect("random bytes");
        q::ConnectionId::new(&b)
    }

    fn cid_len(&self) -> usize {
        self.0
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// An endpoint of the stack on loopback (a server with `server`), its own connection ids
/// `ids` bytes long (the stack's default, 8, without).
fn endpoint(ids: Option<usize>, server: Option<q::ServerConfig>) -> q::Endpoint {
    let socket = std::net::UdpSocket::bind(SocketAddr::new(LOOPBACK, 0)).expect("a socket");
    let mut config = q::EndpointConfig::default();
    if let Some(len) = ids {
        with_cid_generator(&mut config, move || Box::new(Ids(len)));
    }
    q::Endpoint::new(config, server, socket, Arc::new(q::TokioRuntime)).expect("an endpoint")
}

/// The stack fetches the transfer case's files from `addr` over one connection, all requests
/// at once as the runner's clients do, into `out`; with `key_update`, it updates its keys
/// first, so every request and acknowledgement travels under the next keys. Returns
/// the stack's connection statistics.
async fn fetches(
    addr: SocketAddr,
    fingerprint: [u8; 32],
    (chacha20, key_update): (bool, bool),
    ids: Option<usize>,
    out: &Path,
) -> q::ConnectionStats {
    let client = client_with_ids(fingerprint, chacha20, ids);
    let conn = client.connect(addr, "localhost").expect("connecting").await.expect("a handshake");
    if key_update {
        conn.force_key_update();
    }
    let mut tasks = Vec::new();
    for (name, _) in FILES {
        let conn = conn.clone();
        tasks.push(tokio::spawn(async move {
            let (mut send, mut recv) = conn.open_bi().await.expect("a stream");
            send.write_all(format!("GET /{name}\r\n").as_bytes()).await.expect("the request");
            send.finish().expect("finished");
            (name, recv.read_to_end(1 << 24).await.expect("the answer to its FIN"))
        }));
    }
    for t in tasks {
        let (name, data) = t.await.expect("a fetch");
        std::fs::write(out.join(name), data).expect("written");
    }
    let stats = conn.stats();
    conn.close(0u32.into(), b"");
    client.wait_idle().await;
    stats
}

async fn client_case(retry: bool, chacha20: bool, key_update: bool) {
    client_case_with_ids(retry, chacha20, key_update, None).await;
}

async fn client_case_with_ids(retry: bool, chacha20: bool, key_update: bool, ids: Option<usize>) {
    let root = root();
    let (addr, fingerprint) = braid_server(&root.0, retry).await;
    let out = TempDir::new("out");
    let stats = tokio::time::timeout(
        Duration::from_secs(20),
        fetches(addr, fingerprint, (chacha20, key_update), ids, &out.0),
    )
    .await
    .expect("the transfer within 20 s");
    check_files(&out.0);
    assert!(stats.frame_rx.stream >= FILES.len() as u64, "{:?}", stats.frame_rx);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_fetches_files_from_our_server() {
    // handshake + transfer.
    client_case(false, false, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_fetches_after_our_servers_retry() {
    client_case(true, false, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_fetches_with_chacha20_only() {
    client_case(false, true, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_updates_its_keys_while_fetching_from_our_server() {
    client_case(false, false, true).await;
}

/// The stack fetches 60 files of 100 kB from `addr` over one connection, all requests at
/// once; once the first answer is complete, `mid` runs (the rest still on their way).
/// Every file must arrive intact and the connection stay open.
async fn fetches_many(client: &q::Endpoint, addr: SocketAddr, mid: impl FnOnce(&q::Endpoint)) {
    let conn = client.connect(addr, "localhost").expect("connecting").await.expect("a handshake");
    let names: Vec<String> = (0..60).map(|i| format!("f{i}")).collect();
    let mut tasks = Vec::new();
    for n in names.clone() {
        let conn = conn.clone();
        tasks.push(tokio::spawn(async move {
            let (mut send, mut recv) = conn.open_bi().await.expect("a stream");
            send.write_all(format!("GET /{n}\r\n").as_bytes()).await.expect("the request");
            send.finish().expect("finished");
            let data = recv.read_to_end(1 << 24).await.expect("the answer to its FIN");
            (n, data)
        }));
    }
    let first = tasks.remove(0).await.expect("the first fetch");
    let pending = tasks.iter().filter(|t| !t.is_finished()).count();
    mid(client);
    eprintln!("{pending} of 59 answers still on their way");
    assert!(pending > 0, "the transfer ended first");
    let mut got = vec![first];
    for t in tasks {
        got.push(
            tokio::time::timeout(Duration::from_secs(20), t)
                .await
                .expect("within 20 s")
                .expect("a fetch"),
        );
    }
    for (n, data) in got {
        assert!(data == contents(&n, 100_000), "{n}");
    }
    assert!(conn.close_reason().is_none(), "{:?}", conn.close_reason());
    conn.close(0u32.into(), b"");
    client.wait_idle().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_behind_a_rebinding_nat_gets_every_file_from_our_server() {
    // The runner's rebind-port case: a NAT gives the client's flow a new source port while
    // the answers flow (the client itself does not know: same socket, same connection
    // id); our server validates the new address and goes on there.
    let dir = many_files("rebind");
    let (addr, fingerprint) = braid_server(&dir.0, false).await;
    let (front, nat) = nat(addr, 1_000_000).await;
    let client = client(fingerprint, false);
    fetches_many(&client, front, |_| {}).await;
    let ports = nat.await.expect("the NAT");
    assert_eq!(ports.len(), 2, "the NAT rebound once: {ports:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_migrates_mid_transfer_gets_every_file_from_our_server() {
    // The runner's connectionmigration case: once the first answer is complete, the stack's
    // client moves to a new socket (an active migration): its packets from there carry
    // one of the ids our server issued and never seen from the old port (RFC 9000 §9.5),
    // and our server validates the new address and goes on there.
    let dir = many_files("migrate");
    let (addr, fingerprint) = braid_server(&dir.0, false).await;
    let (front, relay) = interop_common::relay(addr).await;
    let client = client(fingerprint, false);
    fetches_many(&client, front, |client| {
        let before = client.local_addr().expect("its address");
        let socket = std::net::UdpSocket::bind(SocketAddr::new(LOOPBACK, 0)).expect("a new socket");
        client.rebind(socket).expect("rebound");
        assert_ne!(client.local_addr().expect("its address").port(), before.port());
    })
    .await;
    interop_common::assert_migrated_with_new_ids(&relay.await.expect("the relay"));
}

/// The stack's server endpoint on loopback with the runner's ALPN: the endpoint, its address
/// and its certificate's fingerprint.
// The NEW_TOKEN tests use quinn's only.
#[allow(dead_code)]
pub(super) fn hq_endpoint() -> (q::Endpoint, SocketAddr, [u8; 32]) {
    hq_endpoint_with_ids(None)
}

/// [`hq_endpoint`] with connection ids of its own `ids` bytes long.
fn hq_endpoint_with_ids(ids: Option<usize>) -> (q::Endpoint, SocketAddr, [u8; 32]) {
    let (mut tls, fingerprint) = server_tls();
    tls.alpn_protocols = vec![hq::ALPN.to_vec()];
    let quic = q::crypto::rustls::QuicServerConfig::try_from(tls).expect("a QUIC config");
    let server = endpoint(ids, Some(q::ServerConfig::with_crypto(Arc::new(quic))));
    let addr = server.local_addr().expect("its address");
    (server, addr, fingerprint)
}

/// The stack's `hq-interop` server on loopback serving the transfer case's files (from
/// memory); `retry`: it asks every client for a Retry first.
fn server(retry: bool) -> (SocketAddr, [u8; 32], tokio::task::JoinHandle<()>) {
    server_with_ids(retry, None)
}

/// [`server`] with connection ids of its own `ids` bytes long.
fn server_with_ids(
    retry: bool,
    ids: Option<usize>,
) -> (SocketAddr, [u8; 32], tokio::task::JoinHandle<()>) {
    let (server, addr, fingerprint) = hq_endpoint_with_ids(ids);
    let task = tokio::spawn(async move {
        while let Some(incoming) = server.accept().await {
            if retry && !incoming.remote_address_validated() {
                incoming.retry().expect("a Retry");
                continue;
            }
            let Ok(conn) = incoming.await else { continue };
            tokio::spawn(async move {
                while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                    tokio::spawn(async move {
                        let line = recv.read_to_end(4096).await.expect("a request");
                        let line = String::from_utf8(line).expect("UTF-8");
                        let name = line.trim_end().strip_prefix("GET /").expect("a GET");
                        let len = FILES.iter().find(|f| f.0 == name).expect("a known file").1;
                        send.write_all(&contents(name, len)).await.expect("the answer");
                        send.finish().expect("finished");
                        let _ = send.stopped().await;
                    });
                }
            });
        }
    });
    (addr, fingerprint, task)
}

async fn braid_client_case(retry: bool, chacha20: bool, key_update: bool) {
    braid_client_case_with_ids(retry, chacha20, key_update, None).await;
}

async fn braid_client_case_with_ids(
    retry: bool,
    chacha20: bool,
    key_update: bool,
    ids: Option<usize>,
) {
    let (addr, fingerprint, server) = server_with_ids(retry, ids);
    let out = TempDir::new("out");
    let urls: Vec<String> = FILES.iter().map(|(n, _)| format!("https://{addr}/{n}")).collect();
    let crypto = hq::client_crypto(&hq::Trust::Pinned(fingerprint), chacha20).expect("TLS");
    let cfg = Arc::new(hq::config(&config(), key_update));
    let (at, names) = hq::server_of(&urls).await.expect("one server");
    assert_eq!(at, addr);
    let path = driver::PathSpec::to(addr, braid_transport::path::PathRole::Wired);
    let conn = driver::connect(cfg, crypto, vec![path]).await.expect("a handshake");
    let got = tokio::time::timeout(Duration::from_secs(20), hq::fetch(&conn, &names, &out.0))
        .await
        .expect("the transfer within 20 s")
        .expect("every file");
    assert_eq!(got, FILES.iter().map(|f| f.1 as u64).sum::<u64>());
    check_files(&out.0);
    let s = conn.stats().await.expect("statistics");
    if key_update {
        assert!(s.key_updates >= 1, "no key update: {}", s.key_updates);
    }
    conn.close(0, b"").await;
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_fetches_files_from_a_server() {
    braid_client_case(false, false, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_fetches_after_a_servers_retry() {
    braid_client_case(true, false, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_fetches_from_a_server_with_chacha20_only() {
    braid_client_case(false, true, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_updates_its_keys_while_fetching_from_a_server() {
    braid_client_case(false, false, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_migrates_mid_transfer_and_gets_every_file_from_a_server() {
    // The runner's connectionmigration case the other way, as `braid interop client
    // --migrate` runs it: once 64 KiB arrived, our client moves its path to a new socket;
    // its packets from there carry an id of the stack's never used from the old port, the
    // validates the new address, and the transfer completes.
    let (addr, fingerprint, server) = server(false);
    let (front, relay) = interop_common::relay(addr).await;
    let out = TempDir::new("migrate-client");
    let crypto = hq::client_crypto(&hq::Trust::Pinned(fingerprint), false).expect("TLS");
    let cfg = Arc::new(hq::config(&config(), false));
    let path = driver::PathSpec::to(front, braid_transport::path::PathRole::Wired);
    let conn = driver::connect(cfg, crypto, vec![path]).await.expect("a handshake");
    let before = conn.paths()[0].local;
    let names: Vec<String> = FILES.iter().map(|f| f.0.to_string()).collect();
    let (got, moved) = tokio::time::timeout(Duration::from_secs(20), async {
        tokio::join!(
            hq::fetch(&conn, &names, &out.0),
            hq::migrate_after(&conn, hq::MIGRATE_AFTER_BYTES),
        )
    })
    .await
    .expect("the transfer within 20 s");
    let moved = moved.expect("migrated");
    assert_ne!(moved, before);
    assert_eq!(conn.paths()[0].local, moved);
    assert_eq!(got.expect("every file"), FILES.iter().map(|f| f.1 as u64).sum::<u64>());
    check_files(&out.0);
    let s = conn.stats().await.expect("statistics");
    assert_eq!(s.migrated, 1);
    assert!(s.cids_retired >= 1, "the ids used at the old port are retired");
    conn.close(0, b"").await;
    interop_common::assert_migrated_with_new_ids(&relay.await.expect("the relay"));
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_behind_a_rebinding_nat_gets_every_file_from_a_server() {
    // The runner's rebind-port case the other way: our client's traffic leaves the NAT
    // from a new port after 300 kB of answers; the stack's server validates the new address
    // (its PATH_CHALLENGE, which our client answers) and the transfer completes.
    let (addr, fingerprint, server) = server(false);
    let (front, nat) = nat(addr, 300_000).await;
    let out = TempDir::new("rebind-client");
    let crypto = hq::client_crypto(&hq::Trust::Pinned(fingerprint), false).expect("TLS");
    let cfg = Arc::new(hq::config(&config(), false));
    let path = driver::PathSpec::to(front, braid_transport::path::PathRole::Wired);
    let conn = driver::connect(cfg, crypto, vec![path]).await.expect("a handshake");
    let names: Vec<String> = FILES.iter().map(|f| f.0.to_string()).collect();
    let got = tokio::time::timeout(Duration::from_secs(20), hq::fetch(&conn, &names, &out.0))
        .await
        .expect("the transfer within 20 s")
        .expect("every file");
    assert_eq!(got, FILES.iter().map(|f| f.1 as u64).sum::<u64>());
    check_files(&out.0);
    conn.close(0, b"").await;
    let ports = nat.await.expect("the NAT");
    assert_eq!(ports.len(), 2, "the NAT rebound once: {ports:?}");
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_with_ids_of_4_and_20_bytes_fetch_files_from_our_server() {
    // RFC 9000 §5.1: each side picks its ids' length (0 to 20 bytes); our server sends to
    // ids of the client's length, in long and short headers, after a Retry as well.
    for ids in [4, 20] {
        client_case_with_ids(false, false, false, Some(ids)).await;
        client_case_with_ids(true, false, false, Some(ids)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_fetches_from_servers_with_ids_of_4_and_20_bytes() {
    for ids in [4, 20] {
        braid_client_case_with_ids(false, false, false, Some(ids)).await;
        braid_client_case_with_ids(true, false, false, Some(ids)).await;
    }
}
