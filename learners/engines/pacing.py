"""Request and token pacing for a rate-limited server: ``--rpm`` and ``--tpm`` token buckets and a shared pause
after a 429.

A :class:`Pacer` sits between the engine's worker threads and the network (``HTTPClient`` asks it before every
attempt). It holds up to two token buckets and one "not before" time:

- **requests per minute** (``rpm``): a bucket of ``rpm / 60`` requests per second holding one request, so
  requests go out evenly spaced (``60 / rpm`` seconds apart), never in a burst of a minute's quota;
- **tokens per minute** (``tpm``): before a request its prompt's estimated tokens (``ceil(characters / 4)``)
  are taken from a bucket of ``tpm / 60`` tokens per second holding at most one second's worth; after the
  answer the tokens the server reports (prompt + completion) replace the estimate. The bucket may go into
  debt (a long answer), and later requests wait until it is paid back. A request larger than the bucket
  goes out once the bucket is full (it could never fit otherwise), and leaves the debt;
- **a shared pause**: an answer of 429 pauses every request of the pacer, not only the one that got it, for
  the server's ``Retry-After`` (else the retry's own backoff). Without it, ``concurrency`` threads retrying on
  their own would keep hitting a server that has asked them all to wait: a request storm;
- **a learned request rate**: the first 429 of a pause also sets a request rate no faster than the one the
  server accepted, 0.9 times (the answers it gave in the last minute, at least one) / (the time they took, at
  least the pause): after the pause the ``concurrency`` waiting requests go out spaced at that rate instead of
  all at once into the same limit. A 429 under a learned rate halves it. It applies only below ``rpm``.

Time and sleep are injectable, so the pacing is tested exactly without waiting.

Example:
    >>> clock = [0.0]
    >>> pacer = Pacer(rpm=120, clock=lambda: clock[0], sleep=lambda s: clock.__setitem__(0, clock[0] + s))
    >>> [round(pacer.acquire(), 3) for _ in range(4)]   # seconds each request waited: 0.5 s apart
    [0.0, 0.5, 0.5, 0.5]
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field


def estimate_tokens(text: str) -> int:
    """A prompt's tokens before the server counts them: ``ceil(len(text) / 4)`` (about four characters per token
    for English text with the common BPE vocabularies), at least 1.

    Example:
        >>> estimate_tokens(""), estimate_tokens("What is 2 + 2?")
        (1, 4)
    """
    return max(1, math.ceil(len(text) / 4))


@dataclass
class TokenBucket:
    """``rate`` units per second, holding at most ``capacity``; ``level`` may go negative (debt).

    Example:
        >>> b = TokenBucket(rate=2.0, capacity=2.0, level=2.0, stamp=0.0)
        >>> b.wait(3.0, now=0.0), b.take(3.0, now=0.0), round(b.wait(1.0, now=0.0), 3)
        (0.0, None, 1.0)
    """

    rate: float
    capacity: float
    level: float
    stamp: float

    def refill(self, now: float) -> None:
        if now <= self.stamp:  # a bucket that starts later (after a pause) fills from then on
            return
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` (at most the capacity: a larger request waits for a full bucket) is there."""
        self.refill(now)
        need = min(amount, self.capacity) - self.level
        return max(0.0, need / self.rate)

    def take(self, amount: float, now: float) -> None:
        self.refill(now)
        self.level -= amount


@dataclass
class Pacer:
    """The pacing of one engine's requests (see the module docstring); thread-safe.

    Args:
        rpm: the most requests per minute (``None``: no limit).
        tpm: the most tokens (prompt + completion) per minute (``None``: no limit).
        clock, sleep: time and waiting (``time.monotonic`` and ``time.sleep``; injectable for tests).
    """

    rpm: float | None = None
    tpm: float | None = None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    paused_until: float = 0.0
    waited_s: float = 0.0
    pauses: int = 0
    learned_rpm: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _requests: TokenBucket | None = field(default=None, repr=False)
    _tokens: TokenBucket | None = field(default=None, repr=False)
    _answered: list[float] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        for name in ("rpm", "tpm"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"--{name} {value!r}: must be a number > 0 (or left out for no limit)")
        now = self.clock()
        if self.rpm:
            self._requests = TokenBucket(rate=self.rpm / 60.0, capacity=1.0, level=1.0, stamp=now)
        if self.tpm:
            cap = max(1.0, self.tpm / 60.0)
            self._tokens = TokenBucket(rate=self.tpm / 60.0, capacity=cap, level=cap, stamp=now)

    @property
    def active(self) -> bool:
        """Whether this pacer limits anything (a pause after a 429 always applies)."""
        return self._requests is not None or self._tokens is not None or self.pauses > 0

    def acquire(self, tokens: int = 1) -> float:
        """Wait until one request of about ``tokens`` prompt tokens may go out, take it from the buckets, and
        return the seconds waited."""
        waited = 0.0
        while True:
            with self._lock:
                now = self.clock()
                delay = max(0.0, self.paused_until - now)
                if self._requests is not None:
                    delay = max(delay, self._requests.wait(1.0, now))
                if self._tokens is not None:
                    delay = max(delay, self._tokens.wait(float(tokens), now))
                if delay <= 0.0:
                    if self._requests is not None:
                        self._requests.take(1.0, now)
                    if self._tokens is not None:
                        self._tokens.take(float(tokens), now)
                    self.waited_s += waited
                    return waited
            self.sleep(delay)
            waited += delay

    def settle(self, estimated: int, actual: int | None) -> None:
        """A request was answered: replace its estimated tokens by the ``actual`` tokens the server reported
        (prompt + completion; ``None``: the estimate stands)."""
        with self._lock:
            now = self.clock()
            self._answered = [t for t in self._answered if now - t <= 60.0] + [now]
            if self._tokens is not None and actual is not None:
                self._tokens.take(float(actual - estimated), now)

    def pause(self, seconds: float) -> None:
        """Hold every request of this pacer for ``seconds`` from now (the server answered 429), and learn a
        request rate the server accepts (see the module docstring)."""
        with self._lock:
            now = self.clock()
            seconds = max(0.0, seconds)
            fresh = now >= self.paused_until  # the first 429 of this pause (the others were already in flight)
            until = now + seconds
            if until > self.paused_until:
                self.paused_until = until
                self.pauses += 1
            if not fresh:
                return
            recent = [t for t in self._answered if now - t <= 60.0]
            rate = 0.9 * max(1, len(recent)) / max(seconds, 1.0, now - recent[0] if recent else 0.0)
            if self.learned_rpm is not None:
                rate = min(rate, self.learned_rpm / 60.0 / 2.0)
            if self.rpm is not None and rate * 60.0 >= self.rpm:
                return
            self.learned_rpm = rate * 60.0
            self._requests = TokenBucket(rate=rate, capacity=1.0, level=1.0, stamp=until)

    def stats(self) -> dict[str, float | int | None]:
        """What the pacing did: the limits, seconds waited in all, and pauses after a 429."""
        return {"rpm": self.rpm, "tpm": self.tpm, "waited_s": round(self.waited_s, 3), "pauses_after_429": self.pauses,
                "learned_rpm": None if self.learned_rpm is None else round(self.learned_rpm, 2)}


__all__ = ["Pacer", "TokenBucket", "estimate_tokens"]
