"""A seccomp filter for the code sandbox: refuse the system calls that escape its resource caps.

Namespaces and rlimits leave a few kernel objects uncounted: memory in ``memfd_create`` files and System V
shared memory or message queues (not charged to ``RLIMIT_AS`` and not on the size-capped tmpfs; one process
can hold gigabytes), POSIX message queues, and interfaces that only widen the kernel's attack surface or
reach into other processes (``ptrace``, ``process_vm_*``, ``pidfd_getfd``, ``bpf``, ``perf_event_open``,
``userfaultfd``, ``io_uring``, the kernel keyrings, which are not namespaced). This module compiles a
classic-BPF program that makes those calls fail with ``EPERM`` and refuses every call made through another
ABI (i386 ``int 0x80``, x32), which would otherwise get past a list of numbers. bubblewrap loads it with
``--seccomp FD`` just before it starts the program.

Example:
    >>> program = filter_program("x86_64")
    >>> len(program) % 8, len(program) > 8
    (0, True)
    >>> filter_program("sparc") is None
    True
"""

from __future__ import annotations

import errno
import platform
import struct

# Refused system calls, by name; numbers per architecture (from the kernel's unistd headers).
DENIED = ("shmget", "msgget", "mq_open", "memfd_create", "memfd_secret", "ptrace", "process_vm_readv",
          "process_vm_writev", "pidfd_getfd", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
          "io_uring_enter", "io_uring_register", "add_key", "request_key", "keyctl")
_NUMBERS = {
    "x86_64": dict(zip(DENIED, (29, 68, 240, 319, 447, 101, 310, 311, 438, 321, 298, 323, 425, 426, 427,
                                248, 249, 250))),
    "aarch64": dict(zip(DENIED, (194, 186, 180, 279, 447, 117, 270, 271, 438, 280, 241, 282, 425, 426, 427,
                                 217, 218, 219))),
}
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_BIT = 0x40000000  # x86_64 system call numbers with this bit use the x32 ABI

# classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h)
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW = 0x7FFF0000
_RET_EPERM = 0x00050000 | errno.EPERM
_NR_OFFSET, _ARCH_OFFSET = 0, 4  # struct seccomp_data: int nr; __u32 arch; ...


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program(machine: str | None = None) -> bytes | None:
    """The compiled filter (``struct sock_filter`` array) for ``machine`` (default: this one), or None
    where the architecture is not supported (the sandbox then reports the layer as missing)."""
    machine = machine or platform.machine()
    numbers = _NUMBERS.get(machine)
    if numbers is None:
        return None
    denied = sorted(set(numbers.values()))
    # layout: [arch check][load nr][x32 check]?[one jeq per number][allow][deny]
    body = [_insn(_LD_W_ABS, 0, 0, _NR_OFFSET)]
    checks = [(_JGE_K, _X32_BIT)] if machine == "x86_64" else []
    checks += [(_JEQ_K, nr) for nr in denied]
    for i, (op, k) in enumerate(checks):
        to_deny = len(checks) - i  # skip the remaining checks and the allow
        body.append(_insn(op, to_deny, 0, k))
    body += [_insn(_RET_K, 0, 0, _RET_ALLOW), _insn(_RET_K, 0, 0, _RET_EPERM)]
    arch_check = [_insn(_LD_W_ABS, 0, 0, _ARCH_OFFSET),
                  _insn(_JEQ_K, 0, len(body) - 1, _AUDIT_ARCH[machine])]  # another ABI: jump to deny
    return b"".join(arch_check + body)


__all__ = ["DENIED", "filter_program"]
