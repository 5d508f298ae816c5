//! A clock the live run (and a test) can move on a real redis-server: the server runs
//! under Debian's libfaketime, which reads the clock's offset from a file on every time
//! call, so that a `redis-clock-jump` of the plan moves the server's clock and nothing
//! else's.
//!
//! Debian's redis-server is linked with an allocator library that reads the clock while
//! libfaketime is still starting, and the server then hangs ("Cannot recover from
//! unexpected recursive calls to clock_gettime()"). So the server is given a stand-in
//! under that library's name: a few lines of C, built here with the machine's C compiler,
//! that answer the allocator's control calls with "not available" (the server only reads
//! statistics through them), while memory itself comes from the C library's allocator.

use crate::live::server::redis_server_binary;
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

/// A clock file and what a server started on it needs; clones share the file, which is
/// removed with the last of them.
#[derive(Clone)]
pub struct FakeClock {
    _dir: std::sync::Arc<ClockDir>,
    /// The file libfaketime reads the server's offset from.
    pub offset: PathBuf,
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

impl FakeClock {
    /// A clock at the real time, for a server started with `env`; or what the machine
    /// lacks for one (libfaketime, a redis-server, a C compiler).
    pub fn new(label: &str) -> Result<FakeClock, String> {
        let faketime = library().ok_or("no libfaketime (install Debian's faketime)")?;
        let server = redis_server_binary().ok_or("no redis-server")?;
        let dir = std::env::temp_dir().join(format!("fencesim-faketime-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        // the clock's file is read at every time call of the servers and written at every
        // move of a controlled run: in memory where the machine has a place for it
        let shared = Path::new("/dev/shm").join(format!("fencesim-clock-{label}-{}", std::process::id()));
        let in_memory = shared.parent().is_some_and(Path::is_dir) && std::fs::create_dir_all(&shared).is_ok();
        let offset = if in_memory { shared.join("offset") } else { dir.join("offset") };
        let dirs = std::sync::Arc::new(ClockDir(vec![dir.clone(), shared]));
        let mut clock = FakeClock { _dir: dirs, offset: offset.clone(), env: Vec::new() };
        set_offset_ms(&offset, 0)?;
        let mut env = vec![
            ("LD_PRELOAD".to_owned(), faketime.display().to_string()),
            ("FAKETIME_TIMESTAMP_FILE".to_owned(), offset.display().to_string()),
            ("FAKETIME_NO_CACHE".to_owned(), "1".to_owned()),
            ("DONT_FAKE_MONOTONIC".to_owned(), "1".to_owned()),
        ];
        if let Some(allocator) = allocator_of(&server) {
            let source = dir.join("stand_in.c");
            std::fs::write(&source, STAND_IN)
                .map_err(|e| format!("cannot write {}: {e}", source.display()))?;
            let built = Command::new("cc")
                .args(["-shared", "-fPIC", "-o"])
                .arg(dir.join(&allocator))
                .arg(&source)
                .status();
            if !built.is_ok_and(|status| status.success()) {
                return Err("no C compiler to build the allocator's stand-in with (install gcc)".into());
            }
            env.push(("LD_LIBRARY_PATH".to_owned(), dir.display().to_string()));
        }
        clock.env = env;
        Ok(clock)
    }

    /// The server's clock stands `ms` ahead of the real one from its next time call.
    pub fn set_offset_ms(&self, ms: u64) -> Result<(), String> {
        set_offset_ms(&self.offset, ms)
    }

    /// The server's clock stops at `second` (below 60) past 2030-01-01 00:00:00, on the
    /// exact second, from its next time call: every command then runs at that millisecond.
    pub fn freeze_at_s(&self, second: u64) -> Result<(), String> {
        if second >= 60 {
            return Err(format!("{second}: a second of the first minute"));
        }
        let text = format!("2030-01-01 00:00:{second:02}\n");
        std::fs::write(&self.offset, text).map_err(|e| format!("{}: {e}", self.offset.display()))
    }
}

/// Stops the clock of `path` at `at_us` microseconds since the Unix epoch, to the
/// microsecond (a reader rounding down reads the microsecond itself), from its readers'
/// next time call (written whole: a reader never sees half
/// a time).
pub fn freeze_at_us(path: &Path, at_us: u64) -> Result<(), String> {
    let (days, of_day) = ((at_us / 86_400_000_000) as i64, at_us % 86_400_000_000);
    let (year, month, day) = civil_from_days(days);
    let (s, micros) = (of_day / 1_000_000, of_day % 1_000_000);
    // half a microsecond more: the library reads the fraction as a floating-point number,
    // and an exact microsecond came back one short in a quarter of the readings
    let text = format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{micros:06}500\n",
        s / 3600,
        s / 60 % 60,
        s % 60
    );
    let fresh = path.with_extension("next");
    std::fs::write(&fresh, text).map_err(|e| format!("{}: {e}", fresh.display()))?;
    std::fs::rename(&fresh, path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The calendar date of day `days` since 1970-01-01 (the proleptic Gregorian calendar).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Removes what libfaketime left of process `pid` once it has ended: the library makes a
/// shared-memory object and a semaphore named after each process it starts in, and only a
/// process that exits on its own removes them (a killed server's stay in `/dev/shm`).
pub fn forget_process(pid: u32) {
    for name in [format!("faketime_shm_{pid}"), format!("sem.faketime_sem_{pid}")] {
        let _ = std::fs::remove_file(Path::new("/dev/shm").join(name));
    }
}

/// Writes an offset of `ms` ahead of the real clock to libfaketime's file `path`.
pub fn set_offset_ms(path: &Path, ms: u64) -> Result<(), String> {
    let text = format!("+{}.{:03}\n", ms / 1000, ms % 1000);
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Moves the clock of `path` on by `by_ms` more (a jump fired by any process of the run).
pub fn jump_ms(path: &Path, by_ms: u64) -> Result<(), String> {
    let now = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let seconds: f64 = now.trim().trim_start_matches('+').parse().unwrap_or(0.0);
    set_offset_ms(path, (seconds * 1000.0).round() as u64 + by_ms)
}

/// The directories of a clock's file and the allocator's stand-in.
struct ClockDir(Vec<PathBuf>);

impl Drop for ClockDir {
    fn drop(&mut self) {
        for dir in &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frozen_time_is_written_as_its_calendar_date() {
        let path = std::env::temp_dir().join(format!("fencesim-freeze-{}", std::process::id()));
        let cases = [
            (1_893_456_000_000_000, "2030-01-01 00:00:00.000000500"),
            (1_893_546_125_000_007, "2030-01-02 01:02:05.000007500"),
            (951_782_400_123_456, "2000-02-29 00:00:00.123456500"),
        ];
        for (at_us, told) in cases {
            freeze_at_us(&path, at_us).expect("written");
            assert_eq!(std::fs::read_to_string(&path).expect("read").trim(), told);
        }
        let _ = std::fs::remove_file(&path);
    }
}
