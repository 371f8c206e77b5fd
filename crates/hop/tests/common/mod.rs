//! What the hop's tests share: the front's side of a bodiless request.

use headway_hop::front::FrontEnd;
use headway_hop::message::{self, REQUEST_HEAD};

/// Publishes a `GET /` with no body on slot `index`.
pub fn publish(front: &FrontEnd, index: usize) {
    let mut head = Vec::new();
    message::encode_request_head(&mut head, 0, message::Version::Http11, b"GET", b"/", b"", std::iter::empty());
    let slot = front.slot(index);
    assert!(slot.push(REQUEST_HEAD, &[&head]).unwrap());
    slot.publish();
}
