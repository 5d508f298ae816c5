//! `fencesim agreement`, as docs/live.md quotes it, on a short measurement: failures drawn
//! afresh from seeds no committed file uses, each played live, the verdicts compared and
//! the files kept as replay files. Needs redis-server and PostgreSQL; without them it says
//! loudly that it skipped, and with `CI` set it fails instead.

mod support;

use fencesim::files::replay_file::ReplayFile;
use fencesim::live::postgres::postgres_program;
use support::redis_server;

#[test]
fn agreement_draws_fresh_failures_plays_them_live_and_keeps_them() {
    let test = "agreement";
    if !redis_server::available(test) {
        return;
    }
    if postgres_program("initdb").is_none() {
        assert!(std::env::var_os("CI").is_none(), "{test}: CI is set and no PostgreSQL was found");
        eprintln!("SKIPPED {test}: no PostgreSQL on this machine (install Debian's postgresql)");
        return;
    }
    let out = std::env::temp_dir().join(format!("fencesim-agreement-{}", std::process::id()));
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_fencesim"))
        .args(["agreement", "--failures", "2", "--postgres", "1", "--out"])
        .arg(&out)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert_eq!(run.status.code(), Some(0), "{said}");
    // the two makers first in turn: ttl-only under each gateway; three plays in all
    let played: Vec<&str> =
        said.lines().filter(|l| l.contains(" sqlite ") || l.contains(" postgres ")).collect();
    assert_eq!(played.len(), 3, "{said}");
    assert!(said.contains("agreement: SQLite ") && said.contains(" of 2, PostgreSQL "), "{said}");
    let rows: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("agreement.json")).unwrap()).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    let committed =
        fencesim::search::fresh::committed_seeds(std::path::Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
    for row in rows {
        let file = ReplayFile::load(std::path::Path::new(row["file"].as_str().unwrap())).unwrap();
        assert!(!committed.contains(&file.seed), "a fresh seed: {}", file.seed);
        assert!(!file.violations.is_empty(), "a failure: {row}");
        let simulated: Vec<&str> =
            row["simulated"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        assert_eq!(simulated, file.violations, "the simulated verdict is the file's");
        for played in row["played"].as_array().unwrap() {
            // each play names what live broke; only one that differs says where the
            // histories part
            let live: Vec<&str> =
                played["live"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
            if live == simulated {
                assert!(played["parted"].is_null(), "{played}");
            }
        }
    }
    std::fs::remove_dir_all(&out).unwrap();
}
