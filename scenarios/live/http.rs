//! The HTTP server of the run's own services (the gateway, the queue): a thread for each
//! connection, which reads its requests one after another and answers each before it reads
//! the next, keeping the connection open as long as the client does. Each request is
//! answered on its connection's thread, so a call held there (a take waiting for a job, a
//! refund call held for its turn) holds nothing but its own connection.
//!
//! Written by hand (docs/decisions.md): the server the services used before handed each
//! connection to a pool of threads, and its pool could leave a new connection unread for
//! as long as the connections taken up before it stayed open; a worker program that keeps
//! its connections open (Node.js's `fetch` does) then never heard its first take answered.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// What answers each request: called on the request's connection's thread.
pub type Handler = Arc<dyn Fn(HttpRequest) + Send + Sync>;

/// A request's method, as the services tell them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Other,
}

/// One request, answered with `respond` (dropped unanswered, it is answered `500`).
pub struct HttpRequest {
    method: Method,
    url: String,
    headers: Vec<(String, String)>,
    body: String,
    out: Option<TcpStream>,
    keep_alive: bool,
}

impl HttpRequest {
    pub fn method(&self) -> Method {
        self.method
    }

    /// The path and query the request asked for.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A header's value, its name in any case.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(field, _)| field.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The request's body as text (empty when it has none).
    pub fn body(&self) -> &str {
        &self.body
    }

    /// Answers with `status` and, when given, a JSON body.
    pub fn respond(mut self, status: u16, json: Option<Vec<u8>>) {
        self.write(status, json);
    }

    fn write(&mut self, status: u16, json: Option<Vec<u8>>) {
        let Some(mut out) = self.out.take() else { return };
        let body = json.unwrap_or_default();
        let kind = if body.is_empty() { "" } else { "content-type: application/json\r\n" };
        let connection = if self.keep_alive { "keep-alive" } else { "close" };
        let head = format!(
            "HTTP/1.1 {status} {}\r\ncontent-length: {}\r\n{kind}connection: {connection}\r\n\r\n",
            reason(status),
            body.len()
        );
        let _ = out.write_all(head.as_bytes()).and_then(|()| out.write_all(&body)).and_then(|()| out.flush());
    }
}

impl Drop for HttpRequest {
    fn drop(&mut self) {
        self.write(500, None);
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        410 => "Gone",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// A listening server; it stops taking connections when dropped (a connection open then
/// ends when its client closes it).
pub struct HttpServer {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl HttpServer {
    /// Listens on `port` of loopback (0: any free port).
    pub fn start(port: u16, handler: Handler) -> std::io::Result<HttpServer> {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let handler = handler.clone();
                std::thread::spawn(move || serve(stream, &handler));
            }
        });
        Ok(HttpServer { port, stop, thread: Some(thread) })
    }

    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // the accepting thread wakes for one more connection, sees the stop, and ends
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Reads a connection's requests one after another, each answered before the next is read.
fn serve(stream: TcpStream, handler: &Handler) {
    let _ = stream.set_nodelay(true);
    let Ok(out) = stream.try_clone() else { return };
    let mut reader = BufReader::new(stream);
    loop {
        let Ok(Some(mut request)) = read_request(&mut reader) else { return };
        let Ok(answer_on) = out.try_clone() else { return };
        request.out = Some(answer_on);
        let keep_alive = request.keep_alive;
        handler(request);
        if !keep_alive {
            return;
        }
    }
}

/// The next request on the connection; `None` when the client closed it.
fn read_request(reader: &mut BufReader<TcpStream>) -> std::io::Result<Option<HttpRequest>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (method, url, version) = (parts.next(), parts.next(), parts.next());
    let (Some(method), Some(url), Some(version)) = (method, url, version) else {
        return Err(std::io::Error::other(format!("not an HTTP request line: {line:?}")));
    };
    let method = match method {
        "GET" => Method::Get,
        "POST" => Method::Post,
        _ => Method::Other,
    };
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 {
            return Ok(None);
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((field, value)) = header.split_once(':') {
            headers.push((field.trim().to_owned(), value.trim().to_owned()));
        }
    }
    let field = |name: &str| {
        headers.iter().find(|(f, _)| f.eq_ignore_ascii_case(name)).map(|(_, v)| v.to_ascii_lowercase())
    };
    let keep_alive = match (field("connection"), version) {
        (Some(value), _) if value.contains("close") => false,
        (Some(value), _) if value.contains("keep-alive") => true,
        (_, version) => version == "HTTP/1.1",
    };
    let body = match (field("transfer-encoding"), field("content-length")) {
        (Some(coding), _) if coding.contains("chunked") => chunked(reader)?,
        (_, Some(length)) => {
            let length: usize = length.parse().map_err(std::io::Error::other)?;
            let mut body = vec![0; length];
            reader.read_exact(&mut body)?;
            body
        }
        _ => Vec::new(),
    };
    let body = String::from_utf8_lossy(&body).into_owned();
    Ok(Some(HttpRequest { method, url: url.to_owned(), headers, body, out: None, keep_alive }))
}

/// A body sent in chunks: each a hexadecimal size line and its bytes, the last of size 0.
fn chunked(reader: &mut BufReader<TcpStream>) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size)?;
        let size = size.trim().split(';').next().unwrap_or_default();
        let size = usize::from_str_radix(size, 16).map_err(std::io::Error::other)?;
        if size == 0 {
            // the trailer's end: an empty line (trailers are not used by the services)
            let mut end = String::new();
            reader.read_line(&mut end)?;
            return Ok(body);
        }
        // the chunk and the line end after it
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk)?;
        body.extend_from_slice(&chunk[..size]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo() -> HttpServer {
        let handler: Handler = Arc::new(|request: HttpRequest| {
            let said = format!("{{\"url\":{:?},\"body\":{:?}}}", request.url(), request.body());
            match request.url() {
                "/silent" => drop(request),
                _ => request.respond(200, Some(said.into_bytes())),
            }
        });
        HttpServer::start(0, handler).expect("a server")
    }

    /// Requests one after another on one kept-alive connection are each answered, and many
    /// connections kept open at once do not keep a new one from being read.
    #[test]
    fn kept_alive_connections_are_each_read_and_answered() {
        let server = echo();
        let agent = ureq::AgentBuilder::new().build();
        let base = format!("http://127.0.0.1:{}", server.port());
        let held: Vec<TcpStream> = (0..12)
            .map(|_| TcpStream::connect(("127.0.0.1", server.port())).expect("a connection"))
            .collect();
        for n in 0..5 {
            let answer =
                agent.post(&format!("{base}/take/{n}")).send_string("{\"receipt\": 3}").expect("answered");
            assert_eq!(answer.status(), 200);
            let text = answer.into_string().expect("a body");
            assert_eq!(text, format!("{{\"url\":\"/take/{n}\",\"body\":\"{{\\\"receipt\\\": 3}}\"}}"));
        }
        drop(held);
        let unanswered = agent.get(&format!("{base}/silent")).call();
        assert!(
            matches!(unanswered, Err(ureq::Error::Status(500, _))),
            "a request dropped unanswered gets 500"
        );
    }
}
