//! The floor under the front's cost: the least an HTTP/1.1 keep-alive server on tokio can spend on
//! a request, so that `bench/front-ceiling.sh` can say how far above it the front is.
//!
//! One thread, tokio's current-thread runtime (the front's with one front thread), a task a
//! connection; each read's complete request heads (up to the blank line; a load tool's GETs carry
//! no body) are answered with one fixed `200 Hello, world!` each, in one write. No parse, no
//! queue, no worker, no log: what is left is the kernel's share of a request (a read, a write into
//! the client's socket and the wake-ups) and the runtime's. Not a server to use: it answers any
//! bytes that end in a blank line, and nothing else.
//!
//! Usage: `floor_server 127.0.0.1:PORT`

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 14\r\n\r\nHello, world!\n";
const HEAD_END: &[u8] = b"\r\n\r\n";
/// The most bytes a request head may take before the connection is dropped.
const BUFFER: usize = 16 * 1024;

fn main() -> std::io::Result<()> {
    let Some(address) = std::env::args().nth(1) else {
        eprintln!("usage: floor_server ADDRESS:PORT");
        std::process::exit(2);
    };
    tokio::runtime::Builder::new_current_thread().enable_io().build()?.block_on(async {
        let listener = TcpListener::bind(&address).await?;
        loop {
            let (stream, _) = listener.accept().await?;
            stream.set_nodelay(true)?;
            tokio::spawn(answer(stream));
        }
    })
}

/// Answers the connection's requests until the client closes it (or sends a head too large).
async fn answer(mut stream: TcpStream) {
    let mut buffer = Vec::with_capacity(BUFFER);
    let mut out = Vec::new();
    loop {
        match stream.read_buf(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let mut answered = 0;
        while let Some(end) = buffer[answered..].windows(HEAD_END.len()).position(|window| window == HEAD_END) {
            answered += end + HEAD_END.len();
            out.extend_from_slice(RESPONSE);
        }
        buffer.drain(..answered);
        if buffer.len() >= BUFFER {
            return;
        }
        if !out.is_empty() && stream.write_all(&out).await.is_err() {
            return;
        }
        out.clear();
    }
}
