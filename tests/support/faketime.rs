//! A clock a test can move on a real redis-server: the server runs under Debian's
//! libfaketime, which reads the clock's offset from a file on every time call.
//!
//! Debian's redis-server is linked with an allocator library that reads the clock while
//! libfaketime is still starting, and the server then hangs ("Cannot recover from
//! unexpected recursive calls to clock_gettime()"). So the server is given a stand-in
//! under that library's name: a few lines of C, built here with the machine's C compiler,
//! that answer the allocator's control calls with "not available" (the server only reads
//! statistics through them), while memory itself comes from the C library's allocator.

#![allow(dead_code)] // each test binary uses part of it

use fencesim::live::server::redis_server_binary;
use std::path::{Path, PathBuf};
use std::process::Command;

const STAND_IN: &str = r#"
#include <errno.h>
#include <stddef.h>
int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
    (void)name; (void)oldp; (void)oldlenp; (void)newp; (void)newlen;
    return ENOENT;
}
void malloc_stats_print(void (*write_cb)(void *, const char *), void *opaque, const char *opts) {
    (void)write_cb; (void)opaque; (void)opts;
}
size_t nallocx(size_t size, int flags) { (void)flags; return size; }
"#;

pub struct FakeClock {
    dir: PathBuf,
    offset: PathBuf,
    /// What to add to the server's environment.
    pub env: Vec<(String, String)>,
}

/// libfaketime, if the machine has it.
fn library() -> Option<PathBuf> {
    let lib = Path::new("/usr/lib");
    let arches = std::fs::read_dir(lib).ok()?.filter_map(|entry| Some(entry.ok()?.path()));
    arches.map(|arch| arch.join("faketime/libfaketime.so.1")).find(|path| path.is_file())
}

/// The allocator library redis-server is linked with (its file name), if any.
fn allocator_of(server: &Path) -> Option<String> {
    let listed = Command::new("ldd").arg(server).output().ok()?;
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    listed
        .lines()
        .map(str::trim)
        .find(|line| line.contains("malloc"))
        .and_then(|line| line.split(' ').next())
        .map(str::to_owned)
}

fn skip(test: &str, why: &str) -> Option<FakeClock> {
    assert!(std::env::var_os("CI").is_none(), "{test}: CI is set and {why}");
    eprintln!("SKIPPED {test}: {why}");
    None
}

impl FakeClock {
    /// A clock at the real time, or `None` (having said why) when the machine lacks
    /// libfaketime, a redis-server or a C compiler and `CI` is not set.
    pub fn new(test: &str) -> Option<FakeClock> {
        let Some(faketime) = library() else {
            return skip(test, "no libfaketime (install Debian's faketime)");
        };
        let Some(server) = redis_server_binary() else { return skip(test, "no redis-server") };
        let dir = std::env::temp_dir().join(format!("fencesim-faketime-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let offset = dir.join("offset");
        let mut clock = FakeClock { dir: dir.clone(), offset: offset.clone(), env: Vec::new() };
        clock.set_offset_s(0);
        let mut env = vec![
            ("LD_PRELOAD".to_owned(), faketime.display().to_string()),
            ("FAKETIME_TIMESTAMP_FILE".to_owned(), offset.display().to_string()),
            ("FAKETIME_NO_CACHE".to_owned(), "1".to_owned()),
            ("DONT_FAKE_MONOTONIC".to_owned(), "1".to_owned()),
        ];
        if let Some(allocator) = allocator_of(&server) {
            let source = dir.join("stand_in.c");
            std::fs::write(&source, STAND_IN).expect("the stand-in's source");
            let built = Command::new("cc")
                .args(["-shared", "-fPIC", "-o"])
                .arg(dir.join(&allocator))
                .arg(&source)
                .status();
            if !built.is_ok_and(|status| status.success()) {
                return skip(test, "no C compiler to build the allocator's stand-in with (install gcc)");
            }
            env.push(("LD_LIBRARY_PATH".to_owned(), dir.display().to_string()));
        }
        clock.env = env;
        Some(clock)
    }

    /// The server's clock stands `seconds` ahead of the real one from its next time call.
    pub fn set_offset_s(&self, seconds: u64) {
        std::fs::write(&self.offset, format!("+{seconds}\n")).expect("the offset file");
    }

    /// The server's clock stops at `second` (below 60) past 2030-01-01 00:00:00, on the
    /// exact second, from its next time call: every command then runs at that millisecond.
    pub fn freeze_at_s(&self, second: u64) {
        assert!(second < 60, "a second of the first minute");
        std::fs::write(&self.offset, format!("2030-01-01 00:00:{second:02}\n")).expect("the offset file");
    }
}

impl Drop for FakeClock {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
