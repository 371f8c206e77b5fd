//! A small HTTP/1.1 client for a headway address: `headway stats` reads the control endpoint
//! with it (and `headway workers` posts to it), and the lab reads headway's stats and asks peers
//! whether they are up. One request per connection, on hyper, over TCP or a unix socket; the
//! load itself goes through `headway load`.

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::{BodyExt as _, Empty};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};

use crate::bind::Bind;

/// `GET path` at `bind`: the status, whatever it is, and the whole body.
pub async fn get(bind: &Bind, path: &str) -> anyhow::Result<(StatusCode, Bytes)> {
    request(bind, Method::GET, path).await
}

/// `POST path` at `bind`, with no body: the status, whatever it is, and the whole body.
pub async fn post(bind: &Bind, path: &str) -> anyhow::Result<(StatusCode, Bytes)> {
    request(bind, Method::POST, path).await
}

async fn request(bind: &Bind, method: Method, path: &str) -> anyhow::Result<(StatusCode, Bytes)> {
    match bind {
        Bind::Tcp(addr) => request_over(TcpStream::connect(addr).await?, &addr.to_string(), method, path).await,
        // A unix socket has no host name, and HTTP/1.1 wants a Host header all the same.
        Bind::Unix(socket) => request_over(UnixStream::connect(socket).await?, "localhost", method, path).await,
    }
}

/// The JSON of the control endpoint's `/stats` at `control` (a [`crate::stats::Snapshot`]).
pub async fn get_stats(control: &Bind) -> anyhow::Result<Bytes> {
    let (status, body) = get(control, "/stats").await?;
    anyhow::ensure!(status.is_success(), "GET /stats answered {status}");
    Ok(body)
}

async fn request_over<S>(stream: S, host: &str, method: Method, path: &str) -> anyhow::Result<(StatusCode, Bytes)>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    // The connection runs beside the request and ends when `sender` is dropped; an error of
    // its own comes back through `send_request` or the body.
    tokio::spawn(connection);
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::HOST, host)
        .body(Empty::<Bytes>::new())?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    Ok((status, response.into_body().collect().await?.to_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// Answers one request on `stream` with `answer`, and returns the request head.
    async fn answer_once<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, answer: &str) -> String {
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0];
            stream.read_exact(&mut byte).await.unwrap();
            head.push(byte[0]);
        }
        stream.write_all(answer.as_bytes()).await.unwrap();
        String::from_utf8(head).unwrap()
    }

    #[tokio::test]
    async fn gets_any_status_and_the_body_over_tcp() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            answer_once(stream, "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope").await
        });
        let (status, body) = get(&Bind::Tcp(addr), "/stats").await.unwrap();
        assert_eq!((status, &body[..]), (StatusCode::NOT_FOUND, &b"nope"[..]));
        let head = server.await.unwrap();
        assert!(head.starts_with("GET /stats HTTP/1.1\r\n"), "{head}");
        assert!(head.to_ascii_lowercase().contains(&format!("host: {addr}\r\n")), "{head}");
    }

    #[tokio::test]
    async fn gets_over_a_unix_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("control.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            answer_once(stream, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n").await
        });
        let (status, body) = get(&Bind::Unix(path), "/stats").await.unwrap();
        assert_eq!((status, &body[..]), (StatusCode::OK, &b"{}"[..]));
        server.await.unwrap();
    }

    #[tokio::test]
    async fn nobody_listening_is_an_error() {
        let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        assert!(get(&Bind::Tcp(addr), "/").await.is_err());
    }
}
