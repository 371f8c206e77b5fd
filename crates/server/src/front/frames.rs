//! WebSocket frame headers (RFC 6455 section 5.2), read without touching payloads.
//!
//! After `101` the front relays bytes, yet it must know where frames begin and end: to refuse a
//! client message over `--max-websocket-message` before any byte of it reaches the app (1009), to
//! refuse what no client may send (1002), to see a close frame go by, and to slip in a close
//! frame of its own only between two frames. A header is at most 14 bytes and holds all of that
//! (opcode, FIN, mask, length), so a masked payload is never unmasked, copied or even looked at.

/// Close codes the front sends (RFC 6455 section 7.4.1).
pub const GOING_AWAY: u16 = 1001;
pub const PROTOCOL_ERROR: u16 = 1002;
pub const MESSAGE_TOO_BIG: u16 = 1009;

const OPCODE_CLOSE: u8 = 0x8;
const OPCODE_PING: u8 = 0x9;

/// A ping with no payload, as a server sends it (unmasked).
pub const PING_FRAME: [u8; 2] = [0x80 | OPCODE_PING, 0];
/// Control frames (close, ping, pong) carry at most this much and are never fragmented.
const MAX_CONTROL_PAYLOAD: u64 = 125;
/// A close frame's reason fits in a control frame after its two-byte code.
const MAX_CLOSE_REASON: usize = MAX_CONTROL_PAYLOAD as usize - 2;

/// Walks the frames of one direction of a WebSocket.
#[derive(Debug)]
pub struct Frames {
    /// Frames from a client are held to the rules and to this message size; a worker's frames
    /// are trusted (`None`).
    max_message: Option<u64>,
    /// Payload bytes of the current frame not yet walked past.
    payload_left: u64,
    /// Payload bytes of the data message under way, counting its frames so far.
    message_len: u64,
    close_seen: bool,
}

/// A frame the front refuses; what came before it may still be relayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Violation {
    /// Bytes before the refused frame's header: whole frames, or the end of one.
    pub valid: usize,
    /// The close code the sender gets.
    pub code: u16,
    pub reason: &'static str,
}

/// The fields of a header the front acts on.
struct Header {
    len: usize,
    fin: bool,
    opcode: u8,
    masked: bool,
    payload: u64,
}

impl Frames {
    /// A client's frames: masked, well-formed control frames, messages up to `max_message` bytes.
    pub fn from_client(max_message: u64) -> Frames {
        Frames { max_message: Some(max_message), payload_left: 0, message_len: 0, close_seen: false }
    }

    /// A worker's frames, trusted.
    pub fn from_worker() -> Frames {
        Frames { max_message: None, payload_left: 0, message_len: 0, close_seen: false }
    }

    /// Walks `data`, which starts where the bytes walked so far end. Returns how many of its
    /// bytes may be relayed: whole frames, and payload, up to a header that is not complete yet
    /// (give its bytes again, with more after them).
    pub fn advance(&mut self, data: &[u8]) -> Result<usize, Violation> {
        let mut at = self.rest_of_frame(data);
        while self.payload_left == 0 && at < data.len() {
            let refuse = |(code, reason)| Violation { valid: at, code, reason };
            let Some(header) = parse_header(&data[at..]).map_err(refuse)? else { break };
            self.check(&header).map_err(refuse)?;
            at += header.len;
            self.payload_left = header.payload;
            at += self.rest_of_frame(&data[at..]);
        }
        Ok(at)
    }

    /// Walks only what is left of the current frame's payload in `data`; returns how much.
    pub fn rest_of_frame(&mut self, data: &[u8]) -> usize {
        let take = self.payload_left.min(data.len() as u64);
        self.payload_left -= take;
        take as usize
    }

    /// Whether the bytes walked so far end between two frames.
    pub fn at_boundary(&self) -> bool {
        self.payload_left == 0
    }

    /// Whether a close frame has gone by: its receiver must not be sent another.
    pub fn close_seen(&self) -> bool {
        self.close_seen
    }

    fn check(&mut self, header: &Header) -> Result<(), (u16, &'static str)> {
        let control = header.opcode & 0x8 != 0;
        if let Some(max_message) = self.max_message {
            if !header.masked {
                return Err((PROTOCOL_ERROR, "client frames must be masked"));
            }
            if control {
                if header.payload > MAX_CONTROL_PAYLOAD || !header.fin {
                    return Err((PROTOCOL_ERROR, "control frames are whole and at most 125 bytes"));
                }
            } else {
                // Every data frame counts towards the message until one ends it, so no ordering
                // of frames, valid or not, can carry more than the limit.
                let message_len = self.message_len.saturating_add(header.payload);
                if message_len > max_message {
                    return Err((MESSAGE_TOO_BIG, "message too big"));
                }
                self.message_len = if header.fin { 0 } else { message_len };
            }
        }
        self.close_seen |= header.opcode == OPCODE_CLOSE;
        Ok(())
    }
}

/// The header at the start of `data`; `None` until all of it is there.
fn parse_header(data: &[u8]) -> Result<Option<Header>, (u16, &'static str)> {
    let [first, second, ..] = *data else { return Ok(None) };
    let masked = second & 0x80 != 0;
    let extended = match second & 0x7f {
        126 => 2,
        127 => 8,
        _ => 0,
    };
    let len = 2 + extended + if masked { 4 } else { 0 };
    if data.len() < len {
        return Ok(None);
    }
    let payload = match extended {
        0 => u64::from(second & 0x7f),
        2 => u64::from(u16::from_be_bytes([data[2], data[3]])),
        _ => {
            let payload = u64::from_be_bytes(data[2..10].try_into().expect("eight bytes"));
            if payload >> 63 != 0 {
                return Err((PROTOCOL_ERROR, "frame length out of range"));
            }
            payload
        }
    };
    Ok(Some(Header { len, fin: first & 0x80 != 0, opcode: first & 0x0f, masked, payload }))
}

/// A close frame with `code` and `reason`: unmasked as a server sends it, or masked with `mask`
/// as a client must (the front speaks as the client to the worker).
pub fn close_frame(code: u16, reason: &str, mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut cut = reason.len().min(MAX_CLOSE_REASON);
    while !reason.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut payload = code.to_be_bytes().to_vec();
    payload.extend_from_slice(&reason.as_bytes()[..cut]);
    let mut frame = vec![0x80 | OPCODE_CLOSE, payload.len() as u8];
    if let Some(mask) = mask {
        frame[1] |= 0x80;
        frame.extend_from_slice(&mask);
        payload.iter_mut().zip(mask.iter().cycle()).for_each(|(byte, key)| *byte ^= key);
    }
    frame.extend_from_slice(&payload);
    frame
}

/// The mask of [`client_frame`].
#[cfg(test)]
pub(crate) const TEST_MASK: [u8; 4] = [1, 2, 3, 4];

/// A frame as a client sends it, masked with [`TEST_MASK`] (for tests: the front never sends one).
#[cfg(test)]
pub(crate) fn client_frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![if fin { 0x80 } else { 0 } | opcode];
    match payload.len() {
        len @ 0..=125 => frame.push(0x80 | len as u8),
        len @ 126..=0xffff => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(len as u16).to_be_bytes());
        }
        len => {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    frame.extend_from_slice(&TEST_MASK);
    frame.extend(payload.iter().zip(TEST_MASK.iter().cycle()).map(|(byte, key)| byte ^ key));
    frame
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 4] = TEST_MASK;

    /// A client frame of `payload` bytes.
    fn frame(fin: bool, opcode: u8, payload: usize) -> Vec<u8> {
        client_frame(fin, opcode, &vec![b'x'; payload])
    }

    #[test]
    fn whole_frames_pass_and_a_split_header_waits_for_its_rest() {
        let mut frames = Frames::from_client(1 << 20);
        let mut data = frame(true, 1, 5);
        data.extend(frame(true, 2, 300));
        data.extend(frame(true, 2, 70_000));
        assert_eq!(frames.advance(&data), Ok(data.len()));
        assert!(frames.at_boundary());

        // A 16-bit length header cut after 3 of its 8 bytes: nothing of it may go yet.
        let next = frame(true, 2, 200);
        let mut frames = Frames::from_client(1 << 20);
        assert_eq!(frames.advance(&next[..3]), Ok(0));
        assert_eq!(frames.advance(&next[..50]), Ok(50));
        assert!(!frames.at_boundary());
        assert_eq!(frames.advance(&next[50..]), Ok(next.len() - 50));
        assert!(frames.at_boundary());
    }

    #[test]
    fn a_message_over_the_limit_is_refused_at_the_header_that_crosses_it() {
        let mut frames = Frames::from_client(100);
        let mut data = frame(true, 2, 100); // exactly the limit: fine
        data.extend(frame(false, 1, 60));
        data.extend(frame(true, 9, 4)); // a ping between fragments does not count
        let crossing = data.len();
        data.extend(frame(true, 0, 41)); // 60 + 41 > 100
        let refused = frames.advance(&data).unwrap_err();
        assert_eq!(refused, Violation { valid: crossing, code: MESSAGE_TOO_BIG, reason: "message too big" });

        // One frame larger than the limit is refused on its header, before its payload arrives.
        let mut frames = Frames::from_client(1000);
        let huge = frame(true, 2, 1 << 20);
        assert_eq!(frames.advance(&huge[..14]).unwrap_err().code, MESSAGE_TOO_BIG);
    }

    #[test]
    fn a_finished_message_starts_the_count_again() {
        let mut frames = Frames::from_client(100);
        for _ in 0..10 {
            assert!(frames.advance(&frame(true, 2, 90)).is_ok());
        }
    }

    #[test]
    fn what_no_client_may_send_is_a_protocol_error() {
        let unmasked = [0x81, 0x01, b'a'];
        assert_eq!(Frames::from_client(100).advance(&unmasked).unwrap_err().code, PROTOCOL_ERROR);
        let long_ping = frame(true, 9, 126);
        assert_eq!(Frames::from_client(1000).advance(&long_ping).unwrap_err().code, PROTOCOL_ERROR);
        let fragmented_close = frame(false, 8, 2);
        assert_eq!(Frames::from_client(1000).advance(&fragmented_close).unwrap_err().code, PROTOCOL_ERROR);
        let mut out_of_range = vec![0x82, 0x80 | 127];
        out_of_range.extend_from_slice(&u64::MAX.to_be_bytes());
        out_of_range.extend_from_slice(&KEY);
        assert_eq!(Frames::from_client(u64::MAX).advance(&out_of_range).unwrap_err().code, PROTOCOL_ERROR);
    }

    #[test]
    fn a_workers_frames_are_walked_without_rules_and_its_close_is_seen() {
        let mut frames = Frames::from_worker();
        let mut data = vec![0x82, 126, 0x01, 0x00];
        data.resize(4 + 256, 0);
        assert_eq!(frames.advance(&data), Ok(data.len()));
        assert!(!frames.close_seen());
        let close = close_frame(1000, "bye", None);
        assert_eq!(frames.advance(&close), Ok(close.len()));
        assert!(frames.close_seen());
    }

    #[test]
    fn the_rest_of_a_frame_and_no_more() {
        let mut frames = Frames::from_client(1000);
        let first = frame(true, 2, 10);
        assert_eq!(frames.advance(&first[..8]), Ok(8));
        let mut rest = first[8..].to_vec();
        rest.extend(frame(true, 2, 10));
        assert_eq!(frames.rest_of_frame(&rest), 8);
        assert!(frames.at_boundary());
    }

    #[test]
    fn close_frames_as_server_and_as_client() {
        assert_eq!(close_frame(1001, "bye", None), [0x88, 5, 0x03, 0xe9, b'b', b'y', b'e']);
        let masked = close_frame(1009, "ab", Some(KEY));
        assert_eq!(masked[..6], [0x88, 0x84, 1, 2, 3, 4]);
        let unmasked: Vec<u8> = masked[6..].iter().zip(KEY.iter().cycle()).map(|(b, k)| b ^ k).collect();
        assert_eq!(unmasked, [0x03, 0xf1, b'a', b'b']);
        let long = close_frame(1000, &"é".repeat(100), None);
        assert!(long.len() <= 2 + 125, "the reason is cut to fit a control frame, on a char boundary");
        assert!(std::str::from_utf8(&long[4..]).is_ok());
    }
}
