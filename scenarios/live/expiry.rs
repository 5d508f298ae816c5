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

impl ExpiryWatch {
    pub fn start(url: &str, log: EventLog) -> Result<ExpiryWatch, String> {
        let mut con = connect(url)?;
        let info: String =
            redis::cmd("CLIENT").arg("INFO").query(&mut con).map_err(|e| format!("CLIENT INFO: {e}"))?;
        let db = info.split(' ').find_map(|part| part.strip_prefix("db=")).unwrap_or("0").to_owned();
        con.set_read_timeout(Some(Duration::from_millis(20))).map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let (ready, subscribed) = std::sync::mpsc::channel();
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut pubsub = con.as_pubsub();
            let _ =
                ready.send(pubsub.subscribe(format!("__keyevent@{db}__:expired")).map_err(|e| e.to_string()));
            while !stopped.load(Ordering::Relaxed) {
                match pubsub.get_message() {
                    Ok(message) => {
                        let key: String = message.get_payload().unwrap_or_default();
                        log.record(EventKind::LeaseExpired {
                            instance: 0,
                            key,
                            value: String::new(),
                            epoch: None,
                        });
                    }
                    Err(e) if e.is_timeout() => {}
                    Err(_) => return,
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
