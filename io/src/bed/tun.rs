//! TUN devices and network namespaces, through libc: `setns(2)` into a namespace
//! (the bind mount `ip netns add` makes under `/run/netns`), `open("/dev/net/tun")` and
//! `TUNSETIFF` with `IFF_TUN | IFF_NO_PI | IFF_VNET_HDR` (linux/if_tun.h): the device
//! lives in the namespace the opening thread is in, and goes away when its descriptor is
//! closed. Every packet read or written starts with a virtio header ([`super::gso`]);
//! `TUNSETOFFLOAD` lets the stack hand the device TCP super-packets with partial
//! checksums.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `TUNSETIFF` = `_IOW('T', 202, int)`.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
/// `TUNSETOFFLOAD` = `_IOW('T', 208, unsigned int)`.
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
/// `TUN_F_CSUM | TUN_F_TSO4`.
const OFFLOADS: libc::c_ulong = 0x01 | 0x02;

/// Runs `f` on a new thread that has joined network namespace `ns` (the calling thread
/// keeps its own).
pub fn in_namespace<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = File::open(&path)?;
        // SAFETY: a valid namespace descriptor; setns changes only this thread.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        f()
    })
    .join()
    .map_err(|_| io::Error::other("the namespace thread panicked"))?
}

/// Creates TUN device `name` in the calling thread's namespace, with virtio headers and
/// (where the kernel allows) checksum and TCPv4 segmentation offload; the descriptor is
/// non-blocking.
pub fn open_tun(name: &str) -> io::Result<OwnedFd> {
    if name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "interface name too long"));
    }
    // SAFETY: a NUL-terminated constant path.
    let fd = unsafe {
        libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC)
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // struct ifreq: char ifr_name[16]; short ifr_flags; (padded to 40 bytes).
    let mut req = [0u8; 40];
    req[..name.len()].copy_from_slice(name.as_bytes());
    req[16..18].copy_from_slice(&(IFF_TUN | IFF_NO_PI | IFF_VNET_HDR).to_ne_bytes());
    // SAFETY: `req` is a valid ifreq-sized buffer for TUNSETIFF.
    if unsafe { libc::ioctl(owned.as_raw_fd(), TUNSETIFF as _, req.as_mut_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // Without offloads the device still works, one packet per read.
    if super::offloads_enabled() {
        // SAFETY: TUNSETOFFLOAD takes its flags by value.
        let _ = unsafe { libc::ioctl(owned.as_raw_fd(), TUNSETOFFLOAD as _, OFFLOADS) };
    }
    Ok(owned)
}

/// Reads one packet; `Ok(None)` when none is waiting.
pub fn read_packet(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: `buf` is valid for its length.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some(n as usize))
}

/// Writes one packet (a full device queue drops it, as a full NIC would).
pub fn write_packet(fd: &OwnedFd, pkt: &[u8]) -> bool {
    // SAFETY: `pkt` is valid for its length.
    let n = unsafe { libc::write(fd.as_raw_fd(), pkt.as_ptr().cast(), pkt.len()) };
    n == pkt.len() as isize
}
