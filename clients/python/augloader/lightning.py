"""Lightning: a LightningDataModule over augloader daemons whose position
in the epoch is saved in the Trainer's checkpoints.

    from augloader.lightning import AugloaderDataModule
    dm = AugloaderDataModule("unix:///tmp/aug.sock", view="train", val_view="test")
    trainer.fit(model, datamodule=dm)                   # checkpoints hold the position
    trainer.fit(model, datamodule=dm, ckpt_path="last.ckpt")   # resumes at the next batch

Lightning saves the training loader's ``state_dict()`` in its checkpoints
and loads it on ``ckpt_path``, and it fetches one batch ahead of the
training step: the datamodule counts a batch as received in
``on_before_batch_transfer`` (the hook Lightning calls for the batch the
step is about to use), so a checkpoint taken after step k resumes at batch
k + 1, not k + 2 (a LightningModule that defines its own
``on_before_batch_transfer`` should call ``datamodule.received(batch)``
in it). Lightning sets the epoch at every epoch's start (the loader's
``sampler.set_epoch``; on a resumed fit it makes an epoch's iterator before
that call, so the datamodule sets the epoch Lightning is about to train
itself, and a state from an epoch's last batch resumes at the next epoch's
start, as Lightning does). Uses ``lightning.pytorch``, or ``pytorch_lightning``
when only that is installed.
"""
from __future__ import annotations

from typing import Optional

try:
    import lightning.pytorch as pl
except ImportError:  # pragma: no cover - depends on the environment
    import pytorch_lightning as pl  # type: ignore

from .torch import AugloaderDataset


class _TrainLoader:
    """What train_dataloader returns: the dataset, with state_dict and
    load_state_dict (Lightning saves and restores them) and a sampler
    whose set_epoch Lightning calls at each epoch's start."""

    def __init__(self, ds: AugloaderDataset, trainer=None):
        self.dataset = ds
        self.sampler = self
        self._trainer = trainer

    def set_epoch(self, epoch: int) -> None:
        self.dataset.set_epoch(epoch)

    def __iter__(self):
        return iter(self.dataset)

    def state_dict(self) -> dict:
        return self.dataset.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.dataset.load_state_dict(state)
        if not self.dataset.loaded_epoch_done:
            return
        # A state from an epoch's last batch. Lightning makes the resumed
        # fit's first iterator (and fetches its first batch) now, before it
        # calls set_epoch, so the dataset must read now what Lightning will
        # train as its next epoch: the next one (its fit loop records the
        # finished epoch as processed when it resumes), or, where its
        # counters say the finished epoch has not started (a checkpoint
        # of a fit that was itself resumed from an epoch's last step), the
        # finished one again, whose rest is empty: Lightning trains nothing
        # in it and moves on to the next epoch, whole.
        done = self.dataset.epoch
        self.dataset.set_epoch(done if _lightning_next_epoch(self._trainer) == done else done + 1)


def _lightning_next_epoch(trainer) -> Optional[int]:
    """The epoch a fit resumed from a checkpoint of an epoch's last step
    trains first, as its fit loop counts it (None without a trainer): the
    epoch in progress when the checkpoint was taken is marked processed
    (it had started and not been processed), else the processed count."""
    if trainer is None:
        return None
    p = trainer.fit_loop.epoch_progress.current
    return p.processed + (1 if p.started > p.processed else 0)


class AugloaderDataModule(pl.LightningDataModule):
    """Training batches from ``url`` (its ``view``), validation batches from
    ``val_url`` (default: ``url``) when ``val_view`` is given. Other
    keywords go to both :class:`AugloaderDataset` s (batch_size, fold,
    layout, device, pyg, …); rank and world come from torch.distributed (or torchrun's environment),
    which Lightning initialises."""

    def __init__(self, url: str, *, view: str = "", val_url: Optional[str] = None, val_view: Optional[str] = None,
                 batches_per_epoch: int = 0, drop_last: bool = False, **kw):
        super().__init__()
        self.url, self.view, self.val_url, self.val_view = url, view, val_url or url, val_view
        self.batches_per_epoch, self.drop_last, self.kw = batches_per_epoch, drop_last, kw
        self._train: Optional[AugloaderDataset] = None
        self._restored: Optional[dict] = None  # the training loader's state from a checkpoint, for train_dataloader

    def train_dataloader(self):
        self._train = AugloaderDataset(self.url, view=self.view, batches_per_epoch=self.batches_per_epoch,
                                       drop_last=self.drop_last, commit="manual", **self.kw)
        if self.trainer is not None:
            # The epoch Lightning trains next (what it will pass to
            # set_epoch): a resumed fit makes the epoch's iterator, and
            # fetches its first batch, before it calls set_epoch, so the
            # dataset must already be at that epoch (a fit resumed after
            # epoch e trained epoch 0's batches as epoch e + 1 otherwise).
            self._train.set_epoch(self.trainer.fit_loop.epoch_progress.current.processed)
        loader = _TrainLoader(self._train, self.trainer)
        if self._restored is not None:
            loader.load_state_dict(self._restored)
            self._restored = None
        return loader

    # Lightning saves a datamodule's state_dict() in every checkpoint and
    # gives it back on ckpt_path before it asks for the loaders, whatever
    # its fit loop makes of its own counters. The loader's state it keeps
    # itself is loaded only when that loop restarts mid-epoch: a fit
    # resumed from an epoch's last step and checkpointed again in the
    # next epoch saves counters that read as that epoch's start, and a
    # resume from there dropped the loader's position and trained the
    # epoch's first batches twice. The datamodule's own copy is always
    # loaded (Lightning's, when it comes too, is the same state).

    def state_dict(self) -> dict:
        if self._train is None:
            return {} if self._restored is None else {"train": self._restored}
        return {"train": self._train.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        if "train" in state:
            self._restored = state["train"]

    def val_dataloader(self):
        if self.val_view is None:
            return []
        return AugloaderDataset(self.val_url, view=self.val_view, **self.kw)

    def received(self, batch) -> None:
        """The training step is about to use batch: count it in the state."""
        if self._train is not None:
            self._train.commit(batch)

    def on_before_batch_transfer(self, batch, dataloader_idx: int):
        if self.trainer is not None and self.trainer.training:
            self.received(batch)
        return batch
