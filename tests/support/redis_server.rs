//! A real redis-server for a test: on a free loopback port, in its own temporary
//! directory, stopped (and its directory removed) when the handle is dropped, even when
//! the test fails. Without a redis-server on the machine a test says loudly that it
//! skipped, and fails instead when `CI` is set.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    child: Child,
    dir: PathBuf,
    binary: PathBuf,
    /// The persistence arguments it was started with, kept for a restart.
    persistence: Vec<String>,
    pub port: u16,
}

/// The redis-server binary, if the machine has one.
fn binary() -> Option<PathBuf> {
    let candidates = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).map(|dir| dir.join("redis-server")).collect::<Vec<_>>())
        .unwrap_or_default();
    candidates.into_iter().chain([PathBuf::from("/usr/bin/redis-server")]).find(|path| path.is_file())
}

fn spawn(binary: &PathBuf, port: u16, dir: &PathBuf, persistence: &[String]) -> Child {
    Command::new(binary)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
        .args(persistence)
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server starts")
}

/// A port nobody listens on now, on loopback.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    listener.local_addr().expect("its address").port()
}

impl RedisServer {
    /// Starts a server with no persistence, or `None` (having said why) when the machine
    /// has no redis-server and `CI` is not set.
    pub fn start(test: &str) -> Option<RedisServer> {
        RedisServer::start_with(test, &["--appendonly", "no"])
    }

    /// Starts a server with these persistence arguments (`--appendonly yes --appendfsync
    /// always`, say); snapshots are always off.
    pub fn start_with(test: &str, persistence: &[&str]) -> Option<RedisServer> {
        let Some(binary) = binary() else {
            assert!(std::env::var_os("CI").is_none(), "{test}: CI is set and no redis-server was found");
            eprintln!("SKIPPED {test}: no redis-server on this machine (install Debian's redis-server)");
            return None;
        };
        let dir = std::env::temp_dir().join(format!("fencesim-redis-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let persistence: Vec<String> = persistence.iter().map(|arg| arg.to_string()).collect();
        let port = free_port();
        let child = spawn(&binary, port, &dir, &persistence);
        let server = RedisServer { child, dir, binary, persistence, port };
        server.wait_until_ready();
        Some(server)
    }

    /// Kills the process (`SIGKILL`: nothing is flushed on the way out) and starts it again
    /// on the same port and directory. Returns what a client saw while it was down and how
    /// long it took to answer again.
    pub fn kill_and_restart(&mut self) -> (redis::RedisResult<redis::Value>, Duration) {
        self.child.kill().expect("the server is killed");
        self.child.wait().expect("and reaped");
        let down = Instant::now();
        let while_down = self.connect().and_then(|mut con| redis::cmd("PING").query(&mut con));
        self.child = spawn(&self.binary, self.port, &self.dir, &self.persistence);
        self.wait_until_ready();
        (while_down, down.elapsed())
    }

    fn wait_until_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(mut con) = self.connect() {
                if redis::cmd("PING").query::<String>(&mut con).is_ok() {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server on port {} did not answer within 10 s", self.port);
    }

    pub fn connect(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?.get_connection()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
