"""CTR files from sequence files, written again only when what fixes their rows
changes."""

from experiments import clicks


def test_a_clicks_file_is_written_again_only_when_its_sequences_or_seed_change(tmp_path):
  sequences = tmp_path / 'seq.txt'
  sequences.write_text('1 5 6 7\n2 6 8\n')
  out = tmp_path / 'data' / 'clicks_s3.csv'
  assert clicks.clicks_file(sequences, out, seed=3) == out
  lines = out.read_text().splitlines()
  assert lines[0] == 'user,item,history,label,test' and len(lines) == 1 + 2 * 3
  assert lines[1:3] == ['1,6,5,1,0', '1,8,5,0,0']  # 8: the one item user 1 never had
  written = out.stat().st_mtime_ns
  clicks.clicks_file(sequences, out, seed=3)  # the same sequences and seed: kept
  assert out.stat().st_mtime_ns == written
  sequences.write_text('1 5 6\n2 6 7\n')  # other sequences: written again
  clicks.clicks_file(sequences, out, seed=3)
  assert len(out.read_text().splitlines()) == 1 + 2 * 2
