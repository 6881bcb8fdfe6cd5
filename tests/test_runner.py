"""tff_rec.runner: what it refuses before a run starts."""

import numpy as np
import pytest

from tff_rec import registry
from tff_rec import runner


@pytest.mark.parametrize('client_input, sends_examples', [
    ((np.int32(3), np.int64(7)), False),  # index and seed
    (((), np.zeros(1, np.int32)), True),  # a client of one example still ships it
    ({'x': np.zeros((2, 3))}, True)])
def test_with_client_files_only_a_clients_index_and_seed_may_be_sent(client_input,
                                                                      sends_examples):
  assert runner._sent_arrays(client_input) == sends_examples  # pylint: disable=protected-access
