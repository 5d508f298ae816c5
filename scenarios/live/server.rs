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

/// Why a server started is not ready.
enum Ready {
    /// Its process ended (its port was taken, most often).
    Exited,
    /// It did not answer in time.
    Silent(String),
}

impl Ready {
    fn said(self, port: u16) -> String {
        match self {
            Ready::Exited => format!("redis-server exited at once on port {port}: is the port taken?"),
            Ready::Silent(why) => why,
        }
    }
}

/// The process id of the redis-server serving on `port` (its `INFO server`), if one
/// answers within `wait` and serves commands (a `PING` answered `PONG`, not `LOADING`
/// while it reads its append-only file back).
fn answering_pid(port: u16, wait: Duration) -> Option<u32> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), wait).ok()?;
    stream.set_read_timeout(Some(wait)).ok()?;
    stream.write_all(b"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n").ok()?;
    let mut said = Vec::new();
    let mut chunk = [0u8; 4096];
    while said.len() < 65_536 {
        let n = stream.read(&mut chunk).ok().filter(|&n| n > 0)?;
        said.extend_from_slice(&chunk[..n]);
        if said.len() >= 7 && !said.starts_with(b"+PONG\r\n") {
            return None;
        }
        if let Some(pid) = pid_in(&said) {
            return Some(pid);
        }
    }
    None
}

/// The `process_id` field of an `INFO` reply, once its whole line has come.
fn pid_in(said: &[u8]) -> Option<u32> {
    let text = String::from_utf8_lossy(said);
    let rest = &text[text.find("process_id:")? + "process_id:".len()..];
    rest[..rest.find("\r\n")?].parse().ok()
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
        let args: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
        // A port found free can be taken before the server binds it (by the source port of
        // any connection the machine opens meanwhile): the server then exits at once, and
        // another port is tried. A server dropped removes its directory, so each try makes it.
        let mut taken = Vec::new();
        for _ in 0..5 {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
            let port = free_port()?;
            let child = spawn(&binary, port, &dir, &args, env)?;
            let (dir, binary, args, env) = (dir.clone(), binary.clone(), args.clone(), env.to_vec());
            let mut server = RedisServer { child, dir, binary, args, env, port };
            match server.wait_until_ready() {
                Ok(()) => return Ok(server),
                Err(Ready::Exited) => taken.push(port.to_string()),
                Err(Ready::Silent(why)) => return Err(why),
            }
        }
        Err(format!("redis-server exited at once on each port tried ({}): is each taken?", taken.join(", ")))
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
        self.wait_until_ready().map_err(|why| why.said(self.port))?;
        Ok((while_down, down.elapsed()))
    }

    /// Waits until the server's own process answers on its port: a process of another
    /// that listens there is not taken for it, and a server that exited is said at once.
    fn wait_until_ready(&mut self) -> Result<(), Ready> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return Err(Ready::Exited);
            }
            // A short wait, tried again until the deadline: a loaded machine costs tries,
            // not the start.
            if answering_pid(self.port, Duration::from_millis(200)) == Some(self.child.id()) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Err(Ready::Silent(format!("redis-server on port {} did not answer within 10 s", self.port)))
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
        self.wait_until_ready().map_err(|why| why.said(self.port))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the machine has a redis-server; says loudly when it does not (and fails
    /// under CI, which installs one).
    fn have_redis(test: &str) -> Option<PathBuf> {
        let binary = redis_server_binary();
        if binary.is_none() {
            assert!(std::env::var_os("CI").is_none(), "{test}: CI is set and no redis-server was found");
            eprintln!("SKIPPED {test}: no redis-server on this machine (install Debian's redis-server)");
        }
        binary
    }

    /// A port taken between its choice and the server's start: the server is said to have
    /// exited at once, and what listens there is not taken for it (it never answers).
    #[test]
    fn a_server_whose_port_was_taken_is_said_to_have_exited_not_taken_for_the_taker() {
        let Some(binary) = have_redis("a_server_whose_port_was_taken") else { return };
        let taker = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taker.local_addr().unwrap().port();
        let dir = std::env::temp_dir().join(format!("fencesim-redis-taken-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let child = spawn(&binary, port, &dir, &[], &[]).unwrap();
        let mut server = RedisServer { child, dir, binary, args: Vec::new(), env: Vec::new(), port };
        let started = Instant::now();
        assert!(matches!(server.wait_until_ready(), Err(Ready::Exited)), "the server on a taken port exits");
        assert!(started.elapsed() < Duration::from_secs(5), "said at once: {:?}", started.elapsed());
        assert_eq!(
            answering_pid(port, Duration::from_millis(200)),
            None,
            "a listener that does not speak is no server of ours"
        );
    }

    /// A started server answers on its port as its own process. Asked once, so given the
    /// time a loaded machine takes (a 200 ms wait failed under CI's parallel tests).
    #[test]
    fn a_started_server_answers_as_its_own_process() {
        if have_redis("a_started_server_answers_as_its_own_process").is_none() {
            return;
        }
        let server = RedisServer::start("own-process", &[]).unwrap();
        assert_eq!(answering_pid(server.port, Duration::from_secs(10)), Some(server.child.id()));
    }
}
