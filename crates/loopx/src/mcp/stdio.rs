//! The MCP server's stdio framing: one JSON-RPC message a line in, one a
//! line out, and an answer to every line that is not a message.
//!
//! Owns: reading stdin a line at a time with a bound on what is kept
//! ([`MAX_LINE`]: a longer line is read to its end, dropped and answered),
//! telling a message from a line that is not one, answering the latter
//! (not JSON or not UTF-8: -32700 parse error; JSON that is not a
//! JSON-RPC message, or too long: -32600 invalid request, with the line's
//! `id` when it has a readable one), and writing every outgoing line whole.
//! A client never waits for an answer that does not come. The one
//! exception is JSON-RPC's own: a notification (`method` without `id`) is
//! never answered, even one the server cannot read. Blank lines are
//! framing, not messages.
//!
//! Does not own the protocol (rmcp's service loop) or any tool.

use rmcp::model::{ErrorData, RequestId};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use serde_json::error::Category;
use std::sync::Arc;
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::{mpsc, Mutex};

/// The longest line kept: a longer one is read to its end and answered
/// with an error, never buffered.
pub const MAX_LINE: usize = 8 * 1024 * 1024;

/// How much of stdin one read takes: few hops to the blocking pool, even
/// for a line much longer than [`MAX_LINE`].
const READ_BUFFER: usize = 1024 * 1024;

type Output = Arc<Mutex<Box<dyn AsyncWrite + Send + Unpin>>>;

/// The server's transport over this process's stdin and stdout. A task
/// reads stdin and answers what is not a message itself; messages reach
/// the service through a channel, so a receive cancelled by the service
/// loses nothing.
pub struct Stdio {
    messages: mpsc::Receiver<RxJsonRpcMessage<RoleServer>>,
    output: Output,
}

impl Stdio {
    /// Start reading stdin. Call inside the runtime that serves.
    pub fn start() -> Self {
        let output: Output = Arc::new(Mutex::new(Box::new(tokio::io::stdout())));
        let (send, messages) = mpsc::channel(16);
        let input = BufReader::with_capacity(READ_BUFFER, tokio::io::stdin());
        tokio::spawn(read(input, send, output.clone()));
        Stdio { messages, output }
    }
}

impl rmcp::transport::Transport<RoleServer> for Stdio {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let output = self.output.clone();
        async move { write(&output, &item).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        self.messages.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.messages.close();
        self.output.lock().await.flush().await
    }
}

/// One line, whole, then flushed: the lock keeps lines from interleaving.
async fn write(output: &Output, message: &TxJsonRpcMessage<RoleServer>) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message)?;
    line.push(b'\n');
    let mut output = output.lock().await;
    output.write_all(&line).await?;
    output.flush().await
}

/// Read every line of `input` until its end (or until the service stops
/// taking messages): messages go to `messages`, the rest is answered.
async fn read<R: AsyncBufRead + Unpin>(
    mut input: R,
    messages: mpsc::Sender<RxJsonRpcMessage<RoleServer>>,
    output: Output,
) {
    let mut line = Vec::new();
    loop {
        let length = match next_line(&mut input, &mut line).await {
            Ok(Some(length)) => length,
            Ok(None) => return,
            Err(error) => {
                eprintln!("loopx mcp: cannot read the client's input ({error}): stopping");
                return;
            }
        };
        let answer = match length > MAX_LINE {
            true => Line::Answer(too_long(length)),
            false => classify(&line),
        };
        match answer {
            Line::Message(message) => {
                if messages.send(*message).await.is_err() {
                    return;
                }
            }
            Line::Answer(reply) => {
                if write(&output, &reply).await.is_err() {
                    return;
                }
            }
            Line::Nothing => {}
        }
    }
}

/// The next line of `input` into `line` (without its newline; empty when
/// longer than [`MAX_LINE`]), and its full length; `None` at the end. A
/// last line without a newline is a line.
async fn next_line<R: AsyncBufRead + Unpin>(
    input: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<Option<usize>> {
    line.clear();
    let mut length = 0usize;
    let mut read_any = false;
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            return Ok(read_any.then_some(length));
        }
        read_any = true;
        let end = available.iter().position(|&b| b == b'\n');
        let part = &available[..end.unwrap_or(available.len())];
        length = length.saturating_add(part.len());
        if length <= MAX_LINE {
            line.extend_from_slice(part);
        } else {
            line.clear();
        }
        let used = part.len() + usize::from(end.is_some());
        input.consume(used);
        if end.is_some() {
            return Ok(Some(length));
        }
    }
}

/// What one line of input is.
enum Line {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Not a message: this answers it.
    Answer(Box<TxJsonRpcMessage<RoleServer>>),
    /// Blank, or a notification the server cannot read (never answered).
    Nothing,
}

fn classify(line: &[u8]) -> Line {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let text = match std::str::from_utf8(line) {
        Ok(text) => text,
        Err(error) => {
            return Line::Answer(answer(
                ErrorData::parse_error(
                    format!(
                        "the line is not UTF-8 (an invalid byte after {} bytes): send each JSON-RPC message as one line of UTF-8 JSON",
                        error.valid_up_to()
                    ),
                    None,
                ),
                None,
            ))
        }
    };
    if text.trim().is_empty() {
        return Line::Nothing;
    }
    let error = match serde_json::from_str::<RxJsonRpcMessage<RoleServer>>(text) {
        Ok(message) => return Line::Message(Box::new(message)),
        Err(error) => error,
    };
    match error.classify() {
        Category::Syntax | Category::Eof | Category::Io => Line::Answer(answer(
            ErrorData::parse_error(
                format!("the line is not JSON ({error}): send each JSON-RPC message as one line of JSON"),
                None,
            ),
            None,
        )),
        Category::Data => {
            // JSON, so it may name what it asked: answer by its id, and
            // leave a notification (no id) unanswered, as JSON-RPC says.
            let value: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
            let id = value.get("id");
            if id.is_none() && value.get("method").is_some() {
                return Line::Nothing;
            }
            let id = id.and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
            Line::Answer(answer(
                ErrorData::invalid_request(
                    format!("not a JSON-RPC 2.0 message loopx mcp can read: {error}"),
                    None,
                ),
                id,
            ))
        }
    }
}

fn too_long(length: usize) -> Box<TxJsonRpcMessage<RoleServer>> {
    answer(
        ErrorData::invalid_request(
            format!(
                "the line is {length} bytes, longer than the {MAX_LINE} bytes loopx mcp reads: it was dropped unread; send smaller messages"
            ),
            None,
        ),
        None,
    )
}

fn answer(error: ErrorData, id: Option<RequestId>) -> Box<TxJsonRpcMessage<RoleServer>> {
    Box::new(TxJsonRpcMessage::<RoleServer>::error(error, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(line: &[u8]) -> Option<i32> {
        match classify(line) {
            Line::Answer(reply) => {
                let value = serde_json::to_value(&reply).unwrap();
                Some(value["error"]["code"].as_i64().unwrap() as i32)
            }
            _ => None,
        }
    }

    #[test]
    fn what_is_not_a_message_is_answered_by_its_kind() {
        assert_eq!(code(b"hello"), Some(-32700));
        assert_eq!(code(b"{\"a\": \"\xff\"}"), Some(-32700));
        let deep = "[".repeat(5000) + &"]".repeat(5000);
        assert_eq!(code(deep.as_bytes()), Some(-32700));
        assert_eq!(
            code(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":7}"),
            Some(-32600)
        );
        assert_eq!(code(b"   "), None);
        assert_eq!(code(b"{\"jsonrpc\":\"2.0\",\"method\":7}"), None);
        let ping = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r";
        assert!(matches!(classify(ping), Line::Message(_)));
    }

    #[tokio::test]
    async fn a_line_past_the_bound_is_read_to_its_end_and_not_kept() {
        let mut text = vec![b'x'; MAX_LINE + 10];
        text.extend_from_slice(b"\nnext\nlast");
        let mut input = BufReader::with_capacity(4096, &text[..]);
        let mut line = Vec::new();
        assert_eq!(
            next_line(&mut input, &mut line).await.unwrap(),
            Some(MAX_LINE + 10)
        );
        assert!(line.is_empty());
        assert_eq!(next_line(&mut input, &mut line).await.unwrap(), Some(4));
        assert_eq!(line, b"next");
        assert_eq!(next_line(&mut input, &mut line).await.unwrap(), Some(4));
        assert_eq!(line, b"last");
        assert_eq!(next_line(&mut input, &mut line).await.unwrap(), None);
    }
}
