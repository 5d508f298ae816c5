//! How a live run sees Redis expire a lease: keyspace notifications, written as they
//! arrive into an event file of their own. A notification names the key, not the value;
//! the merge works out whose lease it ended.

use crate::live::log::EventLog;
use crate::live::redis::connect;
use fencesim_sim::EventKind;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Writes each key expiry Redis announces into the run's expiry file, from a thread of
/// its own, until dropped.
pub struct ExpiryWatch {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The database number a connection talks to (its notifications' channel names it).
fn database_of(con: &mut redis::Connection) -> Result<String, String> {
    let info: String =
        redis::cmd("CLIENT").arg("INFO").query(con).map_err(|e| format!("CLIENT INFO: {e}"))?;
    Ok(info.split(' ').find_map(|part| part.strip_prefix("db=")).unwrap_or("0").to_owned())
}

type Ready = std::sync::mpsc::Sender<Result<(), String>>;

/// Listens on `con` and records each expiry until told to stop (`true`) or the
/// connection is lost (`false`: the server went away, a restart).
/// The first subscription says on `ready` whether it succeeded.
fn listen(
    con: &mut redis::Connection,
    db: &str,
    log: &EventLog,
    stop: &AtomicBool,
    ready: &mut Option<Ready>,
) -> Result<bool, String> {
    con.set_read_timeout(Some(Duration::from_millis(20))).map_err(|e| e.to_string())?;
    let mut pubsub = con.as_pubsub();
    let subscribed = pubsub.subscribe(format!("__keyevent@{db}__:expired")).map_err(|e| e.to_string());
    if let Some(ready) = ready.take() {
        let _ = ready.send(subscribed.clone());
    }
    subscribed?;
    while !stop.load(Ordering::Relaxed) {
        match pubsub.get_message() {
            Ok(message) => {
                let key: String = message.get_payload().unwrap_or_default();
                log.record(EventKind::LeaseExpired { instance: 0, key, value: String::new(), epoch: None });
            }
            Err(e) if e.is_timeout() => {}
            Err(_) => return Ok(false),
        }
    }
    Ok(true)
}

impl ExpiryWatch {
    /// Subscribes before it returns (so that no expiry of the run is missed), and again
    /// whenever the server comes back from a restart.
    pub fn start(url: &str, log: EventLog) -> Result<ExpiryWatch, String> {
        let mut con = connect(url)?;
        let db = database_of(&mut con)?;
        let stop = Arc::new(AtomicBool::new(false));
        let (ready, subscribed) = std::sync::mpsc::channel();
        let (stopped, url) = (stop.clone(), url.to_owned());
        let thread = std::thread::spawn(move || {
            let mut first = Some(ready);
            let mut con = Some(con);
            while !stopped.load(Ordering::Relaxed) {
                let Some(mut live) = con.take().or_else(|| connect(&url).ok()) else {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                };
                if !matches!(listen(&mut live, &db, &log, &stopped, &mut first), Ok(false)) {
                    return;
                }
            }
        });
        let subscribed = subscribed.recv().map_err(|e| e.to_string()).and_then(|r| r);
        let watch = ExpiryWatch { stop, thread: Some(thread) };
        subscribed.map_err(|e| format!("cannot subscribe to Redis's expiry notifications: {e}"))?;
        Ok(watch)
    }
}

impl Drop for ExpiryWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
