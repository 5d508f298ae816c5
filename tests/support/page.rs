//! What a timeline page carries: its views, gzipped JSON in base64 inside the page.

#![allow(dead_code)] // each test binary uses part of it

use base64::Engine as _;
use std::io::Read as _;
use std::path::Path;

/// The data a page carries (gzip, then base64), as JSON text.
pub fn page_data(page: &Path) -> String {
    let html = std::fs::read_to_string(page).unwrap();
    let start = html.find("type=\"application/gzip\">").expect("the page's data") + 24;
    let encoded = &html[start..start + html[start..].find("</script>").unwrap()];
    let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(&bytes[..]).read_to_string(&mut text).unwrap();
    text
}
