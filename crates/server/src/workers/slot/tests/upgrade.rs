//! WebSocket handshakes through a slot: each goes on a connection of its own, whatever the
//! slot's own link, and the slot is free again once the worker has answered.

use std::sync::atomic::AtomicUsize;

use super::*;
use crate::queue::job::WebSocketHandshake;

/// A worker that accepts a handshake to /chat (echoing the socket's bytes after 101), refuses
/// one to anywhere else with 403, and answers other requests "ok"; it counts its connections.
fn websocket_worker() -> (FakeWorker, Arc<AtomicUsize>) {
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    let fake = FakeWorker::http(Duration::from_secs(30), move |mut stream| {
        counted.fetch_add(1, Ordering::SeqCst);
        async move {
            while let Some(head) = head_text(&mut stream).await {
                if !head.contains("upgrade: websocket") {
                    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").await;
                } else if head.starts_with("get /chat ") {
                    return accept_and_echo(stream).await;
                } else {
                    let _ = stream.write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno").await;
                    return;
                }
            }
        }
    });
    (fake, connections)
}

/// Answers a handshake read from `stream` with 101, then echoes the socket's bytes.
pub(super) async fn accept_and_echo(mut stream: UnixStream) {
    let _ = stream.write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n").await;
    let (mut reads, mut writes) = stream.split();
    let _ = tokio::io::copy(&mut reads, &mut writes).await;
}

pub(super) fn handshake(fake: &FakeWorker, path: &str) -> Wait {
    let mut request = http::Request::builder()
        .uri(path)
        .header(http::header::HOST, "test")
        .header(http::header::CONNECTION, "upgrade")
        .header(http::header::UPGRADE, "websocket")
        .body(RequestBody::Memory(Bytes::new()))
        .unwrap();
    request.extensions_mut().insert(WebSocketHandshake);
    fake.queue.enqueue(request, None)
}

#[tokio::test]
async fn a_handshake_gets_a_connection_of_its_own_and_the_slot_is_free_at_101() {
    let (fake, connections) = websocket_worker();
    // The slot's own keep-alive connection first.
    assert!(matches!(fake.request("/before").outcome().await, Outcome::Response(_)));
    let Outcome::Upgraded(upgraded) = handshake(&fake, "/chat").outcome().await else { panic!("no 101") };
    assert_eq!(upgraded.head.status, http::StatusCode::SWITCHING_PROTOCOLS);
    assert_eq!(connections.load(Ordering::SeqCst), 2, "the handshake went on a new connection");
    assert_eq!(fake.worker.websockets.get(), 1);

    // While the socket is open, the one slot serves requests on its own connection.
    let Outcome::Response(response) = fake.request("/during").outcome().await else { panic!("no response") };
    assert!(matches!(response.body, ResponseBody::Complete(body) if body == "ok"));
    assert_eq!(connections.load(Ordering::SeqCst), 2);

    let mut socket = upgraded.socket;
    socket.io.write_all(b"ping").await.unwrap();
    let mut echo = [0u8; 4];
    socket.io.read_exact(&mut echo).await.unwrap();
    assert_eq!(&echo, b"ping");
    drop(socket);
    assert_eq!(fake.worker.websockets.get(), 0);
    fake.worker.busy.zero().await;
}

#[tokio::test]
async fn a_refused_handshake_is_an_ordinary_response() {
    let (fake, _) = websocket_worker();
    let Outcome::Response(response) = handshake(&fake, "/elsewhere").outcome().await else { panic!("no response") };
    assert_eq!(response.head.status, http::StatusCode::FORBIDDEN);
    assert!(matches!(response.body, ResponseBody::Complete(body) if body == "no"));
    assert_eq!(fake.worker.websockets.get(), 0);
    fake.worker.busy.zero().await;
}
