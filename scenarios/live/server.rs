//! A real redis-server of the live run's own: on a free loopback port, in its own
//! temporary directory, stopped (and its directory removed) when the handle is dropped,
//! whatever ended the run. The conformance tests start theirs the same way.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How a server is stopped before a restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// `SIGKILL`: nothing is flushed on the way out.
    Kill,
    /// `SHUTDOWN NOSAVE`: no snapshot is written, the append-only file is flushed.
    ShutdownNoSave,
}

pub struct RedisServer {
    child: Child,
    dir: PathBuf,
    binary: PathBuf,
    /// The arguments it was started with beyond port, address and directory, kept for a restart.
    args: Vec<String>,
    /// The environment it was started with beyond the inherited one, kept for a restart.
    env: Vec<(String, String)>,
    pub port: u16,
}

/// The redis-server binary, if the machine has one.
pub fn redis_server_binary() -> Option<PathBuf> {
    let candidates = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).map(|dir| dir.join("redis-server")).collect::<Vec<_>>())
        .unwrap_or_default();
    candidates.into_iter().chain([PathBuf::from("/usr/bin/redis-server")]).find(|path| path.is_file())
}

fn spawn(
    binary: &Path,
    port: u16,
    dir: &Path,
    args: &[String],
    env: &[(String, String)],
) -> Result<Child, String> {
    Command::new(binary)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
        .args(args)
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()))
}

/// A port nobody listens on now, on loopback.
pub fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no loopback port is free: {e}"))?;
    Ok(listener.local_addr().map_err(|e| format!("no loopback port is free: {e}"))?.port())
}

impl RedisServer {
    /// Starts a server with these arguments (`--appendonly yes`, say; snapshots are always
    /// off) in a fresh directory named after `label`.
    pub fn start(label: &str, args: &[&str]) -> Result<RedisServer, String> {
        RedisServer::start_in(label, args, &[])
    }

    /// Starts a server with these arguments and these environment variables added.
    pub fn start_in(label: &str, args: &[&str], env: &[(String, String)]) -> Result<RedisServer, String> {
        let binary = redis_server_binary()
            .ok_or("no redis-server on this machine: install Debian's redis-server, or pass --redis URL")?;
        let dir = std::env::temp_dir().join(format!("fencesim-redis-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
        let port = free_port()?;
        let env = env.to_vec();
        let child = spawn(&binary, port, &dir, &args, &env)?;
        let server = RedisServer { child, dir, binary, args, env, port };
        server.wait_until_ready()?;
        Ok(server)
    }

    /// Stops the server as `how` says and starts it again on the same port and directory.
    /// Returns what a client saw while it was down and how long it took to answer again.
    pub fn stop_and_restart(
        &mut self,
        how: Stop,
    ) -> Result<(redis::RedisResult<redis::Value>, Duration), String> {
        match how {
            Stop::Kill => {
                let _ = self.child.kill();
            }
            Stop::ShutdownNoSave => {
                let mut con = self.connect().map_err(|e| format!("SHUTDOWN NOSAVE: {e}"))?;
                // The server closes the connection as it goes: no answer comes back.
                let _ = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<redis::Value>(&mut con);
            }
        }
        self.ended();
        let down = Instant::now();
        let while_down = self.connect().and_then(|mut con| redis::cmd("PING").query(&mut con));
        self.child = spawn(&self.binary, self.port, &self.dir, &self.args, &self.env)?;
        self.wait_until_ready()?;
        Ok((while_down, down.elapsed()))
    }

    fn wait_until_ready(&self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(mut con) = self.connect() {
                if redis::cmd("PING").query::<String>(&mut con).is_ok() {
                    return Ok(());
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Err(format!("redis-server on port {} did not answer within 10 s", self.port))
    }

    /// Waits for the server's process to end, and clears what a clock of the run's left of it.
    fn ended(&mut self) {
        let _ = self.child.wait();
        if !self.env.is_empty() {
            crate::live::faketime::forget_process(self.child.id());
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Whether the server's process has ended (a fault killed it).
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Starts the server again on its port and directory, with what its files kept.
    pub fn start_again(&mut self) -> Result<(), String> {
        self.ended();
        self.child = spawn(&self.binary, self.port, &self.dir, &self.args, &self.env)?;
        self.wait_until_ready()
    }

    /// The server's own directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn connect(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url())?.get_connection()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        self.ended();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
