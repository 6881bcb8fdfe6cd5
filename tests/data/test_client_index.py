"""client_index.ClientIndex: client ids to user positions through the ids' order."""

import numpy as np
import pytest

from tff_rec.data import client_index


@pytest.mark.parametrize('user_ids', [
    np.array([3, 7, 12, 40, 41]),  # ascending: no copy kept
    np.array([40, 3, 12, 7, 41]),  # any order
    np.array(['b7', 'a3', 'c12', 'a40', 'z'])])  # not numbers
def test_each_client_id_finds_its_user_and_other_ids_none(user_ids):
  index = client_index.ClientIndex(user_ids)
  assert index.ids == [str(u) for u in user_ids]
  for position, client_id in enumerate(index.ids):
    assert index[client_id] == position
  not_as_written = '007' if user_ids.dtype.kind == 'i' else 'a'  # user 7's id padded
  for unknown in ('5', not_as_written, '', 'x9', '99999999999999999999'):
    with pytest.raises(KeyError):
      index[unknown]  # pylint: disable=pointless-statement


def test_only_the_users_that_are_clients_are_found_at_their_positions():
  user_ids = np.array([10, 20, 30, 40])
  index = client_index.ClientIndex(user_ids, positions=np.array([0, 2, 3]))
  assert index.ids == ['10', '30', '40']
  assert [index[c] for c in index.ids] == [0, 2, 3]
  with pytest.raises(KeyError):
    index['20']  # pylint: disable=pointless-statement
