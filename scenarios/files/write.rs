//! Files are written whole: to a temporary name beside the target first, then renamed into
//! place, so that a reader never finds half a file.

use std::path::Path;

/// Writes `contents` to `path` whole. The directory must exist.
pub fn write_whole(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().map_or_else(|| "file".into(), |name| name.to_string_lossy());
    let temporary = path.with_file_name(format!(".{name}.tmp"));
    // a write that fails (a full disk) leaves nothing behind, not even its temporary file
    std::fs::write(&temporary, contents).and_then(|()| std::fs::rename(&temporary, path)).inspect_err(|_| {
        let _ = std::fs::remove_file(&temporary);
    })
}

/// Writes a report whole at `relative` under `root`, creating its directory.
pub fn write_report(root: &Path, relative: &str, text: &str) -> Result<(), String> {
    let path = root.join(relative);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    write_whole(&path, text.as_bytes()).map_err(|e| format!("cannot write {}: {e}", path.display()))
}
