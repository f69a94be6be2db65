//! The reply as it arrives: a [`ReplyStream`] of [`Event`]s that also
//! collects them into a [`Reply`].
//!
//! A provider produces the stream from a task through a [`ReplySender`];
//! dropping the stream stops that task (and so closes the connection).

use std::fmt;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::error::ProviderError;
use super::types::{Collector, Event, Reply};

/// Events buffered between the task and the reader.
const CAPACITY: usize = 64;

#[derive(Debug)]
enum Item {
    Attempt(u32),
    Event(Event),
    Failed(ProviderError),
    Done,
}

/// The reader's side: the events of one reply, in order.
///
/// Read it with [`next`](Self::next) to show the reply as it comes, then
/// [`collect`](Self::collect) for the whole [`Reply`]; or call `collect`
/// at once.
pub struct ReplyStream {
    rx: mpsc::Receiver<Item>,
    task: Option<JoinHandle<()>>,
    collector: Collector,
    attempts: u32,
    /// The stream has ended (with the reply or an error).
    ended: bool,
    /// The error that ended it.
    failure: Option<ProviderError>,
    /// Whether [`next`](Self::next) has returned that error.
    reported: bool,
    /// The most bytes of text and tool-call arguments read.
    limit: Option<usize>,
}

/// The producer's side of a [`ReplyStream`].
#[derive(Debug)]
pub struct ReplySender {
    tx: mpsc::Sender<Item>,
}

/// The reader has dropped the stream; stop producing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

impl ReplySender {
    /// Says that request number `n` (1 for the first, 2 for the first
    /// retry, …) is being made.
    pub async fn attempt(&self, n: u32) -> Result<(), Closed> {
        self.tx.send(Item::Attempt(n)).await.map_err(|_| Closed)
    }

    /// Passes one event on.
    pub async fn event(&self, event: Event) -> Result<(), Closed> {
        self.tx.send(Item::Event(event)).await.map_err(|_| Closed)
    }

    /// Passes one event on from a thread outside the runtime (a model
    /// running in `spawn_blocking`).
    pub fn event_blocking(&self, event: Event) -> Result<(), Closed> {
        self.tx
            .blocking_send(Item::Event(event))
            .map_err(|_| Closed)
    }

    /// Ends the stream with an error, from a thread outside the runtime.
    pub fn fail_blocking(self, error: ProviderError) {
        let _ = self.tx.blocking_send(Item::Failed(error));
    }

    /// Ends the stream, from a thread outside the runtime: the reply is
    /// complete.
    pub fn finish_blocking(self) {
        let _ = self.tx.blocking_send(Item::Done);
    }

    /// Ends the stream with an error.
    pub async fn fail(self, error: ProviderError) {
        let _ = self.tx.send(Item::Failed(error)).await;
    }

    /// Ends the stream: the reply is complete.
    pub async fn finish(self) {
        let _ = self.tx.send(Item::Done).await;
    }
}

impl ReplyStream {
    /// A connected pair: the provider's task keeps the sender.
    pub fn channel() -> (ReplySender, Self) {
        let (tx, rx) = mpsc::channel(CAPACITY);
        (
            ReplySender { tx },
            Self {
                rx,
                task: None,
                collector: Collector::default(),
                attempts: 0,
                ended: false,
                failure: None,
                reported: false,
                limit: None,
            },
        )
    }

    /// Reads at most `bytes` of text and tool-call arguments: past them the
    /// stream ends (the producing task is stopped, so the connection
    /// closes), the last piece cut to fit, and the reply is marked
    /// [`truncated`](Reply::truncated). A server that ignores `max_tokens`
    /// cannot fill the host's memory or the session file.
    pub fn limit(mut self, bytes: usize) -> Self {
        self.limit = Some(bytes);
        self
    }

    /// The task producing the events: it is stopped when the stream is
    /// dropped.
    pub fn with_task(mut self, task: JoinHandle<()>) -> Self {
        self.task = Some(task);
        self
    }

    /// A stream that fails at once.
    pub fn failed(error: ProviderError) -> Self {
        let (_, mut stream) = Self::channel();
        stream.ended = true;
        stream.failure = Some(error);
        stream
    }

    /// The next event, `None` once the reply is complete, or the error
    /// that ended it (returned once; `None` after).
    pub async fn next(&mut self) -> Option<Result<Event, ProviderError>> {
        if self.ended {
            if self.reported {
                return None;
            }
            self.reported = true;
            return self.failure.clone().map(Err);
        }
        loop {
            let item = self.rx.recv().await;
            match item {
                Some(Item::Attempt(n)) => self.attempts = n,
                Some(Item::Event(event)) => {
                    let (event, over) = match self.limit {
                        Some(limit) => self.within(limit, event),
                        None => (event, false),
                    };
                    self.collector.push(&event);
                    if over {
                        self.cut_here();
                    }
                    return Some(Ok(event));
                }
                Some(Item::Done) => {
                    self.ended = true;
                    return None;
                }
                Some(Item::Failed(error)) => return Some(Err(self.end_with(error))),
                None => return Some(Err(self.end_with(ProviderError::Aborted))),
            }
        }
    }

    fn end_with(&mut self, error: ProviderError) -> ProviderError {
        self.ended = true;
        self.reported = true;
        self.failure = Some(error.clone());
        error
    }

    /// Reads the rest of the stream and returns the whole reply, or the
    /// error that ended it (also when [`next`](Self::next) has already
    /// returned that error).
    pub async fn collect(mut self) -> Result<Reply, ProviderError> {
        while self.next().await.is_some() {}
        if let Some(error) = self.failure.take() {
            return Err(error);
        }
        let collector = std::mem::take(&mut self.collector);
        Ok(collector.reply(self.attempts.max(1)))
    }

    /// `event` as far as it fits in `limit`, and whether it had to be
    /// cut.
    fn within(&self, limit: usize, event: Event) -> (Event, bool) {
        let room = limit.saturating_sub(self.collector.bytes());
        let cut = |text: String| -> (String, bool) {
            if text.len() <= room {
                return (text, false);
            }
            let mut end = room;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            (text[..end].to_owned(), true)
        };
        match event {
            Event::Text(text) => {
                let (text, over) = cut(text);
                (Event::Text(text), over)
            }
            Event::ToolCallArguments { index, fragment } => {
                let (fragment, over) = cut(fragment);
                (Event::ToolCallArguments { index, fragment }, over)
            }
            other => (other, false),
        }
    }

    /// Ends the stream at the byte limit: the reply is marked truncated and
    /// the producing task stopped (the connection closes).
    fn cut_here(&mut self) {
        self.collector.truncate();
        self.ended = true;
        self.rx.close();
        if let Some(task) = &self.task {
            task.abort();
        }
        tracing::warn!(
            target: "foveal::provider",
            limit = self.limit.unwrap_or(0),
            "the reply was cut: the server sent more than a reply may hold"
        );
    }

    /// Requests made so far: 1 plus the retries.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The producing task, to check that dropping the stream ends it.
    #[cfg(test)]
    pub(super) fn abort_handle(&self) -> Option<tokio::task::AbortHandle> {
        self.task.as_ref().map(JoinHandle::abort_handle)
    }
}

impl Drop for ReplyStream {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

impl fmt::Debug for ReplyStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplyStream")
            .field("attempts", &self.attempts)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}
