import asyncio
import collections
import pathlib

import numpy as np
import pytest
import tensorflow_federated as tff

from tff_rec.training import checkpoints

STATE = collections.OrderedDict(
    weights=[np.arange(6, dtype=np.float32).reshape(2, 3), np.zeros([0], np.float32)],
    step=np.int64(7), lr=np.float32(0.5), empty=())


def _run(coroutine):
  return asyncio.run(coroutine)


def test_round_trip_keeps_structure_values_and_types(tmp_path):
  manager = checkpoints.NumpyProgramStateManager(tmp_path)
  assert _run(manager.load_latest(STATE)) == (None, 0)
  _run(manager.save(STATE, 3))
  state, version = _run(manager.load_latest(STATE))
  assert version == 3 and list(state) == list(STATE)
  np.testing.assert_array_equal(state['weights'][0], STATE['weights'][0])
  assert state['step'] == 7 and state['lr'] == np.float32(0.5)
  assert state['lr'].dtype == np.float32 and state['empty'] == ()


def test_keeps_the_latest_versions_only(tmp_path):
  manager = checkpoints.NumpyProgramStateManager(tmp_path, keep_total=2)
  for version in (1, 2, 5):
    _run(manager.save(STATE, version))
  assert _run(manager.get_versions()) == [2, 5]
  assert sorted(p.name for p in tmp_path.iterdir()) == ['state_2.npz', 'state_5.npz']
  with pytest.raises(tff.program.ProgramStateExistsError):
    _run(manager.save(STATE, 5))


def test_ignores_half_written_files(tmp_path):
  manager = checkpoints.NumpyProgramStateManager(tmp_path)
  _run(manager.save(STATE, 1))
  (tmp_path / 'tmpabc.tmp').write_bytes(b'partial')  # a save killed mid-write
  assert _run(manager.get_versions()) == [1]


def test_mismatched_state_is_a_clear_error(tmp_path):
  manager = checkpoints.NumpyProgramStateManager(tmp_path)
  _run(manager.save(STATE, 1))
  other = collections.OrderedDict(STATE, weights=[np.zeros([3, 3], np.float32),
                                                  np.zeros([0], np.float32)])
  with pytest.raises(checkpoints.CheckpointMismatchError, match=r'array \d is float32\[2, 3\], the state expects float32\[3, 3\]'):
    _run(manager.load(1, other))
  with pytest.raises(checkpoints.CheckpointMismatchError, match='holds 4 arrays; the state has 1'):
    _run(manager.load(1, [np.zeros(1)]))
  wider = collections.OrderedDict(STATE, weights=[np.zeros([2, 3], np.float64),
                                                  np.zeros([0], np.float32)])
  with pytest.raises(checkpoints.CheckpointMismatchError,
                     match=r'array \d is float32\[2, 3\], the state expects float64\[2, 3\]'):
    _run(manager.load(1, wider))


def test_a_save_that_fails_mid_write_leaves_no_version(tmp_path, monkeypatch):
  """The disk fills after some bytes: the version is absent, not half there."""
  manager = checkpoints.NumpyProgramStateManager(tmp_path)

  def cut_short(file, **arrays):  # numpy's writer, given a file or a path
    del arrays
    if hasattr(file, 'write'):
      file.write(b'PK partial')
    else:
      pathlib.Path(file).write_bytes(b'PK partial')
    raise OSError(28, 'No space left on device')

  monkeypatch.setattr(checkpoints.np, 'savez', cut_short)
  with pytest.raises(OSError, match='No space left'):
    _run(manager.save(STATE, 1))
  assert _run(manager.get_versions()) is None


def test_an_unreadable_latest_version_is_set_aside_for_the_newest_readable(tmp_path):
  manager = checkpoints.NumpyProgramStateManager(tmp_path, keep_total=3)
  for version in (2, 4, 6):
    _run(manager.save(collections.OrderedDict(STATE, step=np.int64(version)), version))
  cut = tmp_path / 'state_6.npz'
  cut.write_bytes(cut.read_bytes()[:100])  # a copy cut short
  flipped = bytearray((tmp_path / 'state_4.npz').read_bytes())
  flipped[-200] ^= 0xFF  # one byte of the arrays: numpy alone would load it
  (tmp_path / 'state_4.npz').write_bytes(bytes(flipped))
  state, version = _run(manager.load_latest(STATE))
  assert (version, int(state['step'])) == (2, 2)
  assert [(p.name, why.split(':')[0]) for p, why in manager.skipped] == [
      ('state_6.npz', 'BadZipFile'), ('state_4.npz', 'BadZipFile')]
  assert sorted(p.name for p in tmp_path.iterdir()) == [
      'state_2.npz', 'state_4.npz.unreadable', 'state_6.npz.unreadable']
  _run(manager.save(STATE, 4))  # the run saves that version afresh


def test_no_readable_version_names_the_folder(tmp_path):
  manager = checkpoints.NumpyProgramStateManager(tmp_path)
  _run(manager.save(STATE, 1))
  (tmp_path / 'state_1.npz').write_bytes(b'')
  with pytest.raises(checkpoints.NoReadableCheckpointError,
                     match=f'no readable checkpoint in {tmp_path}: state_1.npz'):
    _run(manager.load_latest(STATE))


def test_another_runs_state_is_not_passed_over(tmp_path):
  manager = checkpoints.NumpyProgramStateManager(tmp_path)
  _run(manager.save(STATE, 1))
  _run(manager.save([np.zeros(1)], 2))
  with pytest.raises(checkpoints.CheckpointMismatchError):
    _run(manager.load_latest(STATE))
