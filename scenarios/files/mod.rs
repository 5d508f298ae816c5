//! The files a run leaves for later: the replay file format (written, loaded, checked) and
//! files written whole. A room of its own, below the searches, the live arm and the telling,
//! which all write or read them.

pub mod replay_file;
pub mod write;
