# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""How long a thread has slept waiting on I/O: the silence of its peer.

A cell's task runs in a worker thread. Wall time since it began does not
say whether its cell kept it waiting: in a busy process the thread may
have waited for the GIL, a lock or a CPU all that time, its database
having answered long ago. The kernel knows the difference. On Linux,
``/proc/self/task/<tid>/syscall`` names the system call a sleeping
thread is in, and ``/proc/self/task/<tid>/status`` counts the times it
was switched out. A :class:`Watch` samples both: between two samples
where the thread sleeps in the same call that waits on a socket or a
file (poll, select, recv, read, connect, send...) and was never switched
in between, it slept there all along: its peer said nothing. Those
intervals add up to :attr:`Watch.silence`. Time spent runnable, running,
or waiting for a lock (the GIL included) is never counted.

A listing task waits on nothing but its cell's database, so its silence
is the time that cell kept it waiting without answering (up to one
sampling interval less per wait, never more).

A task on an eventlet green thread shares its OS thread with the
caller that waits for it, and the kernel cannot tell them apart. There
eventlet's hub tells: a green thread that waits on I/O is parked in the
hub's listener for its file descriptor, a new listener for each wait. A
:class:`GreenWatch` samples that: between two samples where the green
thread is parked in the same listener, and its descriptor has nothing
for it (not readable, or not writable, as it waits), it slept there all
along. Time it was runnable while another green thread computed is
never counted, nor a wait whose answer has come and waits for the hub.

Where neither can watch (not Linux or another architecture for an OS
thread, a hub without listeners for a green one), :func:`watch`
returns None and callers keep to wall time.
"""

from collections.abc import Callable
import functools
import os
import platform
import sys
import threading
from typing import Any

#: System calls, by machine, a thread sleeps in while it waits on I/O.
#: From the kernel's unistd tables: read, write, poll, select, connect,
#: sendto, recvfrom, sendmsg, recvmsg, epoll_wait, pselect6, ppoll,
#: epoll_pwait (those the machine has).
IO_WAITS = {
    'x86_64': frozenset({0, 1, 7, 23, 42, 44, 45, 46, 47, 232, 270, 271,
                         281}),
    'aarch64': frozenset({22, 63, 64, 72, 73, 203, 206, 207, 211, 212}),
}


def _io_waits() -> frozenset[int] | None:
    return IO_WAITS.get(platform.machine())


def _read(path: str) -> str | None:
    try:
        with open(path, encoding='ascii', errors='replace') as f:
            return f.read()
    except OSError:
        return None


@functools.cache
def supported() -> bool:
    """Whether this process can watch its threads (Linux, a known CPU).

    Found once per process.
    """
    if _io_waits() is None:
        return False
    own = '/proc/self/task/%d/' % threading.get_native_id()
    return (_read(own + 'syscall') is not None and
            _read(own + 'status') is not None)


class _Sampled:
    """Silence added up from samples of what a thread waits in.

    A subclass's :meth:`_state` names the wait the thread sleeps in
    without an answer, or None; two samples naming the same wait (equal
    states) mean it slept there all along, and the time between them
    is added to :attr:`silence`.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._last: tuple[float, Any] | None = None
        #: Seconds the thread was seen asleep waiting on I/O.
        self.silence = 0.0

    def _state(self) -> Any:
        raise NotImplementedError

    def sample(self) -> float:
        """Look at the thread now; its :attr:`silence` so far."""
        now = self._clock()
        state = self._state()
        if state is None:
            self._last = None
            return self.silence
        if self._last is not None and self._last[1] == state:
            self.silence += now - self._last[0]
        self._last = (now, state)
        return self.silence


class Watch(_Sampled):
    """The silence one OS thread has slept through, sampled.

    :param native_id: the thread's ``threading.get_native_id()``.
    :param clock: seconds, monotonic.

    Call :meth:`sample` now and then (from another thread); each call
    adds to :attr:`silence` the time since the previous one if the
    thread slept through it in one wait on I/O. Not thread-safe: one
    sampler.
    """

    def __init__(self, native_id: int, clock: Callable[[], float],
                 io_waits: frozenset[int]) -> None:
        super().__init__(clock)
        self.native_id = native_id
        self._io_waits = io_waits
        self._dir = '/proc/self/task/%d/' % native_id

    def _state(self) -> tuple[str, str] | None:
        """(the call it sleeps in, its switch counts); None if it runs."""
        syscall = _read(self._dir + 'syscall')
        if syscall is None:
            return None
        fields = syscall.split()
        if not fields or not fields[0].isdigit():
            return None     # 'running'
        if int(fields[0]) not in self._io_waits:
            return None
        status = _read(self._dir + 'status')
        if status is None:
            return None
        switches = ' '.join(line for line in status.splitlines()
                            if 'ctxt_switches' in line)
        return syscall, switches


class GreenWatch(_Sampled):
    """The silence one eventlet green thread has slept through, sampled.

    :param green: the green thread (its greenlet).
    :param hub: the eventlet hub it runs under (its OS thread's).
    :param clock: seconds, monotonic.

    Call :meth:`sample` now and then, from another green thread of the
    same OS thread (the hub's structures are not shared across threads);
    each call adds to :attr:`silence` the time since the previous one
    if *green* was parked in one I/O wait all along (the same listener
    of the hub's) and its descriptor is still not ready: its peer said
    nothing. Not thread-safe: one sampler.
    """

    def __init__(self, green: Any, hub: Any,
                 clock: Callable[[], float]) -> None:
        super().__init__(clock)
        self.green = green
        self._hub = hub
        #: (listener, event type, descriptor) of the waits last seen.
        self._seen: list[tuple[Any, Any, int]] = []

    def _listeners(self, evtype: Any, fileno: int) -> list[Any]:
        hub = self._hub
        primary = hub.listeners[evtype].get(fileno)
        return (([primary] if primary is not None else []) +
                list(hub.secondaries[evtype].get(fileno, ())))

    def _ours(self, listener: Any) -> bool:
        # eventlet's waits (trampoline, green select) give the hub the
        # waiting green thread's own throw, to end the wait with an error.
        return (getattr(listener.tb, '__self__', None) is self.green or
                getattr(listener.cb, '__self__', None) is self.green)

    def _parked(self) -> list[tuple[Any, Any, int]]:
        """(listener, event type, descriptor) of each wait it is in.

        Empty: it waits on no I/O (it runs, is runnable, or waits on a
        lock, an event or a timer). The waits last seen are looked at
        first: a wait's listeners come and go together.
        """
        if self._seen and all(
                any(listener is other
                    for other in self._listeners(evtype, fileno))
                for listener, evtype, fileno in self._seen):
            return self._seen
        hub = self._hub
        self._seen = [(listener, evtype, fileno)
                      for evtype in (hub.READ, hub.WRITE)
                      for fileno in (set(hub.listeners[evtype]) |
                                     set(hub.secondaries[evtype]))
                      for listener in self._listeners(evtype, fileno)
                      if self._ours(listener)]
        return self._seen

    def _state(self) -> tuple[Any, ...] | None:
        """The listeners it sleeps in with nothing ready; None otherwise.
        """
        parked = self._parked()
        if not parked:
            return None
        real = _original_select()
        try:
            poll = real.poll()
            for _listener, evtype, fileno in parked:
                poll.register(fileno, real.POLLIN if evtype == self._hub.READ
                              else real.POLLOUT)
            if poll.poll(0):
                return None     # ready (or closed): the peer spoke
        except (OSError, ValueError):
            return None
        return _Waits(listener for listener, _evtype, _fileno in parked)


class _Waits(tuple[Any, ...]):
    """A green thread's listeners, equal only to the same objects.

    A new wait is a new listener, even on the same descriptor.
    """

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, _Waits) and len(self) == len(other) and
                all(a is b for a, b in zip(self, other)))

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__


@functools.cache
def _original_select() -> Any:
    """The select module eventlet has not patched."""
    from eventlet import patcher

    return patcher.original('select')


def _green_thread() -> tuple[Any, Any] | None:
    """(the calling green thread, its eventlet hub); None: not one.

    A green thread is a greenlet eventlet's hub runs (its parent is the
    hub's greenlet). Nothing is imported: without greenlet and eventlet
    loaded, there is no green thread. A hub without the listeners this
    module reads (another hub, another eventlet) is None too.
    """
    greenlet = sys.modules.get('greenlet')
    hubs = sys.modules.get('eventlet.hubs')
    if greenlet is None or hubs is None:
        return None
    current = greenlet.getcurrent()
    if current.parent is None:
        return None     # an OS thread's own greenlet
    hub = hubs.get_hub()
    if (current.parent is not getattr(hub, 'greenlet', None) or
            not all(hasattr(hub, name) for name in
                    ('READ', 'WRITE', 'listeners', 'secondaries'))):
        return None
    return current, hub


def watch(native_id: int | None, clock: Callable[[], float],
          sampler: int) -> Watch | GreenWatch | None:
    """A watch of thread *native_id*, or None where none can be.

    :param native_id: the watched thread's ``threading.get_native_id()``.
    :param sampler: the native id of the thread that will sample it.

    An OS thread other than the sampler's: a :class:`Watch`, unless the
    process cannot watch its threads (:func:`supported`) or the id is
    not one of this process's threads. The sampler's own OS thread: the
    calling green thread, if it is one (eventlet's green threads share
    their OS thread), is watched by a :class:`GreenWatch` (call it from
    that green thread); else None.
    """
    if native_id is not None and native_id == sampler:
        green = _green_thread()
        if green is None:
            return None
        return GreenWatch(*green, clock)
    io_waits = _io_waits()
    if (native_id is None or io_waits is None or not supported() or
            not os.path.isdir('/proc/self/task/%d' % native_id)):
        return None
    return Watch(native_id, clock, io_waits)

