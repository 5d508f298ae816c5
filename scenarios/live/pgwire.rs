//! PostgreSQL's wire format (protocol 3.0), as much as a proxy that watches a client needs:
//! one whole message read off a stream as the bytes it came in (forwarded unchanged), and
//! what the messages that run statements and answer them say, for the record: a query's
//! text, a prepared statement's text, a Bind's parameters, a result's rows, a completion's
//! tag, an error's SQLSTATE and message. Every other message is passed on without reading.
//!
//! A message is a type byte, a 4-byte big-endian length that counts itself, and a body; the
//! start-up packets a client opens with (StartupMessage, SSLRequest, GSSENCRequest,
//! CancelRequest) have no type byte, and a 4-byte code where the body begins.

use std::io::{self, BufRead};

/// The start-up code of a client that asks for TLS.
pub const SSL_REQUEST: i32 = 80_877_103;
/// The start-up code of a client that asks for GSSAPI encryption.
pub const GSSENC_REQUEST: i32 = 80_877_104;
/// The start-up code of a request, on a connection of its own, to cancel a running query.
pub const CANCEL_REQUEST: i32 = 80_877_102;

/// The longest message read: anything longer is not a client or a server of PostgreSQL's
/// (the server refuses values past 1 GiB itself).
const MAX_MESSAGE: usize = 1 << 30;
/// The longest start-up packet, as the server's own limit.
const MAX_STARTUP: usize = 10_000;

/// One message as it came off the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The type byte; 0 for a start-up packet, which has none.
    pub kind: u8,
    /// Every byte of the message, type byte and length included: what is forwarded.
    pub bytes: Vec<u8>,
}

impl Message {
    /// The message after its type byte and length.
    pub fn body(&self) -> &[u8] {
        let header = if self.kind == 0 { 4 } else { 5 };
        self.bytes.get(header..).unwrap_or_default()
    }

    /// A start-up packet's code: the protocol version (3.0 is 196608) or a request's code.
    pub fn startup_code(&self) -> Option<i32> {
        Body(self.body()).i32()
    }
}

/// Reads one start-up packet (no type byte), or `None` at the end of the stream before one
/// began. A length out of range is an `InvalidData` error ([`is_malformed`]).
pub fn read_startup(reader: &mut impl BufRead) -> io::Result<Option<Message>> {
    let mut length = [0; 4];
    if reader.fill_buf()?.is_empty() {
        return Ok(None);
    }
    reader.read_exact(&mut length)?;
    let bytes = read_rest(reader, &length, 8, MAX_STARTUP)?;
    Ok(Some(Message { kind: 0, bytes }))
}

/// Reads one typed message, or `None` at the end of the stream before one began. A stream
/// that ends inside a message is an `UnexpectedEof` error; a length below 4 or past 1 GiB
/// is an `InvalidData` error ([`is_malformed`]).
pub fn read_message(reader: &mut impl BufRead) -> io::Result<Option<Message>> {
    let mut kind = [0; 1];
    if reader.read(&mut kind)? == 0 {
        return Ok(None);
    }
    let mut length = [0; 4];
    reader.read_exact(&mut length)?;
    let mut bytes = vec![kind[0]];
    bytes.extend(read_rest(reader, &length, 4, MAX_MESSAGE)?);
    Ok(Some(Message { kind: kind[0], bytes }))
}

/// The length bytes and the rest of the message they announce.
fn read_rest(reader: &mut impl BufRead, length: &[u8; 4], least: usize, most: usize) -> io::Result<Vec<u8>> {
    let announced = i32::from_be_bytes(*length);
    let size = usize::try_from(announced).unwrap_or(0);
    if size < least || size > most {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("malformed message: a length of {announced}"),
        ));
    }
    let mut bytes = vec![0; size];
    bytes[..4].copy_from_slice(length);
    reader.read_exact(&mut bytes[4..])?;
    Ok(bytes)
}

/// Whether a read failed on bytes that are not PostgreSQL's protocol (rather than on a
/// connection that closed).
pub fn is_malformed(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::InvalidData
}

/// A message a client sends, as far as the record needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frontend {
    /// 'Q': one or more statements in the simple protocol.
    Query(String),
    /// 'P': a statement prepared under a name ("" for the unnamed one), with the type oids
    /// the client gave its parameters (0 where it left the server to infer one).
    Parse { name: String, sql: String, types: Vec<u32> },
    /// 'B': a prepared statement bound to parameters in a portal.
    Bind(Bind),
    /// 'D': a statement (`b'S'`) or a portal (`b'P'`) to describe.
    Describe { what: u8, name: String },
    /// 'E': a portal to run, up to `max_rows` rows (0 for all).
    Execute { portal: String, max_rows: i32 },
    /// 'C': a statement (`b'S'`) or a portal (`b'P'`) to close.
    Close { what: u8, name: String },
    /// 'S': the end of an extended-protocol batch.
    Sync,
    /// Anything else: 'H' Flush, 'X' Terminate, 'p' a password, 'd'/'c'/'f' copy data,
    /// or a body that does not read (the server answers that itself).
    Other,
}

/// A Bind: which statement, into which portal, with what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bind {
    pub portal: String,
    pub statement: String,
    /// The parameters' format codes (0 text, 1 binary), as [`format_of`] reads them.
    pub param_formats: Vec<i16>,
    /// Each parameter's bytes; `None` for NULL.
    pub params: Vec<Option<Vec<u8>>>,
    /// The result columns' format codes, as [`format_of`] reads them.
    pub result_formats: Vec<i16>,
}

/// What a client's message says.
pub fn frontend(message: &Message) -> Frontend {
    read_frontend(message.kind, &mut Body(message.body())).unwrap_or(Frontend::Other)
}

fn read_frontend(kind: u8, body: &mut Body) -> Option<Frontend> {
    Some(match kind {
        b'Q' => Frontend::Query(body.text()?),
        b'P' => Frontend::Parse { name: body.text()?, sql: body.text()?, types: body.oids()? },
        b'B' => Frontend::Bind(bind(body)?),
        b'D' => Frontend::Describe { what: body.u8()?, name: body.text()? },
        b'E' => Frontend::Execute { portal: body.text()?, max_rows: body.i32()? },
        b'C' => Frontend::Close { what: body.u8()?, name: body.text()? },
        b'S' => Frontend::Sync,
        _ => return None,
    })
}

fn bind(body: &mut Body) -> Option<Bind> {
    let (portal, statement) = (body.text()?, body.text()?);
    let param_formats = body.formats()?;
    let count = body.count()?;
    let params = (0..count).map(|_| body.value()).collect::<Option<_>>()?;
    let result_formats = body.formats()?;
    Some(Bind { portal, statement, param_formats, params, result_formats })
}

/// A message the server sends, as far as the record needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    /// 'R': a step of authentication (0 when it succeeded).
    Authentication(i32),
    /// 'K': the backend process that serves the connection, and its key to cancel with.
    BackendKeyData {
        pid: i32,
    },
    /// 'S': a run-time setting the server reports.
    ParameterStatus {
        name: String,
        value: String,
    },
    /// '1', '2': a Parse or a Bind done.
    ParseComplete,
    BindComplete,
    /// 't': a described statement's parameter type oids.
    ParameterDescription(Vec<u32>),
    /// 'T': a result's columns.
    RowDescription(Vec<Column>),
    /// 'n': a described statement or portal returns no rows.
    NoData,
    /// 'D': one row of a result; `None` for NULL.
    DataRow(Vec<Option<Vec<u8>>>),
    /// 'C': a statement done, with its tag (`UPDATE 1`, `SELECT 42`, `BEGIN`).
    CommandComplete(String),
    /// 'I': a query that was empty.
    EmptyQuery,
    /// 's': an Execute stopped at its row limit; the portal may run on.
    PortalSuspended,
    /// 'E': a refusal, by its SQLSTATE code and its message.
    ErrorResponse {
        code: String,
        message: String,
    },
    /// 'N': a warning or a notice, by its message.
    Notice(String),
    /// 'Z': the server waits for the next query.
    ReadyForQuery,
    /// Anything else, or a body that does not read.
    Other,
}

/// A result column: its type oid and its format code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    pub type_oid: u32,
    pub format: i16,
}

/// What a server's message says.
pub fn backend(message: &Message) -> Backend {
    read_backend(message.kind, &mut Body(message.body())).unwrap_or(Backend::Other)
}

fn read_backend(kind: u8, body: &mut Body) -> Option<Backend> {
    Some(match kind {
        b'R' => Backend::Authentication(body.i32()?),
        b'K' => Backend::BackendKeyData { pid: body.i32()? },
        b'S' => Backend::ParameterStatus { name: body.text()?, value: body.text()? },
        b'1' => Backend::ParseComplete,
        b'2' => Backend::BindComplete,
        b't' => Backend::ParameterDescription(body.oids()?),
        b'T' => Backend::RowDescription(row_description(body)?),
        b'n' => Backend::NoData,
        b'D' => Backend::DataRow((0..body.count()?).map(|_| body.value()).collect::<Option<_>>()?),
        b'C' => Backend::CommandComplete(body.text()?),
        b'I' => Backend::EmptyQuery,
        b's' => Backend::PortalSuspended,
        b'E' => fields(body).map(|(code, message)| Backend::ErrorResponse { code, message })?,
        b'N' => Backend::Notice(fields(body)?.1),
        b'Z' => Backend::ReadyForQuery,
        _ => return None,
    })
}

fn row_description(body: &mut Body) -> Option<Vec<Column>> {
    let count = body.count()?;
    let column = |body: &mut Body| {
        body.text()?;
        body.i32()?; // the table's oid
        body.i16()?; // the column's number in it
        let type_oid = body.i32()? as u32;
        body.i16()?; // the type's size
        body.i32()?; // the type's modifier
        Some(Column { type_oid, format: body.i16()? })
    };
    (0..count).map(|_| column(body)).collect()
}

/// An error's or a notice's SQLSTATE code ('C') and message ('M'), of its fields.
fn fields(body: &mut Body) -> Option<(String, String)> {
    let (mut code, mut message) = (String::new(), String::new());
    loop {
        match body.u8()? {
            0 => return Some((code, message)),
            b'C' => code = body.text()?,
            b'M' => message = body.text()?,
            _ => drop(body.text()?),
        }
    }
}

/// The format code of column (or parameter) `index`, of the codes a message gave: no
/// codes means all text, one code is every column's, otherwise each has its own.
pub fn format_of(formats: &[i16], index: usize) -> i16 {
    match formats {
        [] => 0,
        [one] => *one,
        each => each.get(index).copied().unwrap_or(0),
    }
}

/// A value as the record shows it: text as text; binary as its type reads when the type is
/// known to be a bool, an oid or text (`type_oid`, 0 when unknown), and otherwise as a
/// big-endian signed integer in decimal when it is 2, 4 or 8 bytes long, or as `\x` and
/// its hex digits. The type matters for text sent in binary, as clients send every value:
/// a state of `sent` is 4 bytes, and read by its length it would be 1936027252.
pub fn value_text(value: Option<&[u8]>, format: i16, type_oid: u32) -> Option<String> {
    let value = value?;
    if format == 0 {
        return Some(String::from_utf8_lossy(value).into_owned());
    }
    Some(match (type_oid, value) {
        (BOOL, [0]) => "f".to_owned(),
        (BOOL, [_]) => "t".to_owned(),
        (OID, &[a, b, c, d]) => u32::from_be_bytes([a, b, c, d]).to_string(),
        (TEXT | VARCHAR | BPCHAR | NAME | JSON, text) if std::str::from_utf8(text).is_ok() => {
            String::from_utf8_lossy(text).into_owned()
        }
        (_, &[a, b]) => i16::from_be_bytes([a, b]).to_string(),
        (_, &[a, b, c, d]) => i32::from_be_bytes([a, b, c, d]).to_string(),
        (_, &[a, b, c, d, e, f, g, h]) => i64::from_be_bytes([a, b, c, d, e, f, g, h]).to_string(),
        (_, bytes) => format!("\\x{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()),
    })
}

/// The type oids whose binary form [`value_text`] reads by type (the integers read by
/// their length).
const BOOL: u32 = 16;
const NAME: u32 = 19;
const TEXT: u32 = 25;
const OID: u32 = 26;
const JSON: u32 = 114;
const BPCHAR: u32 = 1042;
const VARCHAR: u32 = 1043;

/// A message body read from the front; every read is `None` past its end.
struct Body<'a>(&'a [u8]);

impl Body<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let (taken, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(taken)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn i16(&mut self) -> Option<i16> {
        self.take(2).map(|b| i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Option<i32> {
        self.take(4).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A count of items that follow (2 bytes), none when negative.
    fn count(&mut self) -> Option<usize> {
        usize::try_from(self.i16()?).ok()
    }

    /// A zero-terminated string.
    fn text(&mut self) -> Option<String> {
        let end = self.0.iter().position(|b| *b == 0)?;
        let text = String::from_utf8_lossy(&self.0[..end]).into_owned();
        self.0 = &self.0[end + 1..];
        Some(text)
    }

    /// A count and as many type oids.
    fn oids(&mut self) -> Option<Vec<u32>> {
        (0..self.count()?).map(|_| self.i32().map(|t| t as u32)).collect()
    }

    fn formats(&mut self) -> Option<Vec<i16>> {
        (0..self.count()?).map(|_| self.i16()).collect()
    }

    /// A length-prefixed value (4 bytes), `Some(None)` for NULL (a length of -1).
    fn value(&mut self) -> Option<Option<Vec<u8>>> {
        match self.i32()? {
            -1 => Some(None),
            length => self.take(usize::try_from(length).ok()?).map(|v| Some(v.to_vec())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A typed message of `kind` around `body`, as it goes on the wire.
    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        [&[kind][..], &(body.len() as i32 + 4).to_be_bytes(), body].concat()
    }

    fn read_one(bytes: &[u8]) -> Message {
        read_message(&mut io::BufReader::new(bytes)).unwrap().unwrap()
    }

    #[test]
    fn a_bind_gives_its_parameters_in_text_binary_and_null() {
        let mut body = b"portal\0s1\0".to_vec();
        body.extend([0, 4, 0, 0, 0, 1, 0, 1, 0, 1]); // four format codes: text, then binary
        body.extend([0, 4]); // four parameters
        body.extend([0, 0, 0, 3]);
        body.extend(b"abc");
        body.extend([0, 0, 0, 4, 0xff, 0xff, 0xff, 0xfe]); // int4 -2
        body.extend([0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0]); // int8 2^32
        body.extend([0xff, 0xff, 0xff, 0xff]); // NULL
        body.extend([0, 1, 0, 1]); // every result column binary
        let wire = message(b'B', &body);
        let read = read_one(&wire);
        assert_eq!(read.bytes, wire, "forwarded unchanged");
        let Frontend::Bind(bind) = frontend(&read) else { panic!("{:?}", frontend(&read)) };
        assert_eq!((bind.portal.as_str(), bind.statement.as_str()), ("portal", "s1"));
        assert_eq!(bind.result_formats, [1]);
        let shown: Vec<Option<String>> = bind
            .params
            .iter()
            .enumerate()
            .map(|(i, p)| value_text(p.as_deref(), format_of(&bind.param_formats, i), 0))
            .collect();
        assert_eq!(
            shown,
            [Some("abc".to_owned()), Some("-2".to_owned()), Some("4294967296".to_owned()), None]
        );
    }

    #[test]
    fn a_binary_value_reads_by_its_type_when_known_and_by_its_length_otherwise() {
        assert_eq!(value_text(Some(b"sent"), 1, TEXT).as_deref(), Some("sent"));
        assert_eq!(value_text(Some(b"sent"), 1, 0).as_deref(), Some("1936027252"));
        assert_eq!(value_text(Some(&[0, 7]), 1, 0).as_deref(), Some("7"));
        assert_eq!(value_text(Some(&[1]), 1, BOOL).as_deref(), Some("t"));
        assert_eq!(value_text(Some(&[1, 2, 255]), 1, 0).as_deref(), Some("\\x0102ff"));
        assert_eq!(value_text(Some(b"12"), 0, 20).as_deref(), Some("12"), "text stays text");
        assert_eq!(format_of(&[0, 1], 1), 1);
        assert_eq!(format_of(&[], 3), 0);
    }

    #[test]
    fn a_parse_gives_its_name_text_and_parameter_types() {
        let sql = "UPDATE t SET state = 'x' WHERE id = $1 AND state = 'a'";
        let body = [&b"s0\0"[..], sql.as_bytes(), b"\0", &[0, 1, 0, 0, 0, 20]].concat();
        let parsed = frontend(&read_one(&message(b'P', &body)));
        assert_eq!(parsed, Frontend::Parse { name: "s0".into(), sql: sql.into(), types: vec![20] });
        let execute = frontend(&read_one(&message(b'E', b"\0\0\0\0\0")));
        assert_eq!(execute, Frontend::Execute { portal: String::new(), max_rows: 0 });
        assert_eq!(frontend(&read_one(&message(b'P', b"cut"))), Frontend::Other, "a body cut short");
    }

    #[test]
    fn an_error_gives_its_sqlstate_and_message_and_a_completion_its_tag() {
        let body = b"SERROR\0VERROR\0C42P01\0Mrelation \"missing\" does not exist\0P15\0\0";
        assert_eq!(
            backend(&read_one(&message(b'E', body))),
            Backend::ErrorResponse {
                code: "42P01".into(),
                message: "relation \"missing\" does not exist".into()
            }
        );
        assert_eq!(
            backend(&read_one(&message(b'C', b"UPDATE 1\0"))),
            Backend::CommandComplete("UPDATE 1".into())
        );
        let row = [&[0, 2, 0, 0, 0, 1][..], b"7", &[0xff, 0xff, 0xff, 0xff]].concat();
        assert_eq!(
            backend(&read_one(&message(b'D', &row))),
            Backend::DataRow(vec![Some(b"7".to_vec()), None])
        );
    }

    #[test]
    fn a_length_out_of_range_is_malformed_and_a_stream_cut_short_is_not() {
        for length in [2_i32, -1, (1 << 30) + 1] {
            let wire = [&b"Q"[..], &length.to_be_bytes()].concat();
            let error = read_message(&mut io::BufReader::new(&wire[..])).unwrap_err();
            assert!(is_malformed(&error), "{length}: {error}");
        }
        let cut = &message(b'Q', b"SELECT 1\0")[..7];
        let error = read_message(&mut io::BufReader::new(cut)).unwrap_err();
        assert!(!is_malformed(&error), "{error}");
        assert_eq!(read_message(&mut io::BufReader::new(&b""[..])).unwrap(), None);
    }

    #[test]
    fn a_start_up_packet_gives_its_code() {
        let ssl = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];
        let read = read_startup(&mut io::BufReader::new(&ssl[..])).unwrap().unwrap();
        assert_eq!((read.kind, read.startup_code(), read.bytes.len()), (0, Some(SSL_REQUEST), 8));
        let short = [0, 0, 0, 4];
        assert!(is_malformed(&read_startup(&mut io::BufReader::new(&short[..])).unwrap_err()));
    }
}
