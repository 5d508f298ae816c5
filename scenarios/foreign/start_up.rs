//! When a copy's start-up is over, in a controlled run. What a copy does before the story
//! begins (its connections, its client's checks) goes on as it comes; the story begins once
//! no copy has sent Redis or the database anything for a while. A client that connects in
//! the background (the article's TypeScript worker does, beside its first ask for a job)
//! sends its first words a moment after the copy asked the queue, or later on a busy
//! machine, so the while was a fixed 100 ms. It is shorter when the machine can tell: a
//! copy whose every thread waits in the kernel and has not run between two looks has
//! nothing more to send until something answers it, and after 10 ms of quiet that is
//! enough (a take asked before the story begins waits 20 ms before its `204`, so that a
//! copy polling for a job sleeps between its asks). The fixed wait stays for what cannot be told (a thread that computes, a
//! machine without `/proc`).

use std::time::{Duration, Instant};

/// How long the copies must have sent nothing when the machine cannot tell they sleep.
pub const START_UP_STILL: Duration = Duration::from_millis(100);

/// How long the copies must have sent nothing when every thread of theirs sleeps.
const QUIET: Duration = Duration::from_millis(10);

/// How often the copies are looked at.
const LOOK_EVERY: Duration = Duration::from_millis(3);

/// Every thread of the processes in these process groups: how long they have run in all
/// (nanoseconds), if every one waits in the kernel (asleep, or stopped); `None` if any
/// runs, or the machine does not say.
pub fn asleep(groups: &[libc::pid_t]) -> Option<u64> {
    if groups.is_empty() {
        return None;
    }
    let mut ran_ns = 0;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else {
            continue;
        };
        let Some((_, group)) = stat(&format!("/proc/{pid}/stat")) else { continue };
        if !groups.contains(&group) {
            continue;
        }
        // a process or a thread that ends while it is looked at is passed over
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        for task in tasks.flatten() {
            let path = task.path();
            let Some((state, _)) = stat(&path.join("stat").display().to_string()) else { continue };
            if !matches!(state, 'S' | 'T' | 't' | 'I' | 'Z' | 'X') {
                return None;
            }
            let schedstat = std::fs::read_to_string(path.join("schedstat")).ok()?;
            ran_ns += schedstat.split_whitespace().next()?.parse::<u64>().ok()?;
        }
    }
    Some(ran_ns)
}

/// A process's or thread's state letter and process group, from its `stat` file.
fn stat(path: &str) -> Option<(char, libc::pid_t)> {
    let text = std::fs::read_to_string(path).ok()?;
    // the command's name, in parentheses, may hold spaces: the fields follow its last ')'
    let mut fields = text.get(text.rfind(')')? + 1..)?.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let group = fields.nth(1)?.parse().ok()?;
    Some((state, group))
}

/// Returns once the copies' start-up is over: `last` (when a copy last sent Redis or the
/// database anything during its start-up, or `None` when it is over by other means) lies
/// `START_UP_STILL` back, or `QUIET` back with `sleeping` saying twice in a row, the same,
/// that the copies sleep; or once `at_most` has passed.
pub fn wait_until_still(
    last: impl Fn() -> Option<Instant>,
    sleeping: impl Fn() -> Option<u64>,
    at_most: Duration,
) {
    let asked = Instant::now();
    let mut before: Option<u64> = None;
    while asked.elapsed() < at_most {
        let Some(quiet) = last().map(|at| at.max(asked).elapsed()) else { return };
        if quiet >= START_UP_STILL {
            return;
        }
        let now = sleeping();
        if quiet >= QUIET && now.is_some() && now == before {
            return;
        }
        before = now;
        std::thread::sleep(LOOK_EVERY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleeping_process_is_seen_asleep_and_a_busy_one_is_not() {
        use std::os::unix::process::CommandExt;
        let mut sleeper =
            std::process::Command::new("sleep").arg("5").process_group(0).spawn().expect("sleep starts");
        let mut busy = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .process_group(0)
            .spawn()
            .expect("sh starts");
        std::thread::sleep(Duration::from_millis(50));
        let (sleeper_group, busy_group) = (sleeper.id() as libc::pid_t, busy.id() as libc::pid_t);
        let first = asleep(&[sleeper_group]);
        assert!(first.is_some(), "a process in sleep(1) is asleep");
        assert_eq!(asleep(&[sleeper_group]), first, "and does not run between two looks");
        assert_eq!(asleep(&[busy_group]), None, "a process in a loop is not asleep");
        assert_eq!(asleep(&[sleeper_group, busy_group]), None, "nor are the two together");
        for child in [&mut sleeper, &mut busy] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
