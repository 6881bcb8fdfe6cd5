import subprocess
import sys
import time

from tff_rec.training import resources


def test_memory_metrics_count_this_process_and_its_children():
  before = resources.memory_metrics()  # children may include a TFF worker
  assert before['memory/rss_mb'] > 10
  child = subprocess.Popen([sys.executable, '-c',
                            'import time; b = bytearray(200 << 20); time.sleep(30)'])
  try:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
      grown = (resources.memory_metrics()['memory/children_rss_mb']
               - before['memory/children_rss_mb'])
      if grown > 190:
        break
      time.sleep(0.05)
    assert grown > 190  # the child's 200 MB buffer
  finally:
    child.kill()
    child.wait()
