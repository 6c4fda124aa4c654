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

Where the files are not there (not Linux, another architecture, a
thread of the caller's own: green threads), :func:`watch` returns
None and callers keep to wall time.
"""

from collections.abc import Callable
import functools
import os
import platform
import threading

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


class Watch:
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
        self.native_id = native_id
        self._clock = clock
        self._io_waits = io_waits
        self._dir = '/proc/self/task/%d/' % native_id
        self._last: tuple[float, str, str] | None = None
        #: Seconds the thread was seen asleep waiting on I/O.
        self.silence = 0.0

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

    def sample(self) -> float:
        """Look at the thread now; its :attr:`silence` so far."""
        now = self._clock()
        state = self._state()
        if state is None:
            self._last = None
            return self.silence
        syscall, switches = state
        last = self._last
        if last is not None and last[1:] == (syscall, switches):
            self.silence += now - last[0]
        self._last = (now, syscall, switches)
        return self.silence


def watch(native_id: int | None, clock: Callable[[], float],
          sampler: int) -> Watch | None:
    """A :class:`Watch` of thread *native_id*, or None where none can be.

    :param sampler: the native id of the thread that will sample it.

    None when the process cannot watch its threads (:func:`supported`),
    for no thread, for the sampler's own thread (a task run on a green
    thread shares its OS thread with the caller that waits for it) and
    for an id that is not one of this process's threads.
    """
    io_waits = _io_waits()
    if (native_id is None or io_waits is None or
            native_id == sampler or not supported() or
            not os.path.isdir('/proc/self/task/%d' % native_id)):
        return None
    return Watch(native_id, clock, io_waits)

