"""launch.download's errors: the cache folder's named as such, not as the network's."""

import subprocess
import sys

from tests import conftest


def test_a_cache_dir_that_cannot_be_a_folder_is_named_not_blamed_on_the_network(tmp_path):
  cache = tmp_path / 'a_file'
  cache.write_text('not a folder')
  done = subprocess.run([sys.executable, '-m', 'launch.download', f'--cache_dir={cache}'],
                        cwd=conftest.REPO, capture_output=True, text=True, timeout=120)
  assert done.returncode == 1 and 'network' not in done.stderr
  assert (f'error: --cache_dir={cache}: File exists: {cache}; name a folder that can be '
          'created and written') in done.stderr
