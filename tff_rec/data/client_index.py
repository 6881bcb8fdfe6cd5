"""Client ids (a dataset's user ids as strings) to the users' positions, found
in the ids' sorted order: a dict of a million ids costs about 60 MB beside them
(measured), the sorted order nothing when the ids are ascending already (a
sequence file's, read in id order) and two arrays of N otherwise."""

from typing import Sequence

import numpy as np


class ClientIndex:
  """client id -> the user's position. `user_ids`: every user's id (any numpy
  dtype); `positions`: the users that are clients (default: all, in order)."""

  def __init__(self, user_ids: np.ndarray, positions: np.ndarray | None = None):
    ids = np.asarray(user_ids) if positions is None else np.asarray(user_ids)[positions]
    self._positions = None if positions is None else np.asarray(positions)
    ascending = len(ids) < 2 or bool(np.all(ids[1:] > ids[:-1]))
    self._order = None if ascending else np.argsort(ids, kind='stable')
    self._sorted = ids if ascending else ids[self._order]
    self.ids: Sequence[str] = [str(u) for u in ids]  # the client ids, in user order

  def __getitem__(self, client_id: str) -> int:
    try:
      key = self._sorted.dtype.type(client_id)
    except (ValueError, OverflowError, TypeError):
      raise KeyError(client_id) from None
    k = int(np.searchsorted(self._sorted, key))
    if k == len(self._sorted) or str(self._sorted[k]) != client_id:
      raise KeyError(client_id)  # e.g. '007' for user 7: not the id as the data have it
    k = k if self._order is None else int(self._order[k])
    return k if self._positions is None else int(self._positions[k])
