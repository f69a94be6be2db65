//! A scripted HTTP/1.1 server on 127.0.0.1 for the provider's tests: it
//! answers each connection with the next scripted response — written as
//! raw bytes, piece by piece, so a test decides where the network splits
//! the reply, where it breaks and where it stalls — and records every
//! request.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// How a scripted response ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// The body is complete (the last chunk is sent).
    Complete,
    /// The connection is dropped without the last chunk.
    Cut,
    /// Nothing more is sent and the connection stays open.
    Stall,
    /// Forever, every `every_ms`: an SSE keep-alive comment, or (with
    /// `content`) a chunk of text.
    Trickle {
        /// The pause between two pieces.
        every_ms: u64,
        /// Text chunks rather than comments.
        content: bool,
    },
    /// As fast as the client reads: `chunks` events of `bytes` letters
    /// `x` of text each (one word, no spaces), then a finish reason and
    /// `[DONE]` — made one at a time, so a flood of any size costs the
    /// test one chunk of memory. Stops when the client hangs up.
    // Used by the end-to-end tests (tests/it/faults_input.rs).
    #[allow(dead_code)]
    Flood {
        /// How many text events.
        chunks: u64,
        /// The letters in each.
        bytes: usize,
    },
}

/// One scripted response.
#[derive(Debug, Clone)]
pub(super) struct Scripted {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// Each piece is written (as one HTTP chunk) and flushed on its own.
    pub pieces: Vec<Vec<u8>>,
    pub end: End,
}

impl Scripted {
    /// A 200 event stream with these pieces.
    pub fn sse(pieces: Vec<Vec<u8>>) -> Self {
        Self {
            status: 200,
            headers: vec![("Content-Type".into(), "text/event-stream".into())],
            pieces,
            end: End::Complete,
        }
    }

    /// An error status with a JSON body.
    pub fn status(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            pieces: vec![body.as_bytes().to_vec()],
            end: End::Complete,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn ending(mut self, end: End) -> Self {
        self.end = end;
        self
    }
}

/// One request as the server received it.
#[derive(Debug, Clone)]
pub(super) struct Recorded {
    pub request_line: String,
    /// Names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub at: tokio::time::Instant,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).expect("the request body is JSON")
    }
}

/// The running server; it stops when dropped.
pub(super) struct Server {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    /// Starts a server answering with `script`, one response per
    /// connection; once the script is used up it answers 599.
    pub async fn start(script: Vec<Scripted>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let recorded = Arc::clone(&requests);
        let task = tokio::spawn(async move {
            // Dropping the set (when the server stops) ends every
            // connection, stalled ones included.
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((socket, _)) = listener.accept().await {
                let recorded = Arc::clone(&recorded);
                let script = Arc::clone(&script);
                connections.spawn(serve(socket, recorded, script));
            }
        });
        Self {
            addr,
            requests,
            task,
        }
    }

    /// The base URL a provider should use.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

async fn serve(
    mut socket: TcpStream,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    script: Arc<Mutex<VecDeque<Scripted>>>,
) {
    let Some(request) = read_request(&mut socket).await else {
        return;
    };
    recorded.lock().unwrap().push(request);
    let response = script.lock().unwrap().pop_front().unwrap_or_else(|| {
        Scripted::status(599, r#"{"error":{"message":"the test script is used up"}}"#)
    });
    let mut head = format!("HTTP/1.1 {} Scripted\r\n", response.status);
    for (name, value) in &response.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    if socket.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    for piece in &response.pieces {
        let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
        chunk.extend_from_slice(piece);
        chunk.extend_from_slice(b"\r\n");
        if socket.write_all(&chunk).await.is_err() || socket.flush().await.is_err() {
            return;
        }
        // Let the client read each piece on its own.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    match response.end {
        End::Complete => {
            let _ = socket.write_all(b"0\r\n\r\n").await;
            let _ = socket.shutdown().await;
        }
        End::Cut => drop(socket),
        End::Stall => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        End::Trickle { every_ms, content } => loop {
            tokio::time::sleep(Duration::from_millis(every_ms)).await;
            let piece: &[u8] = if content {
                b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n"
            } else {
                b": keep-alive\n\n"
            };
            let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
            chunk.extend_from_slice(piece);
            chunk.extend_from_slice(b"\r\n");
            if socket.write_all(&chunk).await.is_err() || socket.flush().await.is_err() {
                return;
            }
        },
        End::Flood { chunks, bytes } => {
            let piece = format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{}\"}}}}]}}\n\n",
                "x".repeat(bytes)
            );
            let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
            chunk.extend_from_slice(piece.as_bytes());
            chunk.extend_from_slice(b"\r\n");
            for _ in 0..chunks {
                if socket.write_all(&chunk).await.is_err() {
                    return;
                }
            }
            let tail: &[u8] = b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
            let mut last = format!("{:x}\r\n", tail.len()).into_bytes();
            last.extend_from_slice(tail);
            last.extend_from_slice(b"\r\n0\r\n\r\n");
            let _ = socket.write_all(&last).await;
            let _ = socket.shutdown().await;
        }
    }
}

async fn read_request(socket: &mut TcpStream) -> Option<Recorded> {
    let mut buffer = Vec::new();
    let mut piece = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = socket.read(&mut piece).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&piece[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut piece).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&piece[..n]);
    }
    Some(Recorded {
        request_line,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
        at: tokio::time::Instant::now(),
    })
}

/// SSE pieces: one `data:` event per chunk object, then `data: [DONE]`.
pub(super) fn sse_events(chunks: &[serde_json::Value]) -> Vec<Vec<u8>> {
    let mut pieces: Vec<Vec<u8>> = chunks
        .iter()
        .map(|c| format!("data: {c}\n\n").into_bytes())
        .collect();
    pieces.push(b"data: [DONE]\n\n".to_vec());
    pieces
}
