//! `--http2-*`: the settings an HTTP/2 connection announces and holds its client to, and the
//! `h2` builder made from them.

/// `--http2-*`: what the front tells HTTP/2 clients in its SETTINGS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Http2Settings {
    /// Streams a client may have open at once (`--http2-max-concurrent-streams`).
    pub max_concurrent_streams: u32,
    /// Each stream's receive window, in bytes (`--http2-initial-window-size`).
    pub initial_window_size: u32,
    /// The connection's receive window, in bytes: what all its uploads may have in flight.
    pub connection_window_size: u32,
    /// The largest frame payload a client may send (`--http2-max-frame-size`).
    pub max_frame_size: u32,
    /// The largest header list, as HPACK counts it (`--http2-max-header-list-size`).
    pub max_header_list_size: u32,
}

impl Http2Settings {
    /// gunicorn's defaults, with the header list as large as an HTTP/1.1 head may be.
    pub fn new(max_header_list_size: u32) -> Self {
        Http2Settings {
            max_concurrent_streams: 100,
            initial_window_size: 65_535,
            connection_window_size: 1 << 20,
            max_frame_size: 16_384,
            max_header_list_size,
        }
    }

    /// The `h2` server builder that announces these settings.
    pub(super) fn builder(&self) -> h2::server::Builder {
        let mut builder = h2::server::Builder::new();
        builder
            .max_concurrent_streams(self.max_concurrent_streams)
            .initial_window_size(self.initial_window_size)
            .initial_connection_window_size(self.connection_window_size.max(self.initial_window_size))
            .max_frame_size(self.max_frame_size)
            .max_header_list_size(self.max_header_list_size)
            // HPACK's dynamic table: the RFC's default, and no more, whatever a client asks.
            .header_table_size(4096)
            // Responses leave a window at a time from the spool; this bounds what waits in
            // `h2` for the socket.
            .max_send_buffer_size(64 * 1024);
        builder
    }
}
