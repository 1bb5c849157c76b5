"""A one-line progress display on stderr for long commands, shown on a terminal only.

    with Progress(100, describe=steps_line, enabled=None) as p:   # None: stderr is a TTY
        for i in range(100):
            step()
            p.update(i + 1)
    # on a terminal, after 1 s:  "step 37/100  12.4 steps/s  ETA 0:05  loss=0.1234"
    # piped, or a run under 1 s:  nothing at all

The line is drawn by a small daemon thread at most 10 times a second, so a long step or a
long pass still shows its elapsed time, and the caller's loop never pays for drawing. It only
appears once the command has run for `delay` seconds, so short commands stay silent. It is
written with carriage returns and padded with spaces over the previous line, so any terminal
shows it; the current value (e.g. the loss) is in bold only where `colour_wanted` says so (a
terminal, NO_COLOR unset); stdout is never touched (it carries data).
"""
import math
import os
import sys
import threading
import time

INTERVAL = 0.1


def default_delay():
    """Seconds before the line first appears: 1, or TFG_PROGRESS_DELAY (0 = at once)."""
    try:
        delay = float(os.environ.get("TFG_PROGRESS_DELAY", "1"))
    except ValueError:
        return 1.0
    # nan or inf would break Event.wait in the ticker thread; a day means "never" anyway
    return min(max(delay, 0.0), 86400.0) if math.isfinite(delay) else 1.0


def wanted(flag, stream=None):
    """Whether to show progress: `flag` from --progress/--no-progress, None = on a terminal."""
    if flag is not None:
        return bool(flag)
    stream = stream or sys.stderr
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def colour_wanted(stream=None, environ=None):
    """ANSI colour only on a terminal, and never with NO_COLOR set (https://no-color.org)."""
    environ = os.environ if environ is None else environ
    if environ.get("NO_COLOR"):
        return False
    return wanted(None, stream)


def value_text(name, value):
    """The progress line's view of a fetched value: `loss=0.1234` for a single number,
    `y mean=0.5` for a numeric array, None otherwise.

    Before: value_text("loss", np.float32(0.12345678)).  After: 'loss=0.1235'.
    """
    size = getattr(value, "size", None)
    try:
        if size == 1 or isinstance(value, (int, float)):
            return f"{name}={float(value.item() if size == 1 else value):.4g}"
        kind = getattr(getattr(value, "dtype", None), "kind", "")
        if size and kind in "iuf":
            return f"{name} mean={float(value.mean()):.4g}"
    except (TypeError, ValueError, OverflowError):  # strings, complex: nothing to show
        return None
    return None


def format_duration(seconds):
    """0:05, 12:40, 1:02:03."""
    seconds = int(round(max(seconds, 0)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def steps_line(p, elapsed):
    """`step 37/100  12.4 steps/s  ETA 0:05`, at the end `step 100/100  12.4 steps/s  in 0:08`
    (the rate counts only the steps this process ran, not those resumed from a checkpoint)."""
    width = len(str(p.total))
    line = f"step {p.n:>{width}}/{p.total}"
    done = p.n - p.start
    if done > 0 and elapsed > 0:
        rate = done / elapsed
        line += f"  {rate:.1f} steps/s" if rate >= 1 else f"  {1 / rate:.2f} s/step"
        if p.n < p.total:
            line += f"  ETA {format_duration((p.total - p.n) / rate)}"
        else:  # the line a finished run leaves behind
            line += f"  in {format_duration(elapsed)}"
    if p.value:
        line += "  " + p.value
    return line


def passes_line(p, elapsed):
    """`pass 3/16 constfold  0:04` (elapsed time of the whole run)."""
    if not p.total:  # before the first pass: loading the passes, collecting what to keep
        return f"optimize: starting  {format_duration(elapsed)}"
    width = len(str(p.total))
    return f"pass {p.n:>{width}}/{p.total} {p.label or ''}  {format_duration(elapsed)}"


class Progress:
    """A self-overwriting status line; a no-op unless `enabled` (None: the stream is a TTY).

    `describe(progress, elapsed) -> str` makes the line from `n`, `total`, `start`, `label`.
    `leave=True` keeps the final line (with a newline) when it was shown; otherwise `close()`
    erases it, so what follows on stderr starts on a clean line.
    """

    def __init__(self, total, describe=steps_line, enabled=None, stream=None, start=0,
                 delay=None, interval=INTERVAL, leave=False):
        self.stream = stream or sys.stderr
        self.total, self.start, self.n, self.label = total, start, start, None
        self.value = None  # text of the current value (value_text), shown by steps_line
        self.describe, self.interval, self.leave = describe, interval, leave
        self.delay = default_delay() if delay is None else delay
        self.enabled = wanted(enabled, self.stream)
        self.colour = self.enabled and colour_wanted(self.stream)
        self.t0 = time.monotonic()
        self._shown = 0  # width of the line on screen; 0 = nothing drawn yet
        self._line = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        if self.enabled:
            self._thread = threading.Thread(target=self._tick, name="tfg-progress", daemon=True)
            self._thread.start()

    def update(self, n, label=None, value=None):
        """Record progress (and the current value's text); drawing happens on the ticker
        thread."""
        self.n = n
        if label is not None:
            self.label = label
        if value is not None:
            self.value = value

    def close(self):
        """Stop drawing; erase the line (or keep it with `leave`)."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=1.0)
        self._thread = None
        with self._lock:
            if not self._shown:
                return
            if self.leave:
                self._draw_locked()
                self._write("\n")
            else:
                self._write("\r" + " " * self._shown + "\r")
            self._shown = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _tick(self):
        # The first draw waits for the delay: a command that ends sooner prints nothing.
        if self._stop.wait(self.delay):
            return
        while True:
            with self._lock:
                if self._stop.is_set():
                    return
                self._draw_locked()
            if self._stop.wait(self.interval):
                return

    def _draw_locked(self):
        line = self.describe(self, time.monotonic() - self.t0)
        # A line wider than the terminal wraps, and "\r" then rewrites only its last row.
        line = line[:max(_columns(self.stream) - 1, 10)]
        if line == self._line:  # 10 Hz redraws of an unchanged line are wasted terminal I/O
            return
        self._line = line
        pad = " " * max(self._shown - len(line), 0)
        shown = line
        if self.colour and self.value and line.endswith(self.value):  # bold: the number to watch
            shown = line[:-len(self.value)] + "\033[1m" + self.value + "\033[0m"
        self._write("\r" + shown + pad)
        self._shown = len(line)

    def _write(self, text):
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: stop drawing, keep running
            self._stop.set()


def _columns(stream):
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (AttributeError, OSError, ValueError):
        return 80
