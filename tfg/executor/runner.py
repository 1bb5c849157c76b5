"""`Runner`: a loop of steps of one Session (init, restore, steps, checkpoints, progress), the
loop `tfg run --steps N` runs, as a library for Python callers.

    >>> runner = Runner(sess, fetches=["loss"], feeds=batch, targets=["train"], init=["init"],
    ...                 steps=100, checkpoint_dir="ckpt/", checkpoint_every=10,
    ...                 on_step=lambda done, total: print(done, "/", total))
    >>> runner.run()            # the last step's fetched values
    [array(0.25, dtype=float32)]
    >>> runner.start, runner.done   # resumed from the checkpoint of step 40; all 100 done
    (40, 100)

Order: `init` nodes run once (with the feeds; unused feeds are harmless), then variables are
restored from `restore` (a checkpoint directory), then the checkpoint in `checkpoint_dir`, if
any, is restored and only the steps after it run; `checkpoint_dir` is rewritten every
`checkpoint_every` steps and after the last; `save` receives every variable at the end. With
`trace=True` the last step is traced (`session.last_trace`); with `profile` (a
`tfg.passes.cost_model.CostModel`) every step is traced and recorded into it, the measured cost
model of `tfg run --profile`. `runner.last_values` holds the last completed step's values. A step that fails while running
with a `checkpoint_dir` says which step failed and what a rerun resumes from; an interrupt
(Ctrl-C) propagates with `runner.done` telling how many steps completed.
"""
import os

from tfg.errors import TfgError, TfgInputError, TfgRuntimeError
from tfg.executor.checkpoint import FILENAME
from tfg.executor.distributed.resume import CheckpointedSteps
from tfg.kernels.checkpoint_format import read_checkpoint_with_step


class Runner:
    """See the module docstring. `on_step(done, total)` is called once before the first step
    (done: the steps a resumed checkpoint holds) and after each step; `log(message)` receives
    notices (default: none)."""

    def __init__(self, session, fetches=None, feeds=None, targets=None, init=None, steps=1,
                 restore=None, save=None, checkpoint_dir=None, checkpoint_every=None,
                 trace=False, profile=None, on_step=None, log=None):
        if type(steps) is not int or steps < 1:
            raise TfgInputError(f"steps must be a positive int, not {steps!r}")
        if checkpoint_every is not None and not checkpoint_dir:
            raise TfgInputError("--checkpoint-every needs --checkpoint-dir")
        self.session = session
        self.fetches = fetches  # a name, a list or a dict, as Session.run takes them
        self.feeds = feeds or {}
        self.targets = _names(targets)
        self.init = _names(init)
        self.steps = steps
        self.restore_dir = restore
        self.save_dir = save
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every = checkpoint_every
        self.trace = trace
        self.profile = profile
        self.last_values = None  # the last completed step's fetched values
        self.on_step = on_step
        self.log = log or (lambda message: None)
        self.start = 0  # the first step this run executes (after a resumed checkpoint)
        self.done = 0  # steps completed, counting those of a resumed checkpoint

    def run(self):
        """Run init, restore, the steps and the saves; returns the last step's fetched values
        (shaped as `fetches` was given; None without fetches)."""
        sess = self.session
        if self.init:
            sess.run(None, feeds=self.feeds, targets=self.init)
        if self.restore_dir:
            sess.restore(self.restore_dir)
        values = None
        indices = range(self.steps)
        if self.checkpoint_dir:  # restores the last checkpoint, saves every N steps
            loop = CheckpointedSteps(sess, self.checkpoint_dir, self.checkpoint_every,
                                     self.steps)
            self.start = loop.start
            if 0 < loop.start < self.steps:
                self.log(f"resuming from step {loop.start} (checkpoint in {self.checkpoint_dir})")
            if loop.start >= self.steps and self.fetches:
                self.log(f"all {self.steps} steps are done (checkpoint in "
                         f"{self.checkpoint_dir}); computing the fetches without --target")
                values = self.last_values = sess.run(self.fetches, feeds=self.feeds)
            indices = loop.remaining()
        self.done = self.start
        if self.fetches or self.targets:
            values = self._steps(indices, values)
        if self.save_dir:
            sess.save(self.save_dir)
        return values

    def _steps(self, indices, values):
        last_index = self.steps - 1
        if self.on_step is not None:  # where the steps start (after a resumed checkpoint)
            self.on_step(self.done, self.steps)
        try:
            for i in indices:
                values = self.session.run(self.fetches or None, feeds=self.feeds,
                                          targets=self.targets,
                                          trace=self.profile is not None
                                          or (self.trace and i == last_index))
                self.done = i + 1
                self.last_values = values
                if self.profile is not None and self.session.last_trace is not None:
                    self.profile.record_step(self.session.last_trace.events)
                if self.on_step is not None:
                    self.on_step(self.done, self.steps)
        except TfgError as e:
            if not self.checkpoint_dir or e.exit_code != 1:
                raise
            # Say what a rerun resumes from and what it loses.
            msg = (f"{e} [step {self.done + 1} of {self.steps} failed; "
                   f"{checkpoint_note(self.checkpoint_dir, self.done)}]")
            try:
                err = type(e)(msg)
            except Exception:  # noqa: BLE001 - an error class with other arguments
                err = TfgRuntimeError(msg)
            raise err from e
        return values


def checkpoint_note(checkpoint_dir, done):
    """'the checkpoint in D holds step M: a rerun resumes there (K steps lost)'."""
    try:
        _, saved = read_checkpoint_with_step(os.path.join(checkpoint_dir, FILENAME))
        saved = int(saved or 0)
    except Exception:  # noqa: BLE001 - none yet (or unreadable): a rerun starts over
        return f"no checkpoint in {checkpoint_dir} yet: a rerun starts over ({done} steps lost)"
    return (f"the checkpoint in {checkpoint_dir} holds step {saved}: a rerun resumes there "
            f"({max(done - saved, 0)} steps lost)")


def _names(names):
    """A name or a list of names -> a list (targets' control marks dropped)."""
    if names is None:
        return []
    if isinstance(names, str):
        names = [names]
    return [n.lstrip("^") for n in names]
