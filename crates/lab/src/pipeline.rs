//! The pipelining client of seed 002: one connection, every request written back to back without
//! waiting, then the responses read in turn. Each response is checked against the request it
//! should answer (the demo's bodies name the request: "slept 190 ms"), so a server that answers
//! out of order, or drops or merges responses, is caught.
//!
//! Written here rather than with `headway load --pipeline` because the lab needs each response's
//! body and arrival time in order, not only counts.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::measure::{percent, Row, RowContext, TABLE_PERCENTILES};

/// What to send on the one connection.
#[derive(Debug, Clone)]
pub struct PipelineSpec {
    /// Request paths, in the order they are written.
    pub paths: Vec<String>,
    /// The body each response must have, in the same order.
    pub expected: Vec<String>,
    /// Limit for the whole exchange.
    pub timeout: Duration,
}

#[derive(Debug, Clone, Default)]
pub struct PipelineOutcome {
    pub sent: usize,
    /// When each response was complete, from the first byte written.
    pub answered_after: Vec<Duration>,
    pub statuses: BTreeMap<u16, u64>,
    /// Every response so far had the body of its own request.
    pub in_order: bool,
    pub error: Option<String>,
    pub elapsed: Duration,
}

pub async fn run(port: u16, spec: &PipelineSpec) -> PipelineOutcome {
    let mut outcome = PipelineOutcome { sent: spec.paths.len(), in_order: true, ..PipelineOutcome::default() };
    let started = Instant::now();
    let result = tokio::time::timeout(spec.timeout, exchange(port, spec, started, &mut outcome)).await;
    outcome.error = match result {
        Ok(Ok(())) => None,
        Ok(Err(err)) => Some(format!("{err:#}")),
        Err(_) => Some(format!("timeout after {:?}", spec.timeout)),
    };
    outcome.elapsed = started.elapsed();
    outcome
}

async fn exchange(
    port: u16,
    spec: &PipelineSpec,
    started: Instant,
    outcome: &mut PipelineOutcome,
) -> anyhow::Result<()> {
    let stream = TcpStream::connect(("127.0.0.1", port)).await?;
    stream.set_nodelay(true)?;
    let (mut reader, mut writer) = stream.into_split();
    let requests: Vec<u8> = spec
        .paths
        .iter()
        .flat_map(|path| format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n").into_bytes())
        .collect();
    // Written concurrently with the reading: a server that stops reading until its answers are
    // read (Node's high-water mark) must not deadlock the client.
    let writing = tokio::spawn(async move {
        writer.write_all(&requests).await?;
        Ok::<_, std::io::Error>(writer)
    });
    let mut buffer = Vec::with_capacity(64 * 1024);
    for expected in &spec.expected {
        let (status, body) = read_response(&mut reader, &mut buffer).await?;
        outcome.answered_after.push(started.elapsed());
        *outcome.statuses.entry(status).or_default() += 1;
        outcome.in_order &= body == expected.as_bytes();
    }
    writing.abort();
    Ok(())
}

/// Reads one response with a Content-Length body (the demo sets it on every response).
async fn read_response(
    reader: &mut tokio::net::tcp::OwnedReadHalf,
    buffer: &mut Vec<u8>,
) -> anyhow::Result<(u16, Vec<u8>)> {
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut response = httparse::Response::new(&mut headers);
        if let httparse::Status::Complete(head_len) = response.parse(buffer)? {
            let status = response.code.unwrap_or(0);
            let length = response
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse::<usize>().ok())
                .ok_or_else(|| anyhow::anyhow!("a response without Content-Length (status {status})"))?;
            while buffer.len() < head_len + length {
                fill(reader, buffer).await?;
            }
            let body = buffer[head_len..head_len + length].to_vec();
            buffer.drain(..head_len + length);
            return Ok((status, body));
        }
        fill(reader, buffer).await?;
    }
}

async fn fill(reader: &mut tokio::net::tcp::OwnedReadHalf, buffer: &mut Vec<u8>) -> anyhow::Result<()> {
    let mut chunk = [0u8; 16 * 1024];
    let n = reader.read(&mut chunk).await?;
    if n == 0 {
        anyhow::bail!("the server closed the connection");
    }
    buffer.extend_from_slice(&chunk[..n]);
    Ok(())
}

/// The row of a pipelining case: latency is each response's arrival since the first write.
pub fn row(context: RowContext<'_>, outcome: &PipelineOutcome) -> Row {
    let mut row = Row::empty(context);
    let answered = outcome.answered_after.len() as u64;
    let elapsed = outcome.elapsed.as_secs_f64();
    row.requests = answered;
    row.errors = outcome.sent as u64 - answered;
    row.rps = answered as f64 / elapsed;
    row.rps_pct = percent(row.rps, row.ideal.rps);
    row.latency_secs = TABLE_PERCENTILES.iter().map(|&p| nearest_rank(&outcome.answered_after, p)).collect();
    row.long_tail = row.latency_secs[7] / row.latency_secs[0];
    row.status_codes = outcome.statuses.clone();
    if let Some(error) = &outcome.error {
        row.errors_by_kind.insert(error.clone(), row.errors.max(1));
    }
    row.in_order = Some(outcome.in_order && answered == outcome.sent as u64);
    row.elapsed_secs = elapsed;
    row
}

/// The nearest-rank percentile of `values` (which are in increasing order already: responses
/// arrive one after the other) in seconds.
fn nearest_rank(values: &[Duration], percent: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let rank = ((percent / 100.0) * values.len() as f64).ceil().max(1.0) as usize;
    values[rank.min(values.len()) - 1].as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let values: Vec<Duration> = (1..=10).map(Duration::from_secs).collect();
        assert_eq!(nearest_rank(&values, 10.0), 1.0);
        assert_eq!(nearest_rank(&values, 50.0), 5.0);
        assert_eq!(nearest_rank(&values, 99.0), 10.0);
        assert!(nearest_rank(&[], 50.0).is_nan());
    }

    /// A server that answers two pipelined requests in the wrong order is caught.
    #[tokio::test]
    async fn answers_out_of_order_are_caught() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let mut seen = Vec::new();
            while seen.windows(4).filter(|w| w == b"\r\n\r\n").count() < 2 {
                let mut chunk = [0u8; 1024];
                let n = socket.read(&mut chunk).await.expect("read");
                seen.extend_from_slice(&chunk[..n]);
            }
            for body in ["second", "first"] {
                let response = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                socket.write_all(response.as_bytes()).await.expect("write");
            }
        });
        let spec = PipelineSpec {
            paths: vec!["/first".into(), "/second".into()],
            expected: vec!["first".into(), "second".into()],
            timeout: Duration::from_secs(10),
        };
        let outcome = run(port, &spec).await;
        server.await.expect("server task");
        assert_eq!(outcome.error, None);
        assert_eq!(outcome.answered_after.len(), 2);
        assert!(!outcome.in_order);
    }
}
