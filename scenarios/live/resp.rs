//! Redis's wire format (RESP), as much as a proxy that watches a client needs: one whole
//! value read off a stream as the bytes it came in (forwarded unchanged), and those bytes in
//! words for the record (`SET lock:settle:m_1 A#1 NX PX 30000`, `OK`, `(nil)`, `ERR ...`).
//! Commands a client sends inline (a line of words) are read as one value too.

use std::io::{self, BufRead};

/// The longest value read: a bulk string of a refund store's script is a few KB.
const MAX_BULK: usize = 64 << 20;

/// Reads one whole RESP value (a command or a reply) and returns its bytes, or `None` at the
/// end of the stream before a value began.
pub fn read_value(reader: &mut impl BufRead) -> io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    if reader.read_until(b'\n', &mut bytes)? == 0 {
        return Ok(None);
    }
    let line = line_of(&bytes)?;
    match line.first() {
        Some(b'+' | b'-' | b':' | b',' | b'#' | b'(' | b'_') => {}
        Some(b'$' | b'=' | b'!') => read_bulk(reader, number(&line[1..])?, &mut bytes)?,
        Some(b'*' | b'>' | b'~' | b'%') => {
            let count = number(&line[1..])?;
            let count = if line[0] == b'%' { count.saturating_mul(2) } else { count };
            for _ in 0..count.max(0) {
                let inner = read_value(reader)?.ok_or_else(|| bad("the stream ended inside an array"))?;
                bytes.extend_from_slice(&inner);
            }
        }
        // an inline command: the line itself
        _ => {}
    }
    Ok(Some(bytes))
}

fn read_bulk(reader: &mut impl BufRead, length: i64, bytes: &mut Vec<u8>) -> io::Result<()> {
    if length < 0 {
        return Ok(()); // a nil bulk string: `$-1`
    }
    let length = usize::try_from(length).map_err(|_| bad("a bulk length out of range"))?;
    if length > MAX_BULK {
        return Err(bad("a bulk string longer than 64 MB"));
    }
    let start = bytes.len();
    bytes.resize(start + length + 2, 0);
    reader.read_exact(&mut bytes[start..])?;
    Ok(())
}

/// The line without its `\r\n`.
fn line_of(bytes: &[u8]) -> io::Result<&[u8]> {
    bytes
        .strip_suffix(b"\r\n")
        .or_else(|| bytes.strip_suffix(b"\n"))
        .ok_or_else(|| bad("a line without its end"))
}

fn number(text: &[u8]) -> io::Result<i64> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| bad("a length that is not a number"))
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("not Redis's protocol: {what}"))
}

/// A value's bytes in words: a command's words joined by spaces, a reply as a client
/// prints it.
pub fn words(bytes: &[u8]) -> String {
    parts(bytes).join(" ")
}

/// A value's bytes as its parts: a command's arguments one by one (a script's text is one
/// part, however many spaces it holds), a reply's values.
pub fn parts(bytes: &[u8]) -> Vec<String> {
    let mut reader = io::Cursor::new(bytes);
    let mut out = Vec::new();
    if words_of(&mut reader, &mut out).is_err() {
        return vec![String::from_utf8_lossy(bytes).trim_end().to_owned()];
    }
    out
}

fn words_of(reader: &mut io::Cursor<&[u8]>, out: &mut Vec<String>) -> io::Result<()> {
    let mut bytes = Vec::new();
    reader.read_until(b'\n', &mut bytes)?;
    let line = line_of(&bytes)?;
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match line.first() {
        Some(b'+' | b':' | b',' | b'#' | b'(') => out.push(text(&line[1..])),
        Some(b'-') => out.push(format!("(error) {}", text(&line[1..]))),
        Some(b'_') => out.push("(nil)".into()),
        Some(b'$' | b'=' | b'!') => match number(&line[1..])? {
            length if length < 0 => out.push("(nil)".into()),
            length => {
                let mut body = vec![0; length as usize + 2];
                io::Read::read_exact(reader, &mut body)?;
                out.push(text(&body[..length as usize]));
            }
        },
        Some(b'*' | b'>' | b'~' | b'%') => {
            let count = number(&line[1..])?;
            if count < 0 {
                out.push("(nil)".into());
            }
            let count = if line[0] == b'%' { count.saturating_mul(2) } else { count };
            for _ in 0..count.max(0) {
                words_of(reader, out)?;
            }
        }
        _ => out.push(text(line)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(bytes: &[u8]) -> Vec<Vec<u8>> {
        let mut reader = io::BufReader::new(bytes);
        std::iter::from_fn(|| read_value(&mut reader).unwrap()).collect()
    }

    #[test]
    fn each_value_is_read_whole_as_it_came_and_told_in_words() {
        let set = b"*6\r\n$3\r\nSET\r\n$17\r\nlock:settle:m_100\r\n$3\r\nA#1\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n30000\r\n";
        let stream = [&set[..], b"+OK\r\n", b"$-1\r\n", b":21\r\n", b"-ERR wrong\r\n", b"PING\r\n"].concat();
        let values = read_all(&stream);
        assert_eq!(values.len(), 6);
        assert_eq!(values[0], set.to_vec(), "forwarded unchanged");
        let told: Vec<String> = values.iter().map(|v| words(v)).collect();
        assert_eq!(
            told,
            ["SET lock:settle:m_100 A#1 NX PX 30000", "OK", "(nil)", "21", "(error) ERR wrong", "PING"]
        );
    }

    #[test]
    fn a_bulk_string_may_hold_line_ends_and_a_stream_cut_short_is_an_error() {
        let script = b"*3\r\n$4\r\nEVAL\r\n$12\r\nreturn 1\r\n--\r\n$1\r\n0\r\n";
        assert_eq!(words(&read_all(script)[0]), "EVAL return 1\r\n-- 0");
        let cut = b"*2\r\n$3\r\nGET\r\n";
        assert!(read_value(&mut io::BufReader::new(&cut[..])).is_err());
    }
}
