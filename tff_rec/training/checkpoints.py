"""Program state saved as .npz files: a light tff.program.ProgramStateManager.

Why not tff.program.FileProgramStateManager: it writes a SavedModel per save,
and each save grew the trainer's memory by ~1.5 MB (measured on TFF 0.87 /
TF 2.14), which breaks flat memory over long runs. This one flattens the
state with tf.nest (TFF's learning state is attrs classes and containers of
arrays), writes the leaves with numpy to a temporary file and renames it into
place, so a checkpoint is either whole or absent. Loading restores the
structure of the `structure` passed in, and checks every leaf's shape and
dtype against it. A file damaged after it was written (a disk that filled, a
copy cut short) is set aside and the next older version loaded instead.
"""

import os
import pathlib
import re
import tempfile
import zipfile

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

_NAME = re.compile(r'^state_(\d+)\.npz$')


class CheckpointMismatchError(ValueError):
  """A saved state does not match the structure it is loaded into."""


class NoReadableCheckpointError(RuntimeError):
  """Versions were saved, and none of them can be read."""


# What numpy raises for a .npz that is cut short or corrupt.
_UNREADABLE = (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile)


class NumpyProgramStateManager(tff.program.ProgramStateManager):
  """Versions of program state in `root_dir/state_<version>.npz`.

  `skipped` lists (file, why) for each version load_latest could not read; each
  was renamed to `<file>.unreadable`, so the run saves that version afresh.
  """

  def __init__(self, root_dir: str | os.PathLike, keep_total: int = 2):
    if keep_total < 1:
      raise ValueError(f'keep_total must be >= 1, got {keep_total}')
    self._root = pathlib.Path(root_dir)
    self._keep_total = keep_total
    self.skipped: list[tuple[pathlib.Path, str]] = []

  def _path(self, version: int) -> pathlib.Path:
    return self._root / f'state_{version}.npz'

  async def get_versions(self) -> list[int] | None:
    if not self._root.is_dir():
      return None
    versions = sorted(int(m[1]) for p in self._root.iterdir() if (m := _NAME.match(p.name)))
    return versions or None

  async def load(self, version: int, structure):
    path = self._path(version)
    if not path.exists():
      raise tff.program.ProgramStateNotFoundError(version=version)
    template = tf.nest.flatten(structure)
    with zipfile.ZipFile(path) as archive:  # numpy reads arrays without their checksums
      damaged = archive.testzip()
    if damaged is not None:
      raise zipfile.BadZipFile(f'{damaged} fails its checksum')
    with np.load(path) as saved:
      leaves = [saved[f'leaf_{i}'] for i in range(len(saved.files))]
    if len(leaves) != len(template):
      raise CheckpointMismatchError(
          f'{path} holds {len(leaves)} arrays; the state has {len(template)}: it '
          'was saved by another model or algorithm')
    for i, (leaf, like) in enumerate(zip(leaves, template)):
      like = np.asarray(like)
      if leaf.shape != like.shape or leaf.dtype != like.dtype:
        raise CheckpointMismatchError(
            f'{path}: array {i} is {leaf.dtype}{list(leaf.shape)}, the state '
            f'expects {like.dtype}{list(like.shape)}')
    return tf.nest.pack_sequence_as(
        structure, [leaf if isinstance(like, np.ndarray) else leaf[()]
                    for leaf, like in zip(leaves, template)])

  async def load_latest(self, structure):
    """(The newest readable version's state, its version), or (None, 0) if none was
    saved. Unreadable versions are set aside (`skipped`); if no saved version is
    readable, NoReadableCheckpointError names the folder."""
    for version in reversed(await self.get_versions() or []):
      try:
        return await self.load(version, structure), version
      except CheckpointMismatchError:
        raise  # readable, but another run's: resuming from an older one would hide it
      except _UNREADABLE as e:
        path = self._path(version)
        os.replace(path, path.with_name(path.name + '.unreadable'))
        self.skipped.append((path, f'{type(e).__name__}: {e}'))
    if self.skipped:
      raise NoReadableCheckpointError(
          f'no readable checkpoint in {self._root}: '
          + '; '.join(f'{path.name} ({why})' for path, why in self.skipped)
          + ' (each set aside as .unreadable)')
    return None, 0

  async def save(self, program_state, version: int) -> None:
    path = self._path(version)
    if path.exists():
      raise tff.program.ProgramStateExistsError(version=version, path=str(self._root))
    self._root.mkdir(parents=True, exist_ok=True)
    leaves = {f'leaf_{i}': np.asarray(leaf)
              for i, leaf in enumerate(tf.nest.flatten(program_state))}
    with tempfile.NamedTemporaryFile(dir=self._root, suffix='.tmp', delete=False) as f:
      np.savez(f, **leaves)
    os.replace(f.name, path)
    for old in (await self.get_versions())[:-self._keep_total]:
      self._path(old).unlink()
