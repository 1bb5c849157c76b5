"""Checkpoint every N steps and resume after a failure: the step loop of `tfg run
--checkpoint-dir DIR --checkpoint-every N`, for a cluster or a local Session alike.

    >>> loop = CheckpointedSteps(sess, "ckpt/", every=10, steps=100)
    >>> loop.start          # 0, or the step of the checkpoint found in ckpt/ (restored)
    40
    >>> for i in loop.remaining():  # 40..99; ckpt/ is rewritten after steps 50, 60, ... 100
    ...     sess.run("loss", targets=["train"])

A checkpoint holds every variable and the number of steps done; it is written atomically, so
a crash leaves the previous one. Rerunning the same command after a failure restores it and
runs only the steps after it: no step before the checkpoint is lost or repeated.
"""
import os

from tfg.errors import TfgInputError
from tfg.executor import checkpoint


class CheckpointedSteps:
    """See the module docstring. `every=0` saves only after the last step."""

    def __init__(self, sess, directory, every, steps):
        if every is not None and every < 0:
            raise TfgInputError("--checkpoint-every must be at least 1")
        self.sess = sess
        self.directory = os.fspath(directory)
        self.every = every or 0
        self.steps = steps
        self.start = self._restore()

    def _restore(self):
        path = os.path.join(self.directory, checkpoint.FILENAME)
        if not os.path.exists(path):
            return 0
        # Refused (naming both graphs) when another graph wrote it: two graphs sharing a
        # directory must not resume each other's step count or variables.
        step = self.sess.checkpoint_step(self.directory)
        self.sess.restore(self.directory)
        return step or 0

    def remaining(self):
        """The step indices still to run; the checkpoint is saved after each due one."""
        for i in range(self.start, self.steps):
            yield i
            done = i + 1
            if done == self.steps or (self.every and done % self.every == 0):
                self.sess.save(self.directory, step=done)
