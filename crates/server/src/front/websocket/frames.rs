//! WebSocket frame headers (RFC 6455 section 5.2), read without touching payloads.
//!
//! After `101` the front relays bytes, yet it must know where frames begin and end: to refuse a
//! client message over `--max-websocket-message` before any byte of it reaches the app (1009), to
//! refuse what no client may send (1002), to see a close frame go by, and to slip in a close
//! frame of its own only between two frames. A header is at most 14 bytes and holds all of that
//! (opcode, FIN, reserved bits, mask, length), so a masked payload is never unmasked, copied or
//! even looked at. These are the rules for every worker: the bundled worker's codec and a `--cmd`
//! worker get the same frames.
//!
//! A message in one frame shows its size in its header. A fragmented one does not, so its frames
//! are held (with the control frames between them) until the header of its last frame shows that
//! it fits; one that does not fit, or breaks a rule, has reached the app in no part. What is held
//! counts against `--max-websocket-held`, every socket's together ([`Reservation`]).

use std::sync::Arc;

use super::reservation::Reservation;
use crate::byte_budget::ByteBudget;

/// Close codes the front sends (RFC 6455 section 7.4.1).
pub const GOING_AWAY: u16 = 1001;
pub const PROTOCOL_ERROR: u16 = 1002;
pub const MESSAGE_TOO_BIG: u16 = 1009;
pub const TRY_AGAIN_LATER: u16 = 1013;

const OPCODE_CONTINUATION: u8 = 0x0;
const OPCODE_TEXT: u8 = 0x1;
const OPCODE_BINARY: u8 = 0x2;
const OPCODE_CLOSE: u8 = 0x8;
const OPCODE_PING: u8 = 0x9;
const OPCODE_PONG: u8 = 0xA;
/// The first reserved bit, which permessage-deflate sets on a compressed message's first frame.
const RSV1: u8 = 0x40;
const RESERVED_BITS: u8 = 0x70;

/// A ping with no payload, as a server sends it (unmasked).
pub const PING_FRAME: [u8; 2] = [0x80 | OPCODE_PING, 0];
/// Control frames (close, ping, pong) carry at most this much and are never fragmented.
const MAX_CONTROL_PAYLOAD: u64 = 125;
/// A close frame's reason fits in a control frame after its two-byte code.
const MAX_CLOSE_REASON: usize = MAX_CONTROL_PAYLOAD as usize - 2;
/// What a held message may take besides its payload (frame headers, control frames between its
/// fragments): a quarter of the message limit and this much more.
const HOLD_SLACK: u64 = 64 * 1024;

/// Walks the frames of one direction of a WebSocket.
#[derive(Debug)]
pub struct Frames {
    /// Frames from a client are held to the rules; a worker's frames are trusted (`None`).
    rules: Option<ClientRules>,
    /// Payload bytes of the current frame not yet walked past.
    payload_left: u64,
    /// Payload bytes of the data message under way, counting its frames so far.
    message_len: u64,
    /// A client's fragmented message has begun and not ended.
    in_message: bool,
    /// Walked bytes of that message, from its first header on, that wait for its last header.
    held: u64,
    /// A close frame came between the held fragments: it goes, and counts, with them.
    close_held: bool,
    close_seen: bool,
    /// What the held message takes of `--max-websocket-held` (a client's frames only).
    reserved: Option<Reservation>,
}

/// What a client may send.
#[derive(Debug, Clone, Copy)]
struct ClientRules {
    /// Largest message, its frames' payloads together.
    max_message: u64,
    /// Largest held message, everything in it counted.
    max_held: u64,
    /// The worker agreed to permessage-deflate: a message's first frame may set RSV1.
    compressed: bool,
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
    /// The three reserved bits, in place.
    rsv: u8,
    opcode: u8,
    masked: bool,
    payload: u64,
}

impl Frames {
    /// A client's frames: masked, of known opcodes, reserved bits only as an agreed extension
    /// (`compressed`: permessage-deflate) says, fragments in order, well-formed control frames,
    /// messages up to `max_message` bytes, held while unfinished as long as `held_budget` has room.
    pub fn from_client(max_message: u64, compressed: bool, held_budget: Arc<ByteBudget>) -> Frames {
        let max_held = max_message.saturating_add(max_message / 4).saturating_add(HOLD_SLACK);
        let mut frames = Frames::new(Some(ClientRules { max_message, max_held, compressed }));
        frames.reserved = Some(Reservation::new(held_budget));
        frames
    }

    /// A worker's frames, trusted.
    pub fn from_worker() -> Frames {
        Frames::new(None)
    }

    fn new(rules: Option<ClientRules>) -> Frames {
        Frames {
            rules,
            payload_left: 0,
            message_len: 0,
            in_message: false,
            held: 0,
            close_held: false,
            close_seen: false,
            reserved: None,
        }
    }

    /// Walks `data`, which starts where the bytes walked so far end. Returns how many of its
    /// bytes were walked: whole frames, and payload, up to a header that is not complete yet
    /// (give its bytes again, with more after them). The last [`Frames::held`] bytes walked may
    /// not go yet.
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
        if self.in_message {
            self.held += take;
        }
        take as usize
    }

    /// How many of the bytes walked so far, the last ones, wait for their message's end.
    pub fn held(&self) -> usize {
        // Below `max_held`, which was checked against bytes held in memory.
        self.held as usize
    }

    /// Whether the bytes that may go end between two frames: nothing of the current frame is
    /// left to walk, or it is held, and the receiver has none of its message.
    pub fn at_boundary(&self) -> bool {
        self.payload_left == 0 || self.held > 0
    }

    /// Whether a close frame has gone by: its receiver must not be sent another.
    pub fn close_seen(&self) -> bool {
        self.close_seen
    }

    /// Holds a client's frame header to the rules, and counts it towards its message and what is
    /// held of it; notes a close frame.
    fn check(&mut self, header: &Header) -> Result<(), (u16, &'static str)> {
        let Some(rules) = self.rules else {
            self.close_seen |= header.opcode == OPCODE_CLOSE;
            return Ok(());
        };
        let control = header.opcode & 0x8 != 0;
        if !header.masked {
            return Err((PROTOCOL_ERROR, "client frames must be masked"));
        }
        if !matches!(
            header.opcode,
            OPCODE_CONTINUATION | OPCODE_TEXT | OPCODE_BINARY | OPCODE_CLOSE | OPCODE_PING | OPCODE_PONG
        ) {
            return Err((PROTOCOL_ERROR, "reserved opcode"));
        }
        let starts_message = matches!(header.opcode, OPCODE_TEXT | OPCODE_BINARY);
        if header.rsv != 0 && !(rules.compressed && starts_message && header.rsv == RSV1) {
            return Err((PROTOCOL_ERROR, "reserved bits set that no agreed extension defines"));
        }
        if control {
            if header.payload > MAX_CONTROL_PAYLOAD || !header.fin {
                return Err((PROTOCOL_ERROR, "control frames are whole and at most 125 bytes"));
            }
        } else {
            if header.opcode == OPCODE_CONTINUATION && !self.in_message {
                return Err((PROTOCOL_ERROR, "a continuation of no message"));
            }
            if starts_message && self.in_message {
                return Err((PROTOCOL_ERROR, "a new message before the last one ended"));
            }
            // Every data frame counts towards the message until one ends it, so no ordering
            // of frames, valid or not, can carry more than the limit.
            let message_len = self.message_len.saturating_add(header.payload);
            if message_len > rules.max_message {
                return Err((MESSAGE_TOO_BIG, "message too big"));
            }
            self.message_len = if header.fin { 0 } else { message_len };
        }
        if !control && header.fin {
            // The message's last frame: it fits, so what was held of it goes, and this frame
            // after it as it comes.
            self.in_message = false;
            self.held = 0;
            if let Some(reserved) = &mut self.reserved {
                reserved.release();
            }
            self.close_seen |= std::mem::take(&mut self.close_held);
            return Ok(());
        }
        if !control {
            self.in_message = true;
        }
        if self.in_message {
            let held = self.held.saturating_add(header.len as u64).saturating_add(header.payload);
            if held > rules.max_held {
                return Err((MESSAGE_TOO_BIG, "message too big"));
            }
            // The frame's payload is taken with its header: it is held as it comes.
            let grows = header.len as u64 + header.payload;
            if !self.reserved.as_mut().is_none_or(|reserved| reserved.take(grows)) {
                return Err((TRY_AGAIN_LATER, "the server holds too much of unfinished messages"));
            }
            self.held += header.len as u64;
            self.close_held |= header.opcode == OPCODE_CLOSE;
        } else {
            self.close_seen |= header.opcode == OPCODE_CLOSE;
        }
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
    Ok(Some(Header { len, fin: first & 0x80 != 0, rsv: first & RESERVED_BITS, opcode: first & 0x0f, masked, payload }))
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

    /// A client's frames, with room for any held message.
    fn client(max_message: u64, compressed: bool) -> Frames {
        Frames::from_client(max_message, compressed, Arc::new(ByteBudget::new(u64::MAX)))
    }

    #[test]
    fn held_messages_share_one_budget_and_give_it_back_at_their_end() {
        let budget = Arc::new(ByteBudget::new(1000));
        let mut first = Frames::from_client(10_000, false, budget.clone());
        let mut second = Frames::from_client(10_000, false, budget.clone());
        let opening = client_frame(false, 2, &[7; 600]);
        assert_eq!(first.advance(&opening), Ok(opening.len()));
        assert_eq!(first.held(), opening.len());
        assert_eq!(budget.used(), opening.len() as u64, "held, so counted");
        let refused = second.advance(&opening).unwrap_err();
        assert_eq!((refused.valid, refused.code), (0, TRY_AGAIN_LATER), "no room left for a second");

        let last = client_frame(true, 0, &[7; 600]);
        assert_eq!(first.advance(&last), Ok(last.len()));
        assert_eq!((first.held(), budget.used()), (0, 0), "ended: its message goes, and its room with it");
        let mut third = Frames::from_client(10_000, false, budget.clone());
        assert_eq!(third.advance(&opening), Ok(opening.len()));
        drop(third);
        assert_eq!(budget.used(), 0, "a socket that closes gives back what its message held");
        let whole = client_frame(true, 2, &[7; 5000]);
        assert_eq!(first.advance(&whole), Ok(whole.len()), "a message in one frame is never held");
        assert_eq!(budget.used(), 0);
    }

    /// A client frame of `payload` bytes.
    fn frame(fin: bool, opcode: u8, payload: usize) -> Vec<u8> {
        client_frame(fin, opcode, &vec![b'x'; payload])
    }

    #[test]
    fn whole_frames_pass_and_a_split_header_waits_for_its_rest() {
        let mut frames = client(1 << 20, false);
        let mut data = frame(true, 1, 5);
        data.extend(frame(true, 2, 300));
        data.extend(frame(true, 2, 70_000));
        assert_eq!(frames.advance(&data), Ok(data.len()));
        assert!(frames.at_boundary());

        // A 16-bit length header cut after 3 of its 8 bytes: nothing of it may go yet.
        let next = frame(true, 2, 200);
        let mut frames = client(1 << 20, false);
        assert_eq!(frames.advance(&next[..3]), Ok(0));
        assert_eq!(frames.advance(&next[..50]), Ok(50));
        assert!(!frames.at_boundary());
        assert_eq!(frames.advance(&next[50..]), Ok(next.len() - 50));
        assert!(frames.at_boundary());
    }

    #[test]
    fn a_message_over_the_limit_is_refused_at_the_header_that_crosses_it() {
        let mut frames = client(100, false);
        let mut data = frame(true, 2, 100); // exactly the limit: fine
        data.extend(frame(false, 1, 60));
        data.extend(frame(true, 9, 4)); // a ping between fragments does not count
        let crossing = data.len();
        data.extend(frame(true, 0, 41)); // 60 + 41 > 100
        let refused = frames.advance(&data).unwrap_err();
        assert_eq!(refused, Violation { valid: crossing, code: MESSAGE_TOO_BIG, reason: "message too big" });

        // One frame larger than the limit is refused on its header, before its payload arrives.
        let mut frames = client(1000, false);
        let huge = frame(true, 2, 1 << 20);
        assert_eq!(frames.advance(&huge[..14]).unwrap_err().code, MESSAGE_TOO_BIG);
    }

    #[test]
    fn a_finished_message_starts_the_count_again() {
        let mut frames = client(100, false);
        for _ in 0..10 {
            assert!(frames.advance(&frame(true, 2, 90)).is_ok());
        }
    }

    #[test]
    fn what_no_client_may_send_is_a_protocol_error() {
        let unmasked = [0x81, 0x01, b'a'];
        assert_eq!(client(100, false).advance(&unmasked).unwrap_err().code, PROTOCOL_ERROR);
        let long_ping = frame(true, 9, 126);
        assert_eq!(client(1000, false).advance(&long_ping).unwrap_err().code, PROTOCOL_ERROR);
        let fragmented_close = frame(false, 8, 2);
        assert_eq!(client(1000, false).advance(&fragmented_close).unwrap_err().code, PROTOCOL_ERROR);
        let mut out_of_range = vec![0x82, 0x80 | 127];
        out_of_range.extend_from_slice(&u64::MAX.to_be_bytes());
        out_of_range.extend_from_slice(&KEY);
        assert_eq!(client(u64::MAX, false).advance(&out_of_range).unwrap_err().code, PROTOCOL_ERROR);
    }

    #[test]
    fn reserved_opcodes_and_bits_and_fragments_out_of_order_are_protocol_errors() {
        let refused = |compressed: bool, data: &[u8]| client(1000, compressed).advance(data).err();
        for opcode in [0x3, 0x7, 0xB, 0xF] {
            assert_eq!(refused(false, &frame(true, opcode, 1)).map(|v| v.code), Some(PROTOCOL_ERROR), "{opcode}");
        }
        let with_bits = |bits: u8, fin: bool, opcode: u8| {
            let mut data = frame(fin, opcode, 1);
            data[0] |= bits;
            data
        };
        assert_eq!(refused(false, &with_bits(RSV1, true, 2)).map(|v| v.code), Some(PROTOCOL_ERROR));
        assert_eq!(refused(true, &with_bits(RSV1, true, 2)), None, "permessage-deflate's bit");
        assert_eq!(refused(true, &with_bits(0x20, true, 2)).map(|v| v.code), Some(PROTOCOL_ERROR), "RSV2");
        assert_eq!(refused(true, &with_bits(RSV1, true, 9)).map(|v| v.code), Some(PROTOCOL_ERROR), "on a ping");
        let mut compressed_fragments = with_bits(RSV1, false, 1);
        compressed_fragments.extend(with_bits(RSV1, true, 0));
        assert_eq!(refused(true, &compressed_fragments).map(|v| v.code), Some(PROTOCOL_ERROR), "on a continuation");

        let orphan = frame(true, 0, 4);
        assert_eq!(
            refused(false, &orphan),
            Some(Violation { valid: 0, code: PROTOCOL_ERROR, reason: "a continuation of no message" })
        );
        let mut finished = frame(true, 2, 4);
        finished.extend(frame(true, 0, 4));
        assert_eq!(
            refused(false, &finished).map(|v| (v.valid, v.code)),
            Some((10, PROTOCOL_ERROR)),
            "after a whole message"
        );
        let mut interleaved = frame(false, 2, 4);
        interleaved.extend(frame(true, 1, 4));
        assert_eq!(refused(false, &interleaved).map(|v| v.code), Some(PROTOCOL_ERROR), "a message inside a message");
    }

    #[test]
    fn a_fragmented_message_is_held_until_its_last_header() {
        let mut frames = client(100, false);
        let first = frame(false, 2, 40);
        assert_eq!(frames.advance(&first), Ok(first.len()));
        assert_eq!(frames.held(), first.len(), "nothing of it may go");
        assert!(frames.at_boundary(), "the receiver has none of it");
        let ping = frame(true, 9, 3);
        let last = frame(true, 0, 60);
        let mut rest = ping.clone();
        rest.extend(&last[..20]);
        assert_eq!(frames.advance(&rest), Ok(rest.len()));
        assert_eq!(frames.held(), 0, "the last header showed that it fits");
        assert!(!frames.at_boundary());
        assert_eq!(frames.advance(&last[20..]), Ok(last.len() - 20));

        // Over the limit, the message is refused with everything of it still held.
        let mut frames = client(100, false);
        let mut data = frame(false, 1, 60);
        data.extend(frame(false, 0, 30));
        let crossing = data.len();
        data.extend(frame(true, 0, 11));
        assert_eq!(frames.advance(&data).unwrap_err().valid, crossing);
        assert_eq!(frames.held(), crossing);

        // Headers and control frames are held too, within a bound of their own.
        let mut frames = client(0, false);
        let mut pings = frame(false, 2, 0);
        while pings.len() as u64 <= HOLD_SLACK {
            pings.extend(frame(true, 9, 125));
        }
        assert_eq!(frames.advance(&pings).unwrap_err().code, MESSAGE_TOO_BIG);
    }

    #[test]
    fn a_close_between_held_fragments_is_seen_when_it_goes() {
        let mut frames = client(100, false);
        let mut data = frame(false, 2, 4);
        data.extend(close_frame(1000, "", Some(KEY)));
        assert_eq!(frames.advance(&data), Ok(data.len()));
        assert!(!frames.close_seen(), "held, not gone");
        assert_eq!(frames.advance(&frame(true, 0, 4)), Ok(10));
        assert!(frames.close_seen());
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
        let mut frames = client(1000, false);
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
