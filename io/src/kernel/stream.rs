//! A TLS message stream over a kernel socket, driven by its owner's thread.
//!
//! Each message is a 4-byte big-endian length and that many bytes, inside one TLS 1.3
//! session (rustls, the same certificates and trust as the built-in transport). A length
//! with its top bit set ([`CONTROL`]) marks a control frame: the ends' own reports (the
//! sender's subflow counters), never handed to the application as a message. The owner
//! queues messages ([`MessageStream::queue`]), takes whole received ones
//! ([`MessageStream::try_recv`]) and calls [`MessageStream::poll`] to move bytes; the
//! socket is non-blocking. Reading from the socket stops while more than
//! [`READ_AHEAD`] plaintext bytes wait for the owner, so the kernel's receive window
//! follows the application's read rate.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use braid_transport::proto::{ClientCrypto, ServerCrypto};
use rustls::pki_types::ServerName;

use super::KernelError;

/// The longest frame accepted (a hostile length is an error, not an allocation).
pub const MAX_FRAME: usize = 16 * 1024 * 1024;
/// Plaintext read ahead of the owner at most.
pub const READ_AHEAD: usize = 256 * 1024;
/// The length bit that marks a control frame.
pub const CONTROL: u32 = 0x8000_0000;
/// The longest control frame accepted.
pub const MAX_CONTROL: usize = 64 * 1024;

/// One received frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// An application message.
    Message(Vec<u8>),
    /// A control frame.
    Control(Vec<u8>),
}

/// One end of a message stream.
pub struct MessageStream {
    sock: TcpStream,
    tls: rustls::Connection,
    out: Vec<u8>,
    out_pos: usize,
    inbuf: Vec<u8>,
    in_pos: usize,
    eof: bool,
    read_ahead: usize,
}

impl MessageStream {
    /// The client end over `sock` (connected), checking the server as `crypto` says; the
    /// certificate is checked against `crypto`'s name or else `server_ip`.
    pub fn client(
        sock: TcpStream,
        crypto: &ClientCrypto,
        server_ip: IpAddr,
    ) -> Result<MessageStream, KernelError> {
        let name = crypto.server_name.clone().unwrap_or(ServerName::IpAddress(server_ip.into()));
        let conn = rustls::ClientConnection::new(Arc::clone(&crypto.config), name)
            .map_err(|e| KernelError::Tls(e.to_string()))?;
        MessageStream::new(sock, conn.into())
    }

    /// The server end over an accepted `sock`.
    pub fn server(sock: TcpStream, crypto: &ServerCrypto) -> Result<MessageStream, KernelError> {
        let conn = rustls::ServerConnection::new(Arc::clone(&crypto.config))
            .map_err(|e| KernelError::Tls(e.to_string()))?;
        MessageStream::new(sock, conn.into())
    }

    fn new(sock: TcpStream, tls: rustls::Connection) -> Result<MessageStream, KernelError> {
        sock.set_nonblocking(true).map_err(|e| KernelError::io("set_nonblocking", e))?;
        Ok(MessageStream {
            sock,
            tls,
            out: Vec::new(),
            out_pos: 0,
            inbuf: Vec::new(),
            in_pos: 0,
            eof: false,
            read_ahead: READ_AHEAD,
        })
    }

    /// Reads from the socket only while fewer than `bytes` plaintext bytes wait for the
    /// owner (default [`READ_AHEAD`]): less keeps more of what is unread in the kernel,
    /// whose receive window then closes sooner.
    pub fn set_read_ahead(&mut self, bytes: usize) {
        self.read_ahead = bytes.max(1);
    }

    /// The socket (for statistics).
    pub fn socket(&self) -> &TcpStream {
        &self.sock
    }

    /// Queues `msg` as one frame.
    pub fn queue(&mut self, msg: &[u8]) {
        if self.out_pos > 0 && self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
        }
        self.out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
        self.out.extend_from_slice(msg);
    }

    /// Queues `body` as one control frame (at most [`MAX_CONTROL`] bytes; longer ones are
    /// not sent).
    pub fn queue_control(&mut self, body: &[u8]) {
        if body.len() > MAX_CONTROL {
            return;
        }
        if self.out_pos > 0 && self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
        }
        self.out.extend_from_slice(&(body.len() as u32 | CONTROL).to_be_bytes());
        self.out.extend_from_slice(body);
    }

    /// Framed bytes queued and not yet handed to TLS.
    pub fn pending_out(&self) -> usize {
        self.out.len() - self.out_pos
    }

    /// Whether everything queued went out to the socket.
    pub fn flushed(&self) -> bool {
        self.pending_out() == 0 && !self.tls.wants_write()
    }

    /// Whether the peer closed its end.
    pub fn at_eof(&self) -> bool {
        self.eof
    }

    /// The next whole received frame, if one is here.
    pub fn try_recv(&mut self) -> Result<Option<Frame>, KernelError> {
        let avail = &self.inbuf[self.in_pos..];
        if avail.len() < 4 {
            return Ok(None);
        }
        let word = u32::from_be_bytes([avail[0], avail[1], avail[2], avail[3]]);
        let control = word & CONTROL != 0;
        let len = (word & !CONTROL) as usize;
        if len > MAX_FRAME || (control && len > MAX_CONTROL) {
            return Err(KernelError::FrameTooLong(len));
        }
        if avail.len() < 4 + len {
            return Ok(None);
        }
        let body = avail[4..4 + len].to_vec();
        self.in_pos += 4 + len;
        if self.in_pos > 64 * 1024 && self.in_pos * 2 > self.inbuf.len() {
            self.inbuf.drain(..self.in_pos);
            self.in_pos = 0;
        }
        Ok(Some(if control { Frame::Control(body) } else { Frame::Message(body) }))
    }

    /// Whether to read more from the socket: less than the read-ahead waits, or the
    /// first waiting frame is not whole yet (a frame longer than the read-ahead is read to
    /// its end).
    fn wants_in(&self) -> bool {
        let avail = &self.inbuf[self.in_pos..];
        if avail.len() < self.read_ahead {
            return true;
        }
        let need = match avail.get(..4) {
            Some(h) => {
                let word = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
                4 + ((word & !CONTROL) as usize).min(MAX_FRAME)
            }
            None => 4,
        };
        avail.len() < need
    }

    /// Plaintext bytes received and not yet taken.
    pub fn buffered_in(&self) -> usize {
        self.inbuf.len() - self.in_pos
    }

    fn feed_tls(&mut self) -> Result<(), KernelError> {
        while self.out_pos < self.out.len() {
            match self.tls.writer().write(&self.out[self.out_pos..]) {
                Ok(0) => break,
                Ok(n) => self.out_pos += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => return Err(KernelError::io("TLS write", e)),
            }
        }
        Ok(())
    }

    fn write_socket(&mut self) -> Result<(), KernelError> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.sock) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(KernelError::io("sending", e)),
            }
            self.feed_tls()?;
        }
        Ok(())
    }

    fn read_socket(&mut self) -> Result<(), KernelError> {
        loop {
            if !self.wants_in() {
                return Ok(());
            }
            match self.tls.read_tls(&mut self.sock) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(KernelError::io("receiving", e)),
            }
            let state =
                self.tls.process_new_packets().map_err(|e| KernelError::Tls(e.to_string()))?;
            if state.plaintext_bytes_to_read() > 0 {
                self.drain_plaintext()?;
            }
        }
        self.tls.process_new_packets().map_err(|e| KernelError::Tls(e.to_string()))?;
        self.drain_plaintext()
    }

    fn drain_plaintext(&mut self) -> Result<(), KernelError> {
        let mut buf = [0u8; 32 * 1024];
        loop {
            match self.tls.reader().read(&mut buf) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(());
                }
                Ok(n) => self.inbuf.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
                    self.eof = true;
                    return Ok(());
                }
                Err(e) => return Err(KernelError::io("TLS read", e)),
            }
        }
    }

    /// Moves bytes: hands queued frames to TLS, writes what the socket takes, reads what
    /// arrived (unless [`READ_AHEAD`] bytes already wait), waiting up to `timeout` for the
    /// socket to become ready.
    pub fn poll(&mut self, timeout: Duration) -> Result<(), KernelError> {
        self.feed_tls()?;
        self.write_socket()?;
        let want_read = !self.eof && self.wants_in();
        let mut events: libc::c_short = 0;
        if want_read {
            events |= libc::POLLIN;
        }
        if self.tls.wants_write() {
            events |= libc::POLLOUT;
        }
        let mut pfd = libc::pollfd { fd: self.sock.as_raw_fd(), events, revents: 0 };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == ErrorKind::Interrupted {
                return Ok(());
            }
            return Err(KernelError::io("poll", e));
        }
        if pfd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 && want_read {
            self.read_socket()?;
        }
        self.feed_tls()?;
        self.write_socket()
    }

    /// Sends a TLS close and flushes for at most `timeout`.
    pub fn close(&mut self, timeout: Duration) {
        self.tls.send_close_notify();
        let end = std::time::Instant::now() + timeout;
        while !self.flushed() && std::time::Instant::now() < end {
            if self.poll(Duration::from_millis(10)).is_err() {
                break;
            }
        }
        let _ = self.sock.shutdown(std::net::Shutdown::Write);
    }
}
