//! A real headless Chromium for a test, driven over its DevTools pipe (no port is
//! opened): a page is loaded from disk, everything it logs, throws or requests is kept,
//! keys are pressed and the mouse clicked through the browser's input events, expressions
//! evaluated and screenshots taken (of the whole page or of the viewport). Without Chromium on the
//! machine a test says loudly that it skipped, and fails instead when `CI` is set. The
//! browser runs in its own temporary profile and is killed when the handle drops, even
//! when the test fails.

#![allow(dead_code)] // each test binary uses part of it

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// Debian's Chromium, or another on the PATH.
fn binary() -> Option<PathBuf> {
    let names = ["chromium", "chromium-browser", "google-chrome"];
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).flat_map(|dir| names.map(|name| dir.join(name))).find(|file| file.is_file())
}

pub struct Chromium {
    child: Child,
    profile: PathBuf,
    to_browser: std::fs::File,
    from_browser: Receiver<Value>,
    next_id: u64,
    session: String,
    /// Every event the page's session reported, in order.
    pub events: Vec<Value>,
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // close-on-exec: no other child the tests start inherits an end
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0, "a pipe");
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

impl Chromium {
    /// Starts a browser, or `None` (having said why) when the machine has none and `CI`
    /// is not set.
    pub fn start(test: &str) -> Option<Chromium> {
        let Some(binary) = binary() else {
            assert!(std::env::var_os("CI").is_none(), "{test}: CI is set and no Chromium was found");
            eprintln!("SKIPPED {test}: no Chromium on this machine (install Debian's chromium)");
            return None;
        };
        Some(Chromium::launch(&binary, test).unwrap_or_else(|e| panic!("{test}: {e}")))
    }

    fn launch(binary: &Path, test: &str) -> Result<Chromium, String> {
        let profile = std::env::temp_dir().join(format!("fencesim-chromium-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&profile);
        let (commands_read, commands_write) = pipe();
        let (replies_read, replies_write) = pipe();
        let (fd3, fd4) = (
            std::os::fd::AsRawFd::as_raw_fd(&commands_read),
            std::os::fd::AsRawFd::as_raw_fd(&replies_write),
        );
        let mut command = Command::new(binary);
        command
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"])
            .args(["--disable-background-networking", "--disable-component-update", "--disable-sync"])
            .args(["--remote-debugging-pipe", "--window-size=1400,1800", "--hide-scrollbars"])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // the DevTools pipe is the child's descriptors 3 (commands in) and 4 (replies out)
        unsafe {
            command.pre_exec(move || {
                // out of the way first, so that neither end is overwritten by the other
                let (high3, high4) =
                    (libc::fcntl(fd3, libc::F_DUPFD, 10), libc::fcntl(fd4, libc::F_DUPFD, 10));
                if high3 < 0 || high4 < 0 || libc::dup2(high3, 3) < 0 || libc::dup2(high4, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        drop((commands_read, replies_write));
        let (sender, from_browser) = channel();
        let replies = std::fs::File::from(replies_read);
        std::thread::spawn(move || {
            for message in BufReader::new(replies).split(0).map_while(Result::ok) {
                let Ok(value) = serde_json::from_slice::<Value>(&message) else { continue };
                if sender.send(value).is_err() {
                    break;
                }
            }
        });
        let to_browser = std::fs::File::from(commands_write);
        let mut browser = Chromium {
            child,
            profile,
            to_browser,
            from_browser,
            next_id: 0,
            session: String::new(),
            events: vec![],
        };
        browser.open_page()?;
        Ok(browser)
    }

    /// Sends a command (to the page's session, once there is one) and waits for its answer.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        let mut bytes = serde_json::to_vec(&message).expect("JSON");
        bytes.push(0);
        self.to_browser.write_all(&bytes).map_err(|e| format!("the browser went away: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let reply = self.from_browser.recv_timeout(left).map_err(|_| format!("no answer to {method}"))?;
            if reply["id"] == json!(id) {
                return match reply.get("error") {
                    Some(error) => Err(format!("{method}: {error}")),
                    None => Ok(reply["result"].clone()),
                };
            }
            if reply.get("method").is_some() {
                self.events.push(reply);
            }
        }
    }

    fn open_page(&mut self) -> Result<(), String> {
        let target = self.call("Target.createTarget", json!({ "url": "about:blank" }))?;
        let attached =
            self.call("Target.attachToTarget", json!({ "targetId": target["targetId"], "flatten": true }))?;
        self.session = attached["sessionId"].as_str().ok_or("no session")?.to_owned();
        for domain in ["Runtime.enable", "Log.enable", "Network.enable", "Page.enable"] {
            self.call(domain, json!({}))?;
        }
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": 1400, "height": 1800, "deviceScaleFactor": 1, "mobile": false }),
        )?;
        Ok(())
    }

    /// Evaluates `expression` in the page and returns its value.
    pub fn eval(&mut self, expression: &str) -> Result<Value, String> {
        let result = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
        )?;
        if let Some(thrown) = result.get("exceptionDetails") {
            return Err(format!("{expression} threw: {thrown}"));
        }
        Ok(result["result"]["value"].clone())
    }

    /// Loads `file` and waits until `ready` (an expression) is true. What the page
    /// loaded before said is forgotten: check it before loading another.
    pub fn load(&mut self, file: &Path, ready: &str) -> Result<(), String> {
        self.events.clear();
        let url = format!(
            "file://{}",
            file.canonicalize().map_err(|e| format!("{}: {e}", file.display()))?.display()
        );
        self.call("Page.navigate", json!({ "url": url }))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if self.eval(ready).unwrap_or(Value::Null) == json!(true) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!("{} was not ready ({ready}) within 30 s", file.display()))
    }

    /// Presses and releases a key (`ArrowRight`, with its key code).
    pub fn press(&mut self, key: &str, code: u32) -> Result<(), String> {
        for kind in ["keyDown", "keyUp"] {
            let params = json!({ "type": kind, "key": key, "code": key, "windowsVirtualKeyCode": code });
            self.call("Input.dispatchKeyEvent", params)?;
        }
        Ok(())
    }

    /// Presses and releases a key that types a character (`+`, with its key code).
    pub fn type_key(&mut self, key: &str, code: u32) -> Result<(), String> {
        let down = json!({ "type": "keyDown", "key": key, "text": key, "windowsVirtualKeyCode": code });
        self.call("Input.dispatchKeyEvent", down)?;
        let up = json!({ "type": "keyUp", "key": key, "windowsVirtualKeyCode": code });
        self.call("Input.dispatchKeyEvent", up)?;
        Ok(())
    }

    /// A left click as a person makes it: the button pressed and released at (`x`, `y`)
    /// in the viewport's CSS pixels, through the browser's input pipeline.
    pub fn click(&mut self, x: f64, y: f64) -> Result<(), String> {
        for kind in ["mousePressed", "mouseReleased"] {
            let params =
                json!({ "type": kind, "x": x, "y": y, "button": "left", "buttons": 1, "clickCount": 1 });
            self.call("Input.dispatchMouseEvent", params)?;
        }
        Ok(())
    }

    /// Turns the mouse wheel at (`x`, `y`) by `dx`, `dy` pixels.
    pub fn wheel(&mut self, x: f64, y: f64, dx: f64, dy: f64) -> Result<(), String> {
        let params = json!({ "type": "mouseWheel", "x": x, "y": y, "deltaX": dx, "deltaY": dy });
        self.call("Input.dispatchMouseEvent", params)?;
        Ok(())
    }

    /// Sets the viewport to `width` x `height` CSS pixels.
    pub fn viewport(&mut self, width: u32, height: u32) -> Result<(), String> {
        let params = json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": false });
        self.call("Emulation.setDeviceMetricsOverride", params)?;
        Ok(())
    }

    /// A PNG of the whole page.
    pub fn screenshot(&mut self) -> Result<Vec<u8>, String> {
        self.capture(false)
    }

    /// A PNG of the whole page, or (`viewport_only`) of what the viewport shows.
    pub fn capture(&mut self, viewport_only: bool) -> Result<Vec<u8>, String> {
        use base64::Engine as _;
        let mut params = json!({ "format": "png", "captureBeyondViewport": !viewport_only });
        if viewport_only {
            let size = self.eval("({ width: innerWidth, height: innerHeight })")?;
            params["clip"] =
                json!({ "x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1 });
        }
        let shot = self.call("Page.captureScreenshot", params)?;
        let data = shot["data"].as_str().ok_or("no screenshot")?;
        base64::engine::general_purpose::STANDARD.decode(data).map_err(|e| e.to_string())
    }

    /// What the page said on its console, threw, or logged as an error or warning, and
    /// every request it made for anything but the file itself: each a line.
    pub fn complaints(&self, file_url_prefix: &str) -> Vec<String> {
        let mut said = Vec::new();
        for event in &self.events {
            let params = &event["params"];
            match event["method"].as_str().unwrap_or_default() {
                "Runtime.consoleAPICalled" => {
                    said.push(format!("console.{}: {}", params["type"], params["args"]))
                }
                "Runtime.exceptionThrown" => said.push(format!("uncaught: {}", params["exceptionDetails"])),
                "Log.entryAdded"
                    if matches!(params["entry"]["level"].as_str(), Some("error" | "warning")) =>
                {
                    said.push(format!("log: {}", params["entry"]))
                }
                "Network.requestWillBeSent" => {
                    let url = params["request"]["url"].as_str().unwrap_or_default();
                    if !url.starts_with(file_url_prefix) {
                        said.push(format!("request: {url}"));
                    }
                }
                _ => {}
            }
        }
        said
    }
}

/// Stops the browser and every process it started (its own process group: a renderer or a
/// helper left running writes into the profile after it was removed), then removes the
/// profile.
impl Drop for Chromium {
    fn drop(&mut self) {
        let group = self.child.id() as i32;
        unsafe { libc::kill(-group, libc::SIGKILL) };
        let _ = self.child.wait();
        let deadline = Instant::now() + Duration::from_secs(5);
        // kill(-group, 0) fails once no process of the group is left
        while unsafe { libc::kill(-group, 0) } == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}
