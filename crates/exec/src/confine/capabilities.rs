//! Dropping every capability in the child (effective, permitted, inheritable, ambient and,
//! where the server may, bounding) and locking the securebits; and what this process can drop,
//! for the reports.

use crate::step::errno;

/// How far a child can shed capabilities, decided once from what the server holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CapabilityDrop {
    /// The server holds CAP_SETPCAP (a root server): the child also empties its bounding set
    /// and locks the securebits, so neither exec nor uid 0 can give any capability back.
    Everything,
    /// Without CAP_SETPCAP the bounding set and securebits cannot change; the child still
    /// clears its effective, permitted, inheritable and ambient sets, and `no_new_privs`
    /// stops exec from granting any (a setuid or file-capability program gains nothing).
    HeldSets,
}

/// `struct __user_cap_header_struct` and `__user_cap_data_struct`, version 3 (two data words).
#[repr(C)]
pub(super) struct CapHeader {
    pub(super) version: u32,
    pub(super) pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct CapData {
    pub(super) effective: u32,
    pub(super) permitted: u32,
    pub(super) inheritable: u32,
}

pub(super) const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

pub(super) const CAP_SETPCAP: u32 = 8;

/// Every securebit set and locked except KEEP_CAPS: NOROOT (uid 0 gains nothing at exec),
/// NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE, and the lock of KEEP_CAPS (left off).
pub(super) const SECUREBITS_LOCKED: libc::c_ulong = 0b1110_1111;

impl CapabilityDrop {
    pub(super) fn for_this_process() -> CapabilityDrop {
        let mut header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let mut data = [CapData::default(); 2];
        // SAFETY: capget reads the header and writes two data structs, as version 3 says.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_capget,
                std::ptr::from_mut(&mut header),
                data.as_mut_ptr(),
            )
        };
        if rc == 0 && data[0].effective & (1 << CAP_SETPCAP) != 0 {
            CapabilityDrop::Everything
        } else {
            CapabilityDrop::HeldSets
        }
    }

    pub(super) fn describe(self) -> &'static str {
        match self {
            CapabilityDrop::Everything => {
                "all dropped (effective, permitted, inheritable, ambient, bounding); securebits noroot, no_setuid_fixup and no_cap_ambient_raise set and locked"
            }
            CapabilityDrop::HeldSets => {
                "effective, permitted, inheritable and ambient cleared; the bounding set stays (the server lacks CAP_SETPCAP) and no_new_privs stops exec from granting any"
            }
        }
    }

    /// Sheds the capabilities. Runs in the spawn child: syscalls on stack values only.
    ///
    /// # Safety
    /// Only in the child made by [`crate::spawn::spawn`]; it changes credentials for good.
    pub(super) unsafe fn apply(self) -> Result<(), libc::c_int> {
        if self == CapabilityDrop::Everything {
            // SAFETY: prctl with integer arguments only; it sets and locks this process's
            // securebits, which needs CAP_SETPCAP (held: see `for_this_process`).
            if unsafe { libc::prctl(libc::PR_SET_SECUREBITS, SECUREBITS_LOCKED, 0, 0, 0) } != 0 {
                return Err(errno());
            }
            for cap in 0..64 as libc::c_ulong {
                // SAFETY: prctl with integer arguments only; it shrinks the bounding set.
                if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
                    // EINVAL: past the kernel's last capability.
                    match errno() {
                        libc::EINVAL => break,
                        other => return Err(other),
                    }
                }
            }
        }
        let clear_all = libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong;
        // SAFETY: prctl with integer arguments only; it empties the ambient set (EINVAL on a
        // kernel without ambient capabilities, where there is nothing to clear).
        let ambient = unsafe { libc::prctl(libc::PR_CAP_AMBIENT, clear_all, 0, 0, 0) };
        if ambient != 0 && errno() != libc::EINVAL {
            return Err(errno());
        }
        let header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let none = [CapData::default(); 2];
        // SAFETY: capset reads the header and the two data structs on this stack, as
        // version 3 says; it clears the effective, permitted and inheritable sets.
        let rc =
            unsafe { libc::syscall(libc::SYS_capset, std::ptr::from_ref(&header), none.as_ptr()) };
        if rc != 0 {
            return Err(errno());
        }
        Ok(())
    }
}

/// What a confined command of a server run by this user is left with, for `doctor`.
pub fn capability_report() -> &'static str {
    CapabilityDrop::for_this_process().describe()
}
