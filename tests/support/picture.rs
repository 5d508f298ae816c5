//! README's picture, and which page it was taken of. A screenshot is not compared byte for
//! byte (it depends on the machine's browser and fonts); instead the picture is written
//! with a fingerprint of the page it shows, so that a page regenerated since tells that
//! the picture is of an older one.

#![allow(dead_code)] // each test binary uses part of it

/// The worked example's page as a person first sees it, at 1400 x 900.
pub const PICTURE: &str = "reports/worked-example.png";
/// The page the picture is taken of.
pub const PAGE: &str = "reports/worked-example.html";
/// The fingerprint of the page the committed picture was taken of.
pub const SOURCE: &str = "reports/worked-example.png.source";
/// The command that takes the picture again.
pub const RETAKE: &str = "FENCESIM_WRITE_SCREENSHOT=1 cargo test --test browser screenshot";

/// What `SOURCE` holds for a page of these bytes.
pub fn fingerprint(page: &[u8]) -> String {
    format!("{PAGE} xxh64 {:016x}\n", twox_hash::XxHash64::oneshot(0, page))
}
